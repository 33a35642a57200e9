"""The public ``RWLockContract`` on every backend that has read-write locks, each made
through what a user calls (``MemoryIssuer.rwlock``, ``fencing.connect(url).rwlock``, and their
``aio_rwlock``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import fencing
from fencing import MemoryIssuer
from fencing._rwlock import AsyncRWLock
from fencing.testing.contract import MakeAsyncRWLock, MakeRWLock, RWLockContract
from fencing.testing.servers import RedisServer


class TestMemoryRWLock(RWLockContract):
    @pytest.fixture
    def issuer(self) -> MemoryIssuer:
        return MemoryIssuer()

    @pytest.fixture
    def make_rwlock(self, issuer: MemoryIssuer) -> MakeRWLock:
        return issuer.rwlock

    @pytest.fixture
    def make_async_rwlock(self, issuer: MemoryIssuer) -> MakeAsyncRWLock:
        return issuer.aio_rwlock


class TestRedisRWLock(RWLockContract):
    """Through ``fencing.connect(url)``: one client for the blocking locks, one per
    asyncio lock (closed at the test's end)."""

    @pytest.fixture
    def backend(self, redis_server: RedisServer) -> Iterator[Any]:
        backend = fencing.connect(f"redis://127.0.0.1:{redis_server.port}")
        yield backend
        backend.close()  # type: ignore[attr-defined]

    @pytest.fixture
    def make_rwlock(self, backend: Any) -> MakeRWLock:
        return backend.rwlock  # type: ignore[no-any-return]

    @pytest.fixture
    async def make_async_rwlock(self, backend: Any) -> AsyncIterator[MakeAsyncRWLock]:
        made: list[AsyncRWLock] = []

        def make(name: str, ttl: float) -> AsyncRWLock:
            made.append(backend.aio_rwlock(name, ttl))
            return made[-1]

        yield make
        for rwlock in made:
            await rwlock.aclose()
