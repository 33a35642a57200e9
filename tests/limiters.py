"""``ThroughBackend``: the limiter contract through ``fencing.connect(url)``, for the test
modules of each engine: a subclass provides the ``backend`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fencing._connect import Backend
from fencing.aio import Limiter as AsyncLimiter
from fencing.testing.contract import LimiterContract, MakeAsyncLimiter, MakeLimiter


class ThroughBackend(LimiterContract):
    """``make_limiter`` is ``backend.limiter``; the asyncio limiters of a test share one
    asyncio issuer of the backend (where ``backend.aio_limiter`` opens a client or an
    engine per limiter, which costs a SQL check a second), closed at the test's end."""

    @pytest.fixture
    def backend(self) -> Backend:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a backend fixture")

    @pytest.fixture
    def make_limiter(self, backend: Backend) -> MakeLimiter:
        return backend.limiter

    @pytest.fixture
    async def make_async_limiter(self, backend: Backend) -> AsyncIterator[MakeAsyncLimiter]:
        issuer = backend._new_async_issuer()  # type: ignore[attr-defined]

        def make(name: str, limit: int, per: float, window: str) -> AsyncLimiter:
            return AsyncLimiter(issuer, name, limit, per, window)

        yield make
        await issuer.aclose()
