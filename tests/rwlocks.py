"""``ThroughBackend``: the read-write lock contract through ``fencing.connect(url)``,
for the test modules of each engine: a subclass provides the ``backend`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fencing._connect import Backend
from fencing.aio import RWLock as AsyncRWLock
from fencing.testing.contract import MakeAsyncRWLock, MakeRWLock, RWLockContract


class ThroughBackend(RWLockContract):
    """``make_rwlock`` is ``backend.rwlock``; each asyncio lock (a client or engine of
    its own) is closed at the test's end."""

    @pytest.fixture
    def backend(self) -> Backend:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a backend fixture")

    @pytest.fixture
    def make_rwlock(self, backend: Backend) -> MakeRWLock:
        return backend.rwlock

    @pytest.fixture
    async def make_async_rwlock(self, backend: Backend) -> AsyncIterator[MakeAsyncRWLock]:
        made: list[AsyncRWLock] = []

        def make(name: str, ttl: float) -> AsyncRWLock:
            made.append(backend.aio_rwlock(name, ttl))
            return made[-1]

        yield make
        for rwlock in made:
            await rwlock.aclose()
