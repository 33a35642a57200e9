"""The public ``SemaphoreContract`` (blocking and asyncio) on every backend that has
semaphores: memory, Redis, SQLite and PostgreSQL, each made through what a user calls
(``MemoryIssuer.semaphore``, ``fencing.connect(url).semaphore``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio

import fencing
import fencing.aio
from fencing import MemoryIssuer
from fencing.testing.contract import (
    AsyncSemaphoreContract,
    MakeAsyncSemaphore,
    MakeSemaphore,
    SemaphoreContract,
)
from fencing.testing.servers import RedisServer


class TestMemorySemaphore(SemaphoreContract):
    @pytest.fixture
    def make_semaphore(self) -> MakeSemaphore:
        return MemoryIssuer().semaphore


class TestAsyncMemorySemaphore(AsyncSemaphoreContract):
    @pytest.fixture
    def make_semaphore(self) -> MakeAsyncSemaphore:
        return MemoryIssuer().aio_semaphore


class TestRedisSemaphore(SemaphoreContract):
    @pytest.fixture
    def make_semaphore(self, redis_server: RedisServer) -> Iterator[MakeSemaphore]:
        backend = fencing.connect(f"redis://127.0.0.1:{redis_server.port}")
        yield backend.semaphore
        backend.close()


class TestAsyncRedisSemaphore(AsyncSemaphoreContract):
    """On one client of the test's event loop (``backend.aio_semaphore`` opens its own)."""

    @pytest.fixture
    async def make_semaphore(self, redis_server: RedisServer) -> AsyncIterator[MakeAsyncSemaphore]:
        client = redis.asyncio.Redis(port=redis_server.port)
        issuer = fencing.aio.RedisIssuer(client)
        yield lambda name, permits, ttl: fencing.aio.Semaphore(issuer, name, permits, ttl)
        await client.aclose()


class TestSqlSemaphore(SemaphoreContract):
    """On a SQLite file, PostgreSQL and MariaDB (fewer racing rounds: SQLite's writers queue
    on its one file lock, and the waiters back off)."""

    semaphore_rounds = 4

    @pytest.fixture
    def make_semaphore(self, sql_tables_url: str) -> MakeSemaphore:
        return fencing.connect(sql_tables_url).semaphore


class TestAsyncSqlSemaphore(AsyncSemaphoreContract):
    """On a SQLite file (aiosqlite), PostgreSQL (psycopg's asyncio side) and MariaDB
    (aiomysql)."""

    semaphore_rounds = 4

    @pytest.fixture
    async def make_semaphore(self, sql_tables_url: str) -> AsyncIterator[MakeAsyncSemaphore]:
        issuer = fencing.aio.SqlIssuer(sql_tables_url)  # its own pool, disposed on this loop
        yield lambda name, permits, ttl: fencing.aio.Semaphore(issuer, name, permits, ttl)
        await issuer.aclose()
