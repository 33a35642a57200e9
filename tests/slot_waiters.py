"""Semaphore waiters counted on a real engine (``WakesSlots``): issuers that count their
slot takes and keep what each wait returned, and the scenario that proves a wake-up by
counting, written once for every engine that wakes (tests/test_redis_semaphore_wake.py,
tests/test_etcd_semaphore_wake.py, tests/test_zookeeper_semaphore_wake.py, and through
WAIT in test_redis_replicas.py).

Every permit is held; a waiter tries every slot once, then blocks; the permits stay held
a little longer (``HOLD``) and one is released. Woken, the waiter tries only the slot
released: one round and one take in all, and its wait returned that slot (its waits are
made as long as the client allows, ``woken_only``: nothing but the wake-up or the
client's ``socket_timeout`` ends them).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any, cast

from waiting import NEVER, await_until, joined, wait_until, woken_only

import fencing
import fencing.aio
from fencing import Permit
from fencing._primitives.semaphore import slot_name
from fencing.issuer import (
    AsyncIssuer,
    AsyncWakesSlots,
    Busy,
    Issuer,
    SlotBusy,
    WakesOnRelease,
    WakesSlots,
)
from fencing.redis import RedisIssuer
from fencing.redis._issuer import AsyncRedisIssuer

PERMITS = 4
#: Seconds every permit stays held once the waiter has tried them all: long enough for
#: a waiter that backs off to try the slots several more times.
HOLD = 0.2


class Counting:
    """Mixed in before an issuer with ``WakesSlots``: counts its slot takes and keeps what
    each wait returned (``woken``); ``watched`` is ``WatchingOne``'s."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.takes = 0
        self.woken: list[int | None] = []
        self.watched: list[str] = []

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        self.takes += 1
        issuer = cast(WakesSlots, super())
        return issuer.try_acquire_slot(group, slot, permits, holder, ttl_ms, wait_ms)

    def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        woken = cast(WakesSlots, super()).await_slot_release(group, since, seconds)
        self.woken.append(woken)
        return woken


class WatchingOne(Counting):
    """Mixed in before an issuer with ``WakesSlots`` and ``WakesOnRelease``: the control,
    without ``WakesSlots`` (a protocol member set to None is not implemented), so that a
    waiter watches one slot; the fences it watched are kept (``watched``)."""

    await_slot_release = None  # type: ignore[assignment]

    def await_release(self, name: str, seconds: float) -> None:
        self.watched.append(name)
        cast(WakesOnRelease, super()).await_release(name, seconds)


