"""The public contract against PostgreSQL advisory-lock leases (``lease=advisory``),
blocking and asyncio (psycopg and asyncpg), on the session's PostgreSQL.

An advisory lease lives as long as the connection that holds its lock
(``expires_while_held = False``); ``end_session`` ends that connection the way an
operator or a dead client would: ``pg_terminate_backend`` of the backend holding the
lock, found in ``pg_locks``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pg_advisory import advisory_url, terminate_holder
from processes import CONTEXT

import fencing
import fencing.aio
from fencing.sql import AdvisoryFence, AdvisoryIssuer
from fencing.sql.aio import AdvisoryFence as AsyncAdvisoryFence
from fencing.sql.aio import AdvisoryIssuer as AsyncAdvisoryIssuer
from fencing.testing.contract import (
    AsyncFenceContract,
    FenceContract,
    InteropContract,
    MakeAsyncFence,
    MakeFence,
    OperationsContract,
    StaleHolderContract,
)
from fencing.testing.servers import PostgresServer

__all__ = ["advisory_url"]  # a fixture, used by the classes below


class AdvisoryTerms:
    """What every contract class declares for advisory leases."""

    expires_while_held = False
    #: hold() checks the lock every ttl/3; a check is one cheap read.
    renewal_ttl = 0.6
    server: PostgresServer

    def end_session(self, fence: Any) -> None:
        assert terminate_holder(self.server, fence.name) == 1, "no backend held the lock"


class TestAdvisoryFence(AdvisoryTerms, FenceContract):
    @pytest.fixture
    def make_fence(self, advisory_url: str, postgres_server: PostgresServer) -> Iterator[MakeFence]:
        self.server = postgres_server
        issuer = AdvisoryIssuer(advisory_url)

        def make(name: str, ttl: float) -> fencing.Fence:
            return AdvisoryFence(advisory_url, name, ttl, issuer=issuer)

        yield make
        issuer.close()


@pytest.fixture(params=["psycopg", "asyncpg"])
def async_advisory_url(request: pytest.FixtureRequest, advisory_url: str) -> str:
    return advisory_url.replace("+psycopg", f"+{request.param}")


class TestAsyncAdvisoryFence(AdvisoryTerms, AsyncFenceContract):
    @pytest.fixture
    async def make_fence(
        self, async_advisory_url: str, postgres_server: PostgresServer
    ) -> AsyncIterator[MakeAsyncFence]:
        self.server = postgres_server
        issuer = AsyncAdvisoryIssuer(async_advisory_url)

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return AsyncAdvisoryFence(async_advisory_url, name, ttl, issuer=issuer)

        yield make
        await issuer.aclose()


class TestAdvisoryInterop(AdvisoryTerms, InteropContract):
    make_fence = TestAdvisoryFence.make_fence
    make_async_fence = TestAsyncAdvisoryFence.make_fence


class TestAdvisoryStaleHolder(AdvisoryTerms, StaleHolderContract):
    """A frozen holder's connection stays open, and its lock with it: its backend is
    terminated (an operator, ``idle_session_timeout``), as for a holder that crashed."""

    processes = CONTEXT
    make_fence = TestAdvisoryFence.make_fence

    @pytest.fixture
    def holder_url(self, advisory_url: str) -> str:
        return f"{advisory_url}?lease=advisory"

    def end_frozen_lease(self, name: str) -> None:
        assert terminate_holder(self.server, name) == 1, "no backend held the lock"


class TestAdvisoryOperations(AdvisoryTerms, OperationsContract):
    """``fencing status``/``list``/``release --force`` on advisory leases."""

    make_fence = TestAdvisoryFence.make_fence
