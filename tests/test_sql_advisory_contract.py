"""The public contract against advisory-lock leases (``lease=advisory``), blocking and
asyncio: on the session's PostgreSQL (psycopg and asyncpg) and on its MariaDB
(``GET_LOCK``; PyMySQL and aiomysql), the same flows on each database's statements.

An advisory lease lives as long as the connection that holds its lock
(``expires_while_held = False``); ``end_session`` ends that connection the way an
operator or a dead client would: ``pg_terminate_backend`` of the backend holding the
lock, found in ``pg_locks``; MariaDB's ``KILL`` of the connection ``IS_USED_LOCK`` names.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pymysql
import pytest
from pg_advisory import advisory_url, terminate_holder
from processes import CONTEXT

import fencing
import fencing.aio
from fencing.sql import AdvisoryFence, AdvisoryIssuer
from fencing.sql._keys import lock_name
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
from fencing.testing.servers import MariaDBServer, PostgresServer

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


# -- MariaDB: GET_LOCK ------------------------------------------------------------------


def kill_holder(server: MariaDBServer, name: str) -> int:
    """``KILL`` the connection holding the ``GET_LOCK`` of fence ``name`` and wait until
    its lock is gone, as an operator or ``wait_timeout`` would; how many were killed."""
    conn = pymysql.connect(host="127.0.0.1", port=server.port, user="fencing", autocommit=True)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT IS_USED_LOCK(%s)", (lock_name(name),))
            row = cursor.fetchone()
            assert row is not None
            (holder,) = row
            if holder is None:
                return 0
            cursor.execute("KILL %s", (holder,))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                cursor.execute("SELECT IS_USED_LOCK(%s)", (lock_name(name),))
                row = cursor.fetchone()
                if row is None or row[0] != holder:
                    return 1
                time.sleep(0.01)
            raise AssertionError(f"connection {holder} still holds the lock of {name!r}")
    finally:
        conn.close()


class MariaDBTerms(AdvisoryTerms):
    """``AdvisoryTerms`` on MariaDB."""

    server: MariaDBServer  # type: ignore[assignment]

    def end_session(self, fence: Any) -> None:
        assert kill_holder(self.server, fence.name) == 1, "no connection held the lock"


class TestMariaDBAdvisoryFence(MariaDBTerms, FenceContract):
    @pytest.fixture
    def make_fence(self, mariadb_url: str, mariadb_server: MariaDBServer) -> Iterator[MakeFence]:
        self.server = mariadb_server
        issuer = AdvisoryIssuer(mariadb_url)

        def make(name: str, ttl: float) -> fencing.Fence:
            return AdvisoryFence(mariadb_url, name, ttl, issuer=issuer)

        yield make
        issuer.close()


class TestMariaDBAsyncAdvisoryFence(MariaDBTerms, AsyncFenceContract):
    @pytest.fixture
    async def make_fence(self, mariadb_server: MariaDBServer) -> AsyncIterator[MakeAsyncFence]:
        self.server = mariadb_server
        url = mariadb_server.url_for("aiomysql")
        issuer = AsyncAdvisoryIssuer(url)

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return AsyncAdvisoryFence(url, name, ttl, issuer=issuer)

        yield make
        await issuer.aclose()


class TestMariaDBAdvisoryInterop(MariaDBTerms, InteropContract):
    make_fence = TestMariaDBAdvisoryFence.make_fence
    make_async_fence = TestMariaDBAsyncAdvisoryFence.make_fence


class TestMariaDBAdvisoryStaleHolder(MariaDBTerms, StaleHolderContract):
    """A frozen holder's connection stays open, and its lock with it: it is killed (an
    operator, ``wait_timeout``), as for a holder that crashed."""

    processes = CONTEXT
    make_fence = TestMariaDBAdvisoryFence.make_fence

    @pytest.fixture
    def holder_url(self, mariadb_url: str) -> str:
        return f"{mariadb_url}?lease=advisory"

    def end_frozen_lease(self, name: str) -> None:
        assert kill_holder(self.server, name) == 1, "no connection held the lock"


class TestMariaDBAdvisoryOperations(MariaDBTerms, OperationsContract):
    """``fencing status``/``list``/``release --force`` on ``GET_LOCK`` leases."""

    make_fence = TestMariaDBAdvisoryFence.make_fence
