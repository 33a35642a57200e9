"""The public ``RWLockContract`` on every backend that has read-write locks, each made
through what a user calls (``MemoryIssuer.rwlock``, ``fencing.connect(url).rwlock``, and their
``aio_rwlock``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

import fencing
from fencing import MemoryIssuer
from fencing._rwlock import AsyncRWLock
from fencing.sql import create_tables
from fencing.testing.contract import MakeAsyncRWLock, MakeRWLock, RWLockContract
from fencing.testing.servers import PostgresServer, RedisServer


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
        backend.close()

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


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file, or the session's PostgreSQL or MariaDB with the SDK's tables."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fencing.db'}"
    if request.param == "mariadb":
        return str(request.getfixturevalue("mariadb_url"))
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.url
    engine = create_engine(url)
    create_tables(engine)
    engine.dispose()
    return url


class TestSqlRWLock(RWLockContract):
    """On a SQLite file, PostgreSQL and MariaDB, through ``fencing.connect(url)``."""

    rw_rounds = 4

    @pytest.fixture
    def backend(self, sql_url: str) -> Any:
        return fencing.connect(sql_url)

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
