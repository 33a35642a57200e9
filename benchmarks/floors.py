"""The floors: the least a Redis lease can cost, written as bare Lua and raw EVALSHA.

Every Redis variant is compared with one of these, measured in the same run:

- ``LockFloor``: a plain lock, no token: ``SET NX PX`` + ``EVALSHA`` compare-and-delete.
- ``FencedFloor``: a fenced lease: one ``EVALSHA`` that checks the lease, ``INCR``s the
  counter and ``SET``s the lease; one ``EVALSHA`` that compares the holder and deletes.
  ``AsyncFencedFloor`` is the same on ``redis.asyncio``.
- ``DirectHandoff``: the hand-off floor. A waiter that finds the lease busy ``RPUSH``es its
  id to the fence's queue and ``BLPOP``s its own key; release pops the first queued waiter,
  gives it the lease and a token in the same script and pushes the token to the waiter's
  key, so the waiter holds on wake-up without another round trip. ``AsyncDirectHandoff``
  is the same on ``redis.asyncio``.

No retries, no validation, no error mapping: a floor, not a product.
Imports redis-py only.
"""

from __future__ import annotations

import uuid
from typing import Any

import redis
import redis.asyncio

# KEYS[1] lease. ARGV[1] holder id. Returns 1 if the holder's lease was deleted, else 0.
UNLOCK = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""

# KEYS[1] lease, KEYS[2] counter. ARGV[1] holder id, ARGV[2] ttl ms.
# Returns the new token, or 0 when the lease is held.
FENCED_ACQUIRE = """
if redis.call('exists', KEYS[1]) == 1 then return 0 end
local token = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return token
"""

# KEYS[1] lease, KEYS[2] counter, KEYS[3] queue. ARGV[1] holder id, ARGV[2] ttl ms.
# Returns the new token, or 0 after queueing the holder id (then BLPOP 'wake:' .. id).
HANDOFF_ACQUIRE = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
redis.call('rpush', KEYS[3], ARGV[1])
return 0
"""

# KEYS[1] lease, KEYS[2] counter, KEYS[3] queue. ARGV[1] holder id, ARGV[2] ttl ms,
# ARGV[3] prefix of the waiters' wake keys. Hands the lease and a fresh token to the first
# queued waiter (pushed to its wake key) or deletes it. Returns 1 if released, else 0.
HANDOFF_RELEASE = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
local nxt = redis.call('lpop', KEYS[3])
if nxt then
  redis.call('set', KEYS[1], nxt, 'PX', ARGV[2])
  local wake = ARGV[3] .. nxt
  redis.call('rpush', wake, redis.call('incr', KEYS[2]))
  redis.call('pexpire', wake, ARGV[2])
else
  redis.call('del', KEYS[1])
end
return 1
"""


def _load(client: redis.Redis, script: str) -> str:
    sha: str = client.script_load(script)
    return sha


class LockFloor:
    """A plain lock: ``SET NX PX`` to take it, ``EVALSHA`` compare-and-delete to free it."""

    def __init__(self, client: redis.Redis, name: str, ttl_ms: int = 10_000) -> None:
        self.client, self.key, self.ttl_ms = client, f"floor-lock:{name}", ttl_ms
        self.unlock = _load(client, UNLOCK)
        self.holder = uuid.uuid4().hex

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.holder, nx=True, px=self.ttl_ms))

    def release(self) -> None:
        self.client.evalsha(self.unlock, 1, self.key, self.holder)

    def cycle(self) -> None:
        if not self.acquire():
            raise RuntimeError("floor lock busy")
        self.release()


class FencedFloor:
    """A fenced lease in two EVALSHAs: INCR+SET to acquire, compare-and-delete to release."""

    def __init__(self, client: redis.Redis, name: str, ttl_ms: int = 10_000) -> None:
        self.client, self.ttl_ms = client, ttl_ms
        self.keys = (f"floor-fence:{{{name}}}:lease", f"floor-fence:{{{name}}}:counter")
        self.acquire_sha = _load(client, FENCED_ACQUIRE)
        self.unlock = _load(client, UNLOCK)
        self.holder = uuid.uuid4().hex

    def acquire(self) -> int:
        token: int = self.client.evalsha(self.acquire_sha, 2, *self.keys, self.holder, self.ttl_ms)
        return token

    def release(self) -> None:
        self.client.evalsha(self.unlock, 1, self.keys[0], self.holder)

    def cycle(self) -> None:
        if not self.acquire():
            raise RuntimeError("fenced floor busy")
        self.release()


