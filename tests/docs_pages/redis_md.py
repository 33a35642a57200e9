# Generated from docs/redis.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/redis.md:9

import os

import redis

import fencing

url = os.environ.get("FENCING_URL", "redis://localhost:6379/0")
r = redis.Redis.from_url(url, socket_timeout=2)
fence = fencing.RedisFence(r, "invoice:42", ttl=10)
store = fencing.FileStore("invoice-42.json")  # any guarded resource

with fence.hold(timeout=30) as token:  # acquire, renew every ttl/3, release
    store.write(b'{"total": 100}', token)  # the store refuses tokens below its mark

# docs/redis.md:32

import asyncio

import redis.asyncio

import fencing.aio

lock = r.lock("invoice:42", timeout=10, lock_class=fencing.FencedLock)
with lock:
    store.write(b'{"total": 110}', lock.fence_token)


async def main() -> None:
    ar = redis.asyncio.Redis.from_url(url, socket_timeout=2)
    alock = fencing.aio.FencedLock(ar, "invoice:42", timeout=10)  # typed as such: what
    # ar.lock("invoice:42", timeout=10, lock_class=fencing.aio.FencedLock) makes
    async with alock:
        token = alock.fence_token  # typed FenceToken | None: None only when not held
        assert token is not None
        store.write(b'{"total": 120}', token)
    await ar.aclose()


asyncio.run(main())

# docs/redis.md:260

from redis.backoff import NoBackoff
from redis.retry import Retry

r = redis.Redis(
    host="localhost", socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 1)
)

# docs/redis.md:382

r = redis.Redis.from_url(
    url, socket_timeout=2
)  # longer than replica_timeout: a ValueError otherwise
fence = fencing.RedisFence(r, "invoice:42", ttl=10, min_replicas=1, replica_timeout=0.5)
fencing.connect("redis://primary:6379/0?min_replicas=1&replica_timeout=0.5")

# docs/redis.md:435

backend = fencing.connect(
    "redis+sentinel://:secret@s1:26379,s2:26379,s3:26379/orders/0"
    "?socket_timeout=1&sentinel_password=watch&min_replicas=1"
)
fence = backend.fence("invoice:42", ttl=10)  # backend.aio_fence(...) for asyncio
