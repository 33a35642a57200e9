# Generated from docs/redlock.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/redlock.md:17

import os

import redis

import fencing
from fencing.redis import RedlockFence

url = os.environ.get("FENCING_URL", "redis+redlock://r1:6379,r2:6379,r3:6379")
hosts = url.partition("://")[2].split(",")  # ["r1:6379", "r2:6379", "r3:6379"]
nodes = [redis.Redis.from_url(f"redis://{h}", socket_timeout=1) for h in hosts]
fence = RedlockFence(nodes, "invoice:42", ttl=10)
store = fencing.FileStore("invoice-42.json")  # any guarded resource

with fence.hold(timeout=30) as token:  # acquire, renew every ttl/3, release
    store.write(b'{"total": 100}', token)  # the store refuses tokens below its mark

# docs/redlock.md:176

from redis.backoff import NoBackoff
from redis.retry import Retry

nodes = [
    redis.Redis.from_url(
        f"redis://{h}", socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    for h in hosts
]

# docs/redlock.md:249

import fencing

backend = fencing.connect(url)  # redis+redlock://r1:6379,r2:6379,r3:6379
rw = backend.rwlock("catalog:7", ttl=10)
catalog = fencing.MemoryMark()  # the resource's high-water mark

with rw.write.hold(timeout=30) as token:  # alone, a new token
    catalog.claim(token)  # before writing
with rw.read.hold(timeout=30) as token, rw.read.hold(timeout=30) as again:
    catalog.claim(token)  # before reading: every older writer is refused from now on
    assert token == again > 0  # readers that hold together share the epoch
backend.close()