class AsyncFencedFloor:
    """``FencedFloor`` on ``redis.asyncio``; the scripts are loaded on first use."""

    def __init__(self, client: redis.asyncio.Redis, name: str, ttl_ms: int = 10_000) -> None:
        self.client, self.ttl_ms = client, ttl_ms
        self.keys = (f"afloor-fence:{{{name}}}:lease", f"afloor-fence:{{{name}}}:counter")
        self.holder = uuid.uuid4().hex
        self.acquire_sha = self.unlock = ""

    async def acquire(self) -> int:
        if not self.acquire_sha:
            self.acquire_sha = await self.client.script_load(FENCED_ACQUIRE)
            self.unlock = await self.client.script_load(UNLOCK)
        token: int = await self.client.evalsha(
            self.acquire_sha, 2, *self.keys, self.holder, self.ttl_ms
        )
        if not token:
            raise RuntimeError("fenced floor busy")
        return token

    async def release(self) -> None:
        await self.client.evalsha(self.unlock, 1, self.keys[0], self.holder)


class DirectHandoff:
    """The hand-off floor: release hands the lease and a token straight to the next waiter.

    One object per holder (its id is the queue entry); ``acquire`` blocks like a lock.
    """

    def __init__(self, client: redis.Redis, name: str, ttl_ms: int = 10_000) -> None:
        self.client, self.ttl_ms = client, ttl_ms
        base = f"floor-handoff:{{{name}}}"
        self.keys = (f"{base}:lease", f"{base}:counter", f"{base}:queue")
        self.wake_prefix = f"{base}:wake:"
        self.acquire_sha = _load(client, HANDOFF_ACQUIRE)
        self.release_sha = _load(client, HANDOFF_RELEASE)
        self.holder = uuid.uuid4().hex

    def acquire(self, timeout: float = 10.0) -> int:
        token: Any = self.client.evalsha(self.acquire_sha, 3, *self.keys, self.holder, self.ttl_ms)
        if token:
            return int(token)
        reply = self.client.blpop([self.wake_prefix + self.holder], timeout)
        if reply is None:
            raise TimeoutError("direct hand-off: no wake-up")
        return int(reply[1])

    def release(self) -> None:
        self.client.evalsha(
            self.release_sha, 3, *self.keys, self.holder, self.ttl_ms, self.wake_prefix
        )

    def cycle(self) -> None:
        self.acquire()
        self.release()


class AsyncDirectHandoff:
    """``DirectHandoff`` on ``redis.asyncio`` (same scripts, loaded on first use)."""

    def __init__(self, client: redis.asyncio.Redis, name: str, ttl_ms: int = 10_000) -> None:
        self.client, self.ttl_ms = client, ttl_ms
        base = f"afloor-handoff:{{{name}}}"
        self.keys = (f"{base}:lease", f"{base}:counter", f"{base}:queue")
        self.wake_prefix = f"{base}:wake:"
        self.holder = uuid.uuid4().hex
        self.acquire_sha = self.release_sha = ""

    async def acquire(self, timeout: float = 10.0) -> int:
        if not self.acquire_sha:
            self.acquire_sha = await self.client.script_load(HANDOFF_ACQUIRE)
            self.release_sha = await self.client.script_load(HANDOFF_RELEASE)
        token: Any = await self.client.evalsha(
            self.acquire_sha, 3, *self.keys, self.holder, self.ttl_ms
        )
        if token:
            return int(token)
        reply = await self.client.blpop([self.wake_prefix + self.holder], timeout)
        if reply is None:
            raise TimeoutError("direct hand-off: no wake-up")
        return int(reply[1])

    async def release(self) -> None:
        await self.client.evalsha(
            self.release_sha, 3, *self.keys, self.holder, self.ttl_ms, self.wake_prefix
        )
