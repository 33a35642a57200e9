"""The public ``RWLockContract`` on every backend that has read-write locks, each made
through what a user calls (``MemoryIssuer.rwlock``, ``fencing.connect(url).rwlock``, and their
``aio_rwlock``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rwlocks import ThroughBackend

import fencing
from fencing import MemoryIssuer
from fencing._connect import Backend
from fencing.testing.contract import MakeAsyncRWLock, MakeRWLock, RWLockContract
from fencing.testing.servers import RedisServer


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


class TestRedisRWLock(ThroughBackend):
    @pytest.fixture
    def backend(self, redis_server: RedisServer) -> Iterator[Backend]:
        backend = fencing.connect(f"redis://127.0.0.1:{redis_server.port}")
        yield backend
        backend.close()


class TestSqlRWLock(ThroughBackend):
    """On a SQLite file, PostgreSQL and MariaDB (fewer racing rounds: SQLite's writers
    queue on its one file lock, and the waiters poll)."""

    rw_rounds = 4

    @pytest.fixture
    def backend(self, sql_tables_url: str) -> Backend:
        return fencing.connect(sql_tables_url)
