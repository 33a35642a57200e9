"""``ThroughBackend``: the blocking/asyncio interop contract through
``fencing.connect(url)``, for the test modules of each engine: a subclass provides the
``backend`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import fencing.aio
from fencing._connect import Backend
from fencing.testing.contract import InteropContract, MakeAsyncFence, MakeFence


class ThroughBackend(InteropContract):
    """``make_fence`` is ``backend.fence`` and ``make_async_fence`` ``backend.aio_fence``
    (a client or engine of its own each, closed at the test's end)."""

    @pytest.fixture
    def backend(self) -> Backend:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a backend fixture")

    @pytest.fixture
    def make_fence(self, backend: Backend) -> MakeFence:
        return backend.fence

    @pytest.fixture
    async def make_async_fence(self, backend: Backend) -> AsyncIterator[MakeAsyncFence]:
        made: list[fencing.aio.Fence] = []

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            made.append(backend.aio_fence(name, ttl))
            return made[-1]

        yield make
        for fence in made:
            await fence.aclose()
