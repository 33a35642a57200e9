"""Semaphore waiters counted on a real Redis (``WakesSlots``): issuers that count their
slot takes and keep what each wait returned, and the scenario that proves a wake-up by
counting (tests/test_redis_semaphore_wake.py, and through WAIT in test_redis_replicas.py).

Every permit is held; a waiter tries every slot once, then blocks; the permits stay held
a little longer (``HOLD``) and one is released. Woken, the waiter tries only the slot
released: one round and one take in all, and its wait returned that slot (its waits are
made as long as the client allows, ``woken_only``: nothing but the wake-up or the
client's ``socket_timeout`` ends them).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from waiting import joined, wait_until, woken_only

import fencing
from fencing import Permit
from fencing.issuer import Busy
from fencing.redis import RedisIssuer
from fencing.redis._issuer import AsyncRedisIssuer

PERMITS = 4
#: Seconds every permit stays held once the waiter has tried them all: long enough for
#: a waiter that backs off to try the slots several more times.
HOLD = 0.2


class Counted(RedisIssuer):
    """A Redis issuer that counts its slot takes and keeps what each wait returned."""

    def __init__(self, client: Any, **options: Any) -> None:
        super().__init__(client, **options)
        self.takes = 0
        self.woken: list[int | None] = []

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        self.takes += 1
        return super().try_acquire_slot(group, slot, permits, holder, ttl_ms, wait_ms)

    def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        woken = super().await_slot_release(group, since, seconds)
        self.woken.append(woken)
        return woken


class Polling(Counted):
    """The control: no ``WakesSlots`` (a protocol member set to None is not implemented)."""

    await_slot_release = None  # type: ignore[assignment]


class AsyncCounted(AsyncRedisIssuer):
    """The asyncio ``Counted``."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.takes = 0
        self.woken: list[int | None] = []

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        self.takes += 1
        return await super().try_acquire_slot(group, slot, permits, holder, ttl_ms, wait_ms)

    async def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        woken = await super().await_slot_release(group, since, seconds)
        self.woken.append(woken)
        return woken


def waited(issuer: Counted, rounds: int = 1) -> tuple[Permit, Permit]:
    """The scenario of the module docstring: (the permit released, the waiter's). The
    permits stay held until the waiter has tried every slot ``rounds`` times (a waiter
    that polls gets there, one that is woken never does past one), then ``HOLD`` more."""
    semaphore = fencing.Semaphore(issuer, f"wake-{uuid.uuid4().hex}", PERMITS, ttl=30)
    woken_only(semaphore)
    held = [semaphore.acquire(timeout=0) for _ in range(PERMITS)]
    issuer.takes = 0
    got: list[Permit | Exception] = []

    def wait() -> None:
        try:
            got.append(semaphore.acquire(timeout=60))
        except Exception as exc:  # reported by the test, not lost in the thread
            got.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    tried = rounds * PERMITS
    wait_until(lambda: issuer.takes >= tried or got, f"the waiter tried {tried} times")
    time.sleep(HOLD)  # a waiter that polls would try again meanwhile
    semaphore.release(held[1])
    joined(waiter)
    permit = got[0]
    assert isinstance(permit, Permit), f"the waiter failed: {permit!r}"
    semaphore.release(permit)
    return held[1], permit


def assert_woken(issuer: Counted | AsyncCounted, released: Permit, got: Permit) -> None:
    """``got`` took the slot of ``released`` at its first try after a wait that the release
    ended; a wait before it may have timed out (the client's ``socket_timeout`` bounds
    each: half of redis-py's 5 s), each then followed by a full round."""
    assert got.slot == released.slot and got.token > released.token
    *timed_out, last = issuer.woken
    assert last == released.slot, f"waits {issuer.woken}: the release did not end the last"
    assert timed_out == [None] * len(timed_out), f"waits {issuer.woken}"
    rounds = len(issuer.woken)
    assert issuer.takes == PERMITS * rounds + 1, f"{issuer.takes} takes in {rounds} rounds"
