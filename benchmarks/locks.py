"""The Redis leases under test, behind one tiny interface: ``acquire()`` blocks, ``release()``.

Each ``LockKind`` builds a fresh holder (one per thread, task or process) from a client
and a fence name, so the uncontended, hand-off and throughput families measure exactly
the same objects. Every kind is always present: the peers come with the ``bench`` extra.

Imports redis-py, the peers (python-redis-lock, pottery), fencing and the floors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio

from floors import AsyncDirectHandoff, AsyncFencedFloor, DirectHandoff, FencedFloor, LockFloor

TTL = 10.0  # seconds; long enough that no lease expires during a measurement


@dataclass
class Holder:
    """One holder of one fence: ``acquire()`` blocks until it holds, ``release()`` ends it."""

    acquire: Callable[[], Any]
    release: Callable[[], Any]


@dataclass
class AsyncHolder:
    acquire: Callable[[], Awaitable[Any]]
    release: Callable[[], Awaitable[Any]]


@dataclass
class LockKind:
    """A lease implementation: how to build a holder, and how its waiters wait."""

    name: str
    make: Callable[[Any, str], Any]
    is_async: bool = False
    #: True for the hand-off floor; False for kinds that cannot queue waiters (no blocking).
    blocking: bool = True
    #: Upper bound of a waiter's sleep between polls (0: woken on release).
    poll: float = 0.0
    note: str = ""


# -- adapters -------------------------------------------------------------------------


def _floor_handoff(client: redis.Redis, name: str) -> Holder:
    floor = DirectHandoff(client, name, int(TTL * 1000))
    return Holder(floor.acquire, floor.release)


def _floor_fenced(client: redis.Redis, name: str) -> Holder:
    floor = FencedFloor(client, name, int(TTL * 1000))
    return Holder(floor.acquire, floor.release)


def _floor_lock(client: redis.Redis, name: str) -> Holder:
    floor = LockFloor(client, name, int(TTL * 1000))
    return Holder(floor.acquire, floor.release)


def _fence_holder(fence: Any) -> Holder:
    tokens: list[int] = []

    def acquire() -> None:
        tokens.append(fence.acquire())

    def release() -> None:
        fence.release(tokens.pop())

    return Holder(acquire, release)


def _async_fence_holder(fence: Any) -> AsyncHolder:
    tokens: list[int] = []

    async def acquire() -> None:
        tokens.append(await fence.acquire())

    async def release() -> None:
        await fence.release(tokens.pop())

    return AsyncHolder(acquire, release)


def _redis_fence(client: redis.Redis, name: str) -> Holder:
    from fencing import RedisFence

    return _fence_holder(RedisFence(client, f"rf:{name}", TTL))


def _fencing_scripts(client: redis.Redis, name: str) -> Holder:
    """RedisFence's own two scripts by bare EVALSHA, no Python around them: the share of
    its cost that is Redis's (clock fallback, hand-off bookkeeping), not fencing's code."""
    from fencing.redis._scripts import ACQUIRE, RELEASE, fence_keys

    for script in (ACQUIRE, RELEASE):
        client.script_load(script.text)
    lease, holder, value = fence_keys(f"raw:{name}").lease, b"0123456789abcdef0123456789", [b""]
    args = (lease, holder, b"%d" % (TTL * 1000), b"604800000", b"1500")  # as RedisFence sends

    def acquire() -> None:
        value[0] = b"%d:%s" % (client.evalsha(ACQUIRE.sha, 1, *args), holder)

    def release() -> None:
        client.evalsha(RELEASE.sha, 1, lease, value[0])

    return Holder(acquire, release)


def _async_redis_fence(client: redis.asyncio.Redis, name: str) -> AsyncHolder:
    from fencing.aio import RedisFence

    return _async_fence_holder(RedisFence(client, f"arf:{name}", TTL))


def _fenced_lock(client: redis.Redis, name: str) -> Holder:
    from fencing import FencedLock

    lock = client.lock(f"fl:{name}", timeout=TTL, lock_class=FencedLock)
    return Holder(lock.acquire, lock.release)


def _async_fenced_lock(client: redis.asyncio.Redis, name: str) -> AsyncHolder:
    from fencing.aio import FencedLock

    lock = client.lock(f"afl:{name}", timeout=TTL, lock_class=FencedLock)
    return AsyncHolder(lock.acquire, lock.release)


def _async_redis_py(client: redis.asyncio.Redis, name: str) -> AsyncHolder:
    lock = client.lock(f"arp:{name}", timeout=TTL)
    return AsyncHolder(lock.acquire, lock.release)


def _redis_py(client: redis.Redis, name: str) -> Holder:
    lock = client.lock(f"rp:{name}", timeout=TTL)
    return Holder(lock.acquire, lock.release)


def _python_redis_lock(client: redis.Redis, name: str) -> Holder:
    import redis_lock

    lock = redis_lock.Lock(client, f"prl:{name}", expire=int(TTL))
    return Holder(lock.acquire, lock.release)


def _pottery(client: redis.Redis, name: str) -> Holder:
    from pottery import Redlock

    lock = Redlock(key=f"pot:{name}", masters={client}, auto_release_time=TTL)
    return Holder(lock.acquire, lock.release)


def _async_floor(client: redis.asyncio.Redis, name: str) -> AsyncHolder:
    floor = AsyncFencedFloor(client, name, int(TTL * 1000))
    return AsyncHolder(floor.acquire, floor.release)


def _async_floor_handoff(client: redis.asyncio.Redis, name: str) -> AsyncHolder:
    floor = AsyncDirectHandoff(client, name, int(TTL * 1000))
    return AsyncHolder(floor.acquire, floor.release)


FLOOR_HANDOFF = "floor: direct hand-off (Lua + BLPOP)"
FLOOR_HANDOFF_ASYNC = "floor: direct hand-off, asyncio"
FLOOR_FENCED = "floor: fenced script (2x EVALSHA)"
FLOOR_LOCK = "floor: SET NX PX + EVALSHA del"
FLOOR_ASYNC = "floor: fenced script, asyncio"
#: A second copy of a floor, measured like any variant: its ratio to the floor is the
#: run's noise (an A/A comparison), the yardstick for a ratio near a target.
AA_FENCED = "A/A: fenced script floor, 2nd copy"
AA_HANDOFF = "A/A: direct hand-off floor, 2nd copy"
REDIS_FENCE = "fencing.RedisFence"
RAW_SCRIPTS = "RedisFence's scripts alone (2x EVALSHA)"
FENCED_LOCK = "fencing.FencedLock (r.lock lock_class=)"
ASYNC_FENCE = "fencing.aio.RedisFence (asyncio)"
ASYNC_FENCED_LOCK = "fencing.aio.FencedLock (asyncio)"
ASYNC_REDIS_PY = "redis-py asyncio Lock"

KINDS: dict[str, LockKind] = {
    k.name: k
    for k in [
        LockKind(FLOOR_HANDOFF, _floor_handoff),
        LockKind(FLOOR_FENCED, _floor_fenced, blocking=False),
        LockKind(FLOOR_LOCK, _floor_lock, blocking=False),
        LockKind(AA_FENCED, _floor_fenced, blocking=False),
        LockKind(AA_HANDOFF, _floor_handoff),
        LockKind(REDIS_FENCE, _redis_fence),
        LockKind(RAW_SCRIPTS, _fencing_scripts, blocking=False),
        LockKind(FENCED_LOCK, _fenced_lock),
        LockKind("redis-py Lock", _redis_py, poll=0.1, note="polls every 0.1 s (default)"),
        LockKind("python-redis-lock", _python_redis_lock),
        LockKind(
            "pottery Redlock (1 master)", _pottery, poll=0.2, note="sleeps U(0, 0.2 s) per retry"
        ),
        LockKind(FLOOR_ASYNC, _async_floor, is_async=True, blocking=False),
        LockKind(FLOOR_HANDOFF_ASYNC, _async_floor_handoff, is_async=True),
        LockKind(ASYNC_FENCE, _async_redis_fence, is_async=True),
        LockKind(ASYNC_FENCED_LOCK, _async_fenced_lock, is_async=True),
        LockKind(ASYNC_REDIS_PY, _async_redis_py, is_async=True, poll=0.1),
    ]
}