class AsyncCounting:
    """The asyncio ``Counting`` (slot takes and waits)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.takes = 0
        self.woken: list[int | None] = []

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        self.takes += 1
        issuer = cast(AsyncWakesSlots, super())
        return await issuer.try_acquire_slot(group, slot, permits, holder, ttl_ms, wait_ms)

    async def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        woken = await cast(AsyncWakesSlots, super()).await_slot_release(group, since, seconds)
        self.woken.append(woken)
        return woken


class Counted(Counting, RedisIssuer):
    """A Redis issuer that counts its slot takes and keeps what each wait returned."""


class Polling(Counted):
    """The control: no ``WakesSlots`` (a protocol member set to None is not implemented)."""

    await_slot_release = None  # type: ignore[assignment]


class AsyncCounted(AsyncCounting, AsyncRedisIssuer):
    """The asyncio ``Counted``."""


def waited(issuer: Counting, rounds: int = 1) -> tuple[Permit, Permit]:
    """The scenario of the module docstring: (the permit released, the waiter's). The
    permits stay held until the waiter has tried every slot ``rounds`` times (a waiter
    that polls gets there, one that is woken never does past one), then ``HOLD`` more."""
    semaphore, held = _all_held(issuer)
    waiter, got = _waiter(semaphore)
    tried = rounds * PERMITS
    wait_until(lambda: issuer.takes >= tried or got, f"the waiter tried {tried} times")
    time.sleep(HOLD)  # a waiter that polls would try again meanwhile
    semaphore.release(held[1])
    permit = _served(semaphore, waiter, got, held, held[1])
    return held[1], permit


def unwoken_takes(issuer: Counting) -> int:
    """The control on an engine whose waiter watches the one slot it waits on
    (``WakesOnRelease``, its issuer recording it in ``watched``): with every permit
    held, it watches one; a permit of another slot is released; the takes it made
    ``HOLD`` later are returned (a waiter woken by that release has tried the slot
    released by then: ``PERMITS`` + 1). Then the watched slot's permit is released,
    which serves it."""
    semaphore, held = _all_held(issuer)
    waiter, got = _waiter(semaphore)
    wait_until(lambda: issuer.watched or got, "the waiter watched a slot")
    watched = next(p for p in held if slot_name(semaphore.name, p.slot) == issuer.watched[0])
    other = next(p for p in held if p is not watched)
    semaphore.release(other)
    time.sleep(HOLD)  # a waiter woken by that release would try again meanwhile
    takes = issuer.takes
    semaphore.release(watched)
    held.remove(other)
    _served(semaphore, waiter, got, held, watched)
    return takes


def _all_held(issuer: Counting) -> tuple[fencing.Semaphore, list[Permit]]:
    """A new semaphore whose waits end only by a wake-up (``woken_only``), every permit
    held; the issuer's takes counted from 0."""
    semaphore = fencing.Semaphore(cast(Issuer, issuer), f"wake-{uuid.uuid4().hex}", PERMITS, ttl=30)
    woken_only(semaphore)
    held = [semaphore.acquire(timeout=0) for _ in range(PERMITS)]
    issuer.takes = 0
    return semaphore, held


def _waiter(semaphore: fencing.Semaphore) -> tuple[threading.Thread, list[Permit | Exception]]:
    """A thread that acquires a permit of ``semaphore``, and where its outcome goes."""
    got: list[Permit | Exception] = []

    def wait() -> None:
        try:
            got.append(semaphore.acquire(timeout=60))
        except Exception as exc:  # reported by the test, not lost in the thread
            got.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    return waiter, got


def _served(
    semaphore: fencing.Semaphore,
    waiter: threading.Thread,
    got: list[Permit | Exception],
    held: list[Permit],
    released: Permit,
) -> Permit:
    """The waiter's permit, once it has one; every permit is released again."""
    joined(waiter)
    permit = got[0]
    assert isinstance(permit, Permit), f"the waiter failed: {permit!r}"
    for other in (permit, *(p for p in held if p is not released)):
        semaphore.release(other)
    return permit


async def awaited(issuer: AsyncCounting) -> tuple[Permit, Permit]:
    """The asyncio ``waited`` (``rounds`` 1): (the permit released, the waiter's)."""
    semaphore = fencing.aio.Semaphore(
        cast(AsyncIssuer, issuer), f"wake-{uuid.uuid4().hex}", PERMITS, ttl=30
    )
    woken_only(semaphore)
    held = [await semaphore.acquire(timeout=0) for _ in range(PERMITS)]
    issuer.takes = 0
    waiter = asyncio.create_task(semaphore.acquire(timeout=60))

    async def tried() -> bool:
        return issuer.takes >= PERMITS or waiter.done()

    await await_until(tried, "the waiter tried every slot")
    await asyncio.sleep(HOLD)
    await semaphore.release(held[1])
    got = await asyncio.wait_for(waiter, 60)
    for permit in (got, held[0], *held[2:]):
        await semaphore.release(permit)
    return held[1], got


def released_before_the_wait(issuer: Counting) -> None:
    """No lost wake-up: every permit held, a take refused with a mark, then a permit
    released, then the wait (as long as the client allows): it returns at once, with the
    slot released, as the release came after the mark."""
    semaphore = fencing.Semaphore(cast(Issuer, issuer), f"mark-{uuid.uuid4().hex}", PERMITS, ttl=30)
    held = [semaphore.acquire(timeout=0) for _ in range(PERMITS)]
    group = slot_name(semaphore.name, 0)[:-1]
    refused = issuer.try_acquire_slot(group, 0, PERMITS, "late", 30_000, wait_ms=60_000)
    assert isinstance(refused, SlotBusy), refused
    semaphore.release(held[2])
    assert issuer.await_slot_release(group, refused.since, NEVER) == held[2].slot
    for permit in (*held[:2], *held[3:]):
        semaphore.release(permit)


def assert_woken(issuer: Counting | AsyncCounting, released: Permit, got: Permit) -> None:
    """``got`` took the slot of ``released`` at its first try after a wait that the release
    ended; a wait before it may have timed out (the client's ``socket_timeout`` bounds
    each on Redis: half of redis-py's 5 s), each then followed by a full round."""
    assert got.slot == released.slot and got.token > released.token
    *timed_out, last = issuer.woken
    assert last == released.slot, f"waits {issuer.woken}: the release did not end the last"
    assert timed_out == [None] * len(timed_out), f"waits {issuer.woken}"
    rounds = len(issuer.woken)
    assert issuer.takes == PERMITS * rounds + 1, f"{issuer.takes} takes in {rounds} rounds"
