# Generated from docs/stores.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/stores.md:25

import fencing

fence = fencing.connect().fence("invoice:42", ttl=10)  # $FENCING_URL, else embedded SQLite
store = fencing.FileStore("invoice-42.json")
with fence.hold() as token:
    store.write(b'{"total": 100}', token)  # StaleTokenError if a newer token wrote it

store.read()  # b'{"total": 100}'
store.token  # the high-water mark: the token of the last accepted write
store.read_with_token()  # (token, data) from one consistent version of the file

with fence.hold() as token:  # a read-modify-write: read, change and write as one step
    store.update(lambda current: (current or b"") + b"paid\n", token)

# docs/stores.md:88

import tempfile
from pathlib import Path

import fencing

store = fencing.FileStore(Path(tempfile.mkdtemp()) / "counter")
store.write(b"0", 0)  # written earlier, by token 0
fence = fencing.MemoryFence("counter", ttl=10)

token = fence.acquire()
store.claim(token)  # from here on every older token is refused
count = int(store.read())  # read, compute, as slowly as needed ...
store.write(b"%d" % (count + 1), token)  # ... and write: nothing older landed meanwhile
fence.release(token)
print(store.read_with_token())  # (1, b'1')

# docs/stores.md:169

@fencing.guard(mark=fencing.FileMark("ledger.mark"), name="ledger")  # /var/lib/app/...
def append_entry(entry: bytes) -> None: ...


append_entry(token, b"...")  # guarded(token, *args, **kwargs) -> fn's result

# docs/stores.md:248

import fencing

ledger: list[str] = []
append = fencing.guard(ledger.append, name="ledger")

append.claim(5)  # the new holder (token 5) claims, then reads
entries = list(ledger)
try:
    append(4, "stale entry")  # the old holder wakes up in between: refused
except fencing.StaleTokenError as exc:
    print(exc)
append(5, f"entry {len(entries) + 1}")
print(ledger)  # ['entry 1']
