"""``fencing.sql.advisory_xact``: a token under ``pg_advisory_xact_lock`` in the caller's
own transaction (issue 23, "transaction scope"). Committed: the token stays issued and
the lock goes. Rolled back: neither the lock nor the token's bump stays. It excludes
``lease=advisory`` leases and raw advisory locks of the same name, waits for the lock
(or tries once), and works behind pgbouncer in transaction mode, where session leases
are refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pg_advisory import advisory_url
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from test_sql_advisory import locked_anywhere, raw, try_lock, unique
from waiting import joined, wait_until

import fencing
from fencing.sql import AdvisoryFence, advisory_xact
from fencing.sql import aio as sql_aio
from fencing.testing.servers import PgBouncer, PostgresServer

__all__ = ["advisory_url"]  # a fixture, used below

LAST = text("SELECT token FROM fencing_leases WHERE name = :name")


@pytest.fixture
def engine(advisory_url: str) -> Iterator[Engine]:
    engine = create_engine(advisory_url)
    yield engine
    engine.dispose()


def last_token(engine: Engine, name: str) -> int | None:
    with engine.connect() as conn:
        found = conn.execute(LAST, {"name": name}).scalar()
    return None if found is None else int(found)


def test_commit_keeps_the_token_and_frees_the_lock(
    engine: Engine, postgres_server: PostgresServer
) -> None:
    name = unique("xact-commit")
    with raw(postgres_server) as direct:
        with engine.begin() as conn:
            token = advisory_xact(conn, name)
            assert isinstance(token, fencing.FenceToken) and token.name == name
            assert not try_lock(direct, name)  # held for the transaction ...
            assert last_token(engine, name) is None  # ... and the bump not yet visible
        assert try_lock(direct, name)  # committed: the lock went with the transaction
        assert try_lock(direct, name, unlock=True)
        assert last_token(engine, name) == token
        with engine.begin() as conn:
            assert advisory_xact(conn, name) > token


def test_rollback_leaves_neither_the_lock_nor_the_token(
    engine: Engine, postgres_server: PostgresServer
) -> None:
    name = unique("xact-rollback")
    with engine.begin() as conn:
        first = advisory_xact(conn, name)
    with raw(postgres_server) as direct:
        with engine.connect() as conn:
            rolled_back = advisory_xact(conn, name)
            assert rolled_back > first
            assert locked_anywhere(direct, name) == 1
            conn.rollback()
            assert locked_anywhere(direct, name) == 0  # the lock is gone ...
            assert last_token(engine, name) == first  # ... and so is the bump
        with Session(engine) as session:  # an ORM session: the same
            assert advisory_xact(session, name) > first
            assert locked_anywhere(direct, name) == 1
        assert locked_anywhere(direct, name) == 0  # closed without commit: rolled back
        assert last_token(engine, name) == first
        assert try_lock(direct, name)
        assert try_lock(direct, name, unlock=True)


def test_excludes_advisory_leases_and_raw_locks(
    engine: Engine, advisory_url: str, postgres_server: PostgresServer
) -> None:
    name = unique("xact-excludes")
    lease = AdvisoryFence(advisory_url, name, ttl=30)
    with engine.connect() as conn:
        token = advisory_xact(conn, name)
        with pytest.raises(fencing.AcquireTimeout):
            lease.acquire(timeout=0)  # a session lock waits for the transaction's
        conn.commit()
    held = lease.acquire(timeout=0)
    assert held > token  # one counter: the lease's token is above the transaction's
    with engine.connect() as conn:
        with pytest.raises(fencing.AcquireTimeout):
            advisory_xact(conn, name, wait=False)
        conn.execute(text("SELECT 1"))  # the transaction is still usable
        conn.rollback()
    lease.release(held)
    with raw(postgres_server) as direct, engine.connect() as conn:
        assert try_lock(direct, name)
        with pytest.raises(fencing.AcquireTimeout):
            advisory_xact(conn, name, wait=False)
        conn.rollback()
        assert try_lock(direct, name, unlock=True)
        assert advisory_xact(conn, name, wait=False) > held
        conn.rollback()


def test_a_waiter_gets_the_lock_and_a_higher_token_at_commit(
    engine: Engine, postgres_server: PostgresServer
) -> None:
    name = unique("xact-wait")
    got: list[int] = []

    def waiter() -> None:
        with engine.begin() as conn:
            got.append(advisory_xact(conn, name))

    with raw(postgres_server) as direct, engine.connect() as conn:
        token = advisory_xact(conn, name)
        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        waiting = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND objid::int8 = %s"
        )
        k2 = fencing.sql.advisory_keys(name)[1] & 0xFFFFFFFF
        wait_until(
            lambda: direct.execute(waiting, (k2,)).fetchone() == (1,),
            "the second transaction to wait for the lock",
        )
        assert not got
        conn.commit()
        joined(thread)
    assert got and got[0] > token


def test_bad_input_is_refused_with_nothing_sent(
    engine: Engine, tmp_path: Any, postgres_server: PostgresServer
) -> None:
    name = unique("xact-bad")
    with engine.connect() as conn:
        for bad, error in [(b"x", TypeError), ("", ValueError), ("a\x00b", ValueError)]:
            with pytest.raises(error):
                advisory_xact(conn, bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            advisory_xact(conn, name, wait=1)  # type: ignore[arg-type]
        assert not conn.in_transaction()  # nothing was sent
    with pytest.raises(TypeError):
        advisory_xact(engine, name)  # type: ignore[arg-type]
    autocommit = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    with autocommit as conn, pytest.raises(ValueError, match="autocommit"):
        advisory_xact(conn, name)
    sqlite = create_engine(f"sqlite:///{tmp_path}/x.db")
    with sqlite.connect() as conn, pytest.raises(ValueError, match="PostgreSQL"):
        advisory_xact(conn, name)
    sqlite.dispose()
    with raw(postgres_server) as direct:
        assert locked_anywhere(direct, name) == 0
    assert last_token(engine, name) is None


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
async def test_asyncio_rollback_and_commit(
    advisory_url: str, postgres_server: PostgresServer, driver: str
) -> None:
    name = unique(f"xact-aio-{driver}")
    engine = create_async_engine(postgres_server.url_for(driver))
    try:
        with raw(postgres_server) as direct:
            async with engine.connect() as conn:
                token = await sql_aio.advisory_xact(conn, name)
                assert locked_anywhere(direct, name) == 1
                await conn.rollback()
                assert locked_anywhere(direct, name) == 0
            async with AsyncSession(engine) as session:
                again = await sql_aio.advisory_xact(session, name)
                assert locked_anywhere(direct, name) == 1
                await session.commit()
            assert locked_anywhere(direct, name) == 0
            async with engine.connect() as conn:
                assert (await conn.execute(LAST, {"name": name})).scalar() == again
        assert again >= token  # the rolled-back bump was undone: never below it
        with pytest.raises(TypeError):
            await sql_aio.advisory_xact(object(), name)  # type: ignore[arg-type]
        async with engine.connect() as conn:  # the same checks, awaited
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
            with pytest.raises(ValueError, match="autocommit"):
                await sql_aio.advisory_xact(autocommit, name)
            with pytest.raises(TypeError):
                await sql_aio.advisory_xact(conn, name, wait=1)  # type: ignore[arg-type]
    finally:
        await engine.dispose()


def test_works_behind_a_transaction_pooler(
    advisory_url: str, postgres_server: PostgresServer
) -> None:
    """What a session lease cannot do: the lock lives as long as the transaction, which
    pgbouncer keeps on one server connection in transaction mode."""
    name = unique("xact-pooler")
    with PgBouncer(postgres_server.port, "transaction") as bouncer:
        pooled = create_engine(bouncer.url)
        try:
            with raw(postgres_server) as direct:
                with pooled.begin() as conn:
                    token = advisory_xact(conn, name)
                    assert not try_lock(direct, name)
                    assert conn.execute(LAST, {"name": name}).scalar() == token
                assert try_lock(direct, name)
                assert try_lock(direct, name, unlock=True)
                with pooled.connect() as conn:
                    assert advisory_xact(conn, name) > token
                    conn.rollback()
                assert locked_anywhere(direct, name) == 0
        finally:
            pooled.dispose()
