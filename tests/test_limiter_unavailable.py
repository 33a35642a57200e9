"""A limiter's client started before its store is up waits for it (issue 21, as the
brief's clients do): ``acquire`` asks again within its ``timeout``, then raises
``FenceUnavailable``; ``try_acquire`` never waits. On a real ``redis-server`` started
after the client began waiting; counts only, no clock."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest
from waiting import PATIENCE, joined, wait_until

import fencing
from fencing import Admission, FenceUnavailable
from fencing._primitives.limiter import Admits, Limiter
from fencing.testing.servers import RedisServer


class Counting:
    """A store that counts its requests and the ones that could not reach it."""

    def __init__(self, store: Admits) -> None:
        self.store = store
        self.calls = self.unavailable = 0

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        self.calls += 1
        try:
            return self.store.admit(name, limit, per_ms, window)
        except FenceUnavailable:
            self.unavailable += 1
            raise


@pytest.fixture
def down() -> Iterator[RedisServer]:
    """A Redis server that is not started yet (its port chosen, nothing listening)."""
    server = RedisServer()
    yield server
    server.close()


def test_a_client_started_before_its_redis_waits_and_is_admitted(down: RedisServer) -> None:
    backend = fencing.connect(down.url)
    name = f"early:{random.random()}"
    store = Counting(backend.limiter(name, 2, 30).store)
    limiter = Limiter(store, name, 2, 30)
    try:
        with pytest.raises(FenceUnavailable):
            limiter.try_acquire()  # never waits, not even for the store
        got: list[Admission] = []
        waiter = threading.Thread(target=lambda: got.append(limiter.acquire(timeout=PATIENCE)))
        waiter.start()
        wait_until(lambda: store.unavailable >= 3, "the waiter asked the absent store again")
        down.start()
        joined(waiter)
        assert len(got) == 1 and got[0].admitted
        assert store.calls == store.unavailable + 1  # admitted at its first try once up
    finally:
        backend.close()


def test_acquire_raises_fence_unavailable_at_its_deadline(down: RedisServer) -> None:
    backend = fencing.connect(down.url)
    store = Counting(backend.limiter("never", 2, 30).store)
    limiter = Limiter(store, "never", 2, 30, window="fixed")
    try:
        with pytest.raises(FenceUnavailable):
            limiter.acquire(timeout=0)
        assert store.calls == 1  # timeout=0: one try
        with pytest.raises(FenceUnavailable):
            limiter.acquire(timeout=0.3)
        assert store.calls >= 3  # asked again within its timeout, then gave up
    finally:
        backend.close()


async def test_an_asyncio_limiter_waits_within_its_timeout_too(down: RedisServer) -> None:
    backend = fencing.connect(down.url)
    limiter = backend.aio_limiter("never", 2, 30)
    try:
        with pytest.raises(FenceUnavailable):
            await limiter.acquire(timeout=0.2)
    finally:
        await limiter.aclose()
        backend.close()
