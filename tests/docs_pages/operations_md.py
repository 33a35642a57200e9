# Generated from docs/operations.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/operations.md:342

import os

import redis

import fencing

r = redis.Redis.from_url(os.environ.get("FENCING_URL", "redis://localhost:6379/0"))
store = fencing.FileStore("invoice-42.json")  # the resource, now checking tokens

lock = r.lock("invoice:42", timeout=10, lock_class=fencing.FencedLock)  # was: r.lock(...)
with lock:
    store.write(b'{"total": 100}', lock.fence_token)  # new: pass the token to the resource
