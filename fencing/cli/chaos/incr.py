"""The INCR-only control of the failover run: a lease whose token is a bare ``INCR``.

What Redisson's ``RFencedLock`` does: take the lease (``SET NX PX``) and ``INCR`` a
counter in one script. A failover that lost the last increments makes it hand out a
token again, which the checker must see; ``fencing``'s issuer floors its tokens by the
server clock instead. Only the calls a chaos worker makes (``acquire``, ``release``).

Imports the public package and redis-py.
"""

from __future__ import annotations

import random
import time
from typing import Any

import redis

import fencing

_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class IncrOnlyFence:
    """``acquire(timeout)`` -> an ``INCR`` token; ``release(token)``; errors as a fence's."""

    def __init__(self, client: Any, name: str, ttl: float) -> None:
        self.client = client
        self.keys = (f"incr-only:{{{name}}}:lease", f"incr-only:{{{name}}}:counter")
        self.ttl_ms = max(1, round(ttl * 1000))
        self.holder = ""

    def acquire(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        holder = f"{random.getrandbits(64):x}"
        while True:
            try:
                token = int(self.client.eval(_ACQUIRE, 2, *self.keys, holder, self.ttl_ms))
            except redis.RedisError as exc:
                raise fencing.FenceUnavailable(f"redis failed: {exc}") from exc
            if token:
                self.holder = holder
                return token
            if time.monotonic() >= deadline:
                raise fencing.AcquireTimeout(self.keys[0], timeout)
            time.sleep(random.uniform(0.002, 0.02))

    def release(self, token: int) -> None:
        try:
            self.client.eval(_RELEASE, 1, self.keys[0], self.holder)
        except redis.RedisError as exc:
            raise fencing.FenceUnavailable(f"redis failed: {exc}") from exc
