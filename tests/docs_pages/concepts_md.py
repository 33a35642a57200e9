# Generated from docs/concepts.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/concepts.md:43

import fencing

fence = fencing.connect().fence("invoice:42", ttl=10)  # issuer from FENCING_URL or embedded SQLite
store = fencing.FileStore("invoice-42.json")  # a guarded resource

with fence.hold() as token:  # acquire; renew every ttl/3 in the background; release
    store.write(b'{"total": 100}', token)
