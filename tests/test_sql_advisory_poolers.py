"""``lease=advisory`` behind a real pgbouncer (Debian's package), issue 23's poolers part.

In session mode a client keeps one server connection until it disconnects, so a
session-level advisory lock is a lease as on a direct connection: the contract's quick
path runs through it. In transaction mode the server connection goes
back to the pool after each transaction, so the lock would protect nothing: the first
acquire on such a connection is refused with ``FenceSetupError``, and a direct
connection then shows that nothing was left locked on the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import psycopg
import pytest
from pg_advisory import advisory_url
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine
from test_sql_advisory import locked_anywhere, raw, try_lock, unique
from test_sql_advisory_contract import AdvisoryTerms

import fencing
import fencing.aio
from fencing.sql import AdvisoryFence, AdvisoryIssuer
from fencing.sql._advisory_flows import is_direct, socket_address
from fencing.sql._advisory_statements import POSTGRESQL
from fencing.sql.aio import AdvisoryFence as AsyncAdvisoryFence
from fencing.sql.aio import AdvisoryIssuer as AsyncAdvisoryIssuer
from fencing.testing.contract import AsyncFenceContract, FenceContract, MakeAsyncFence, MakeFence
from fencing.testing.servers import PgBouncer, PostgresServer

__all__ = ["advisory_url"]  # a fixture, used below


@pytest.fixture(scope="module")
def session_pooler(postgres_server: PostgresServer) -> Iterator[PgBouncer]:
    with PgBouncer(postgres_server.port, "session") as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def transaction_pooler(postgres_server: PostgresServer) -> Iterator[PgBouncer]:
    """(Statement mode refuses the transactions SQLAlchemy opens to set up a dialect:
    nothing connects through it at all.)"""
    with PgBouncer(postgres_server.port, "transaction") as bouncer:
        yield bouncer


def pooled_url(bouncer: PgBouncer, server: PostgresServer, driver: str = "psycopg") -> str:
    return bouncer.url_for(driver, server.database)


# -- session mode: a lease as on a direct connection ----------------------------------

QUICK = (
    "test_tokens_increase_across_release",
    "test_lease_is_exclusive_and_timeout_zero_tries_once",
    "test_waiter_gets_the_lease_when_the_holder_releases",
    "test_renew_extends_the_lease",
    "test_renew_and_release_only_by_the_exact_holder",
    "test_hold_surfaces_a_lost_lease",
)


C = TypeVar("C", bound=type)


def quick_path(cls: C) -> C:
    """Keep only the ``QUICK`` checks of the contract ``cls`` inherits: the others are
    not collected (a test attribute that is ``None`` is not a test); the whole contract
    runs on direct connections (test_sql_advisory_contract.py)."""
    for name in dir(cls):
        if name.startswith("test_") and name not in QUICK:
            setattr(cls, name, None)
    return cls


@quick_path
class TestSessionPooler(AdvisoryTerms, FenceContract):
    """The contract's quick path (acquire, renew, release, a waiter woken, a lost lease)
    with every connection of the issuer going through pgbouncer in session mode."""

    @pytest.fixture
    def make_fence(
        self, advisory_url: str, postgres_server: PostgresServer, session_pooler: PgBouncer
    ) -> Iterator[MakeFence]:
        self.server = postgres_server
        url = pooled_url(session_pooler, postgres_server)
        issuer = AdvisoryIssuer(url)

        def make(name: str, ttl: float) -> fencing.Fence:
            return AdvisoryFence(url, name, ttl, issuer=issuer)

        yield make
        issuer.close()


@quick_path
class TestAsyncSessionPooler(AdvisoryTerms, AsyncFenceContract):
    """The same, asyncio (psycopg and asyncpg)."""

    @pytest.fixture(params=["psycopg", "asyncpg"])
    async def make_fence(
        self,
        request: pytest.FixtureRequest,
        advisory_url: str,
        postgres_server: PostgresServer,
        session_pooler: PgBouncer,
    ) -> AsyncIterator[MakeAsyncFence]:
        self.server = postgres_server
        url = pooled_url(session_pooler, postgres_server, request.param)
        issuer = AsyncAdvisoryIssuer(url)

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return AsyncAdvisoryFence(url, name, ttl, issuer=issuer)

        yield make
        await issuer.aclose()


def test_session_pooler_excludes_a_direct_holder(
    advisory_url: str, postgres_server: PostgresServer, session_pooler: PgBouncer
) -> None:
    """A lease through the pooler and a raw lock on a direct connection exclude each
    other (both are locks of the one server), asyncio too."""
    name = unique("session-pooler")
    issuer = AdvisoryIssuer(pooled_url(session_pooler, postgres_server))
    fence = AdvisoryFence(issuer.engine, name, ttl=30, issuer=issuer)
    try:
        with raw(postgres_server) as direct:
            token = fence.acquire(timeout=0)
            assert not try_lock(direct, name)
            assert locked_anywhere(direct, name) == 1
            fence.release(token)
            assert try_lock(direct, name)
            with pytest.raises(fencing.AcquireTimeout):
                fence.acquire(timeout=0)
            assert try_lock(direct, name, unlock=True)
            assert fence.acquire(timeout=0) > token
    finally:
        issuer.close()


# -- transaction and statement mode: refused at acquire, nothing left locked ----------


def test_transaction_pooler_is_refused_with_nothing_locked(
    advisory_url: str, postgres_server: PostgresServer, transaction_pooler: PgBouncer
) -> None:
    name = unique("refused")
    issuer = AdvisoryIssuer(pooled_url(transaction_pooler, postgres_server))
    fence = AdvisoryFence(issuer.engine, name, ttl=30, issuer=issuer)
    try:
        with raw(postgres_server) as direct:
            for _ in range(2):  # a refused connection is never pooled: refused again
                with pytest.raises(fencing.FenceSetupError, match="session") as refused:
                    fence.acquire(timeout=0)
                assert "lease=row" in str(refused.value)
                assert locked_anywhere(direct, name) == 0
                assert try_lock(direct, name)  # nothing left locked: the lock is free
                assert try_lock(direct, name, unlock=True)
    finally:
        issuer.close()


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
async def test_transaction_pooler_is_refused_asyncio(
    advisory_url: str, postgres_server: PostgresServer, transaction_pooler: PgBouncer, driver: str
) -> None:
    name = unique(f"refused-aio-{driver}")
    url = pooled_url(transaction_pooler, postgres_server, driver)
    connect_args: dict[str, Any] = {}
    if driver == "asyncpg":  # asyncpg behind a transaction pooler needs no statement cache
        connect_args = {"statement_cache_size": 0, "prepared_statement_cache_size": 0}
    engine = create_async_engine(url, connect_args=connect_args)
    issuer = AsyncAdvisoryIssuer(engine)
    fence = AsyncAdvisoryFence(engine, name, ttl=30, issuer=issuer)
    try:
        with pytest.raises(fencing.FenceSetupError, match="session"):
            await fence.acquire(timeout=0)
        with raw(postgres_server) as direct:
            assert locked_anywhere(direct, name) == 0
            assert try_lock(direct, name)
            assert try_lock(direct, name, unlock=True)
    finally:
        await issuer.aclose()
        await engine.dispose()  # the user's: the issuer leaves it open


def test_lease_connection_moved_is_refused_and_its_backend_ended(
    advisory_url: str, postgres_server: PostgresServer
) -> None:
    """The other sighting: the lease's own connection lands on another server connection
    (another client of the pooler holds the lease's one in an open transaction, taken
    right after the acquire). The backend that took the lock cannot be reached to
    unlock it, so it is terminated: nothing stays locked."""
    with PgBouncer(postgres_server.port, "transaction") as bouncer:
        name = unique("moved")
        squatters: list[psycopg.Connection[Any]] = []

        class Squatting(psycopg.Cursor[Any]):
            """Right after the acquire statement, another client pins the freed server
            connection (a driver cursor: the issuer sends its statements on those)."""

            def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                result = super().execute(query, *args, **kwargs)
                if "pg_try_advisory_lock" in str(query) and not squatters:
                    other = psycopg.connect(
                        f"host=127.0.0.1 port={bouncer.port} user=postgres "
                        f"dbname={postgres_server.database}"
                    )
                    other.execute("SELECT 1")  # BEGIN: the freed server connection is pinned
                    squatters.append(other)
                return result

        engine = create_engine(
            pooled_url(bouncer, postgres_server), connect_args={"cursor_factory": Squatting}
        )
        issuer = AdvisoryIssuer(engine)
        try:
            with pytest.raises(fencing.FenceSetupError, match="moved"):
                AdvisoryFence(engine, name, ttl=30, issuer=issuer).acquire(timeout=0)
            assert squatters
            with raw(postgres_server) as direct:
                assert locked_anywhere(direct, name) == 0
                assert try_lock(direct, name)
                assert try_lock(direct, name, unlock=True)
        finally:
            for other in squatters:
                other.close()
            issuer.close()
            engine.dispose()  # the user's: the issuer leaves it open


# -- direct connections are proven without a probe ------------------------------------


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
async def test_a_direct_connection_is_recognised(
    postgres_server: PostgresServer, session_pooler: PgBouncer, driver: str
) -> None:
    """The server's view of its peer is this very socket on a direct connection, and not
    through the pooler (which then needs the probe)."""
    for url, direct in [
        (postgres_server.url_for(driver), True),
        (pooled_url(session_pooler, postgres_server, driver), False),
    ]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                _, *peer = (await conn.execute(POSTGRESQL.peer)).one()
                raw_conn = await conn.get_raw_connection()
                local = socket_address(raw_conn.driver_connection)
                assert local is not None
                assert is_direct((peer[0], peer[1]), local) is direct, url
        finally:
            await engine.dispose()
    engine_sync = create_engine(postgres_server.url)
    with engine_sync.connect() as conn:
        _, *peer = conn.execute(text(POSTGRESQL.peer.text)).one()
        assert is_direct((peer[0], peer[1]), socket_address(conn.connection.driver_connection))
    engine_sync.dispose()
