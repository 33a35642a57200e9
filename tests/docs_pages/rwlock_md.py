# Generated from docs/rwlock.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/rwlock.md:11

import fencing

backend = fencing.MemoryIssuer()  # or fencing.connect(url): see "Backends" below
rw = backend.rwlock("catalog", ttl=30)
mark = fencing.MemoryMark()  # the catalog's high-water mark
catalog: list[str] = []
publish = fencing.guard(catalog.append, mark=mark)

with rw.write.hold() as token:  # exclusive: a new token
    publish(token, "first edition")

with rw.read.hold() as token, rw.read.hold() as again:  # shared: one token, the epoch
    mark.claim(token)  # before reading: from now on, every older token is refused
    print(token == again, catalog)  # True ['first edition']
