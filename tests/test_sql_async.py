"""The SQL side on asyncio: fencing.sql.aio.SqlFence, and FencedMixin rows on AsyncSession.

Runs on aiosqlite, psycopg (async) and asyncpg.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from sql_models import make_models
from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm.exc import StaleDataError

import fencing
import fencing.aio
from fencing.sql import guarded_update
from fencing.sql.aio import SqlFence, SqlIssuer
from fencing.testing.servers import free_port


@pytest.fixture
async def aengine(async_sql_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(async_sql_url)
    yield engine
    await engine.dispose()


async def test_async_tokens_increase_in_the_row(aengine: AsyncEngine) -> None:
    """The lease promises are the contract's (tests/test_contract_issuers.py, every
    driver); here: the row's counter goes up with every lease."""
    assert fencing.aio.SqlFence is SqlFence
    issuer = SqlIssuer(aengine)  # on SQLite, its own engine: disposed below
    fence = SqlFence(aengine, f"a:{uuid.uuid4().hex}", ttl=5, issuer=issuer)
    first = await fence.acquire(timeout=0)
    await fence.release(first)
    second = await fence.acquire(timeout=0)
    assert second > first
    await fence.release(second)
    await issuer.aclose()


async def test_async_hold_and_concurrent_tasks_get_unique_tokens(aengine: AsyncEngine) -> None:
    name = f"t:{uuid.uuid4().hex}"
    issuer = SqlIssuer(aengine)  # on SQLite, its own engine: disposed below

    async def worker() -> list[int]:
        fence = SqlFence(aengine, name, ttl=5, issuer=issuer)
        got = []
        for _ in range(5):
            async with fence.hold(timeout=30) as token:
                got.append(int(token))
        return got

    results = await asyncio.gather(*(worker() for _ in range(4)))
    everything = sorted(t for tokens in results for t in tokens)
    assert len(set(everything)) == 20  # no token issued twice
    await issuer.aclose()


async def test_async_unreachable_database_raises_fence_unavailable() -> None:
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/none"
    fence = SqlFence(url, "u")
    with pytest.raises(fencing.FenceUnavailable):
        await fence.acquire(timeout=0)


async def test_async_session_flush_is_guarded(aengine: AsyncEngine) -> None:
    Base, Invoice, _ = make_models(uuid.uuid4().hex[:10])
    async with aengine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    statements: list[str] = []
    event.listen(
        aengine.sync_engine, "before_cursor_execute", lambda c, cur, sql, *a: statements.append(sql)
    )
    try:
        async with AsyncSession(aengine) as s:
            s.add(Invoice(id=1, total=0, fence_token=1))
            await s.commit()
        async with AsyncSession(aengine) as s:
            invoice = await s.get_one(Invoice, 1)
            invoice.total, invoice.fence_token = 10, 5
            await s.commit()
        assert any("fence_token <=" in sql for sql in statements if sql.startswith("UPDATE"))
        async with AsyncSession(aengine) as s:
            invoice = await s.get_one(Invoice, 1)
            invoice.total, invoice.fence_token = 99, 4
            with pytest.raises(fencing.StaleTokenError) as info:
                await s.commit()
            assert isinstance(info.value, StaleDataError)
            assert (info.value.token, info.value.current) == (4, 5)
        async with AsyncSession(aengine) as s:
            (await s.get_one(Invoice, 1)).total = 7
            with pytest.raises(fencing.UnfencedWriteError):
                await s.commit()
        async with aengine.begin() as conn:
            table = Invoice.__table__
            with pytest.raises(fencing.StaleTokenError):
                await conn.execute(guarded_update(table, 3, table.c.id == 1).values(total=3))
            await conn.execute(guarded_update(table, 6, table.c.id == 1).values(total=6))
        async with aengine.connect() as conn:
            row = (await conn.execute(select(table.c.total, table.c.fence_token))).one()
        assert tuple(row) == (6, 6)
    finally:
        async with aengine.begin() as conn:
            await conn.run_sync(Base.metadata.drop_all)
