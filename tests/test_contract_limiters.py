"""The public ``LimiterContract`` (each check blocking and asyncio) on every store of rate
limits but the Redis Cluster and Sentinel ones (in test_redis_cluster_contract.py and
test_redis_sentinel.py, beside their servers): memory, Redis, SQLite, PostgreSQL and
MariaDB, each made through what a user calls (``MemoryIssuer.limiter``,
``fencing.connect(url).limiter``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from limiters import ThroughBackend

import fencing
from fencing import MemoryIssuer
from fencing._connect import Backend
from fencing.testing.contract import LimiterContract, MakeAsyncLimiter, MakeLimiter
from fencing.testing.servers import RedisServer


class TestMemoryLimiter(LimiterContract):
    @pytest.fixture
    def issuer(self) -> MemoryIssuer:
        return MemoryIssuer()

    @pytest.fixture
    def make_limiter(self, issuer: MemoryIssuer) -> MakeLimiter:
        return issuer.limiter

    @pytest.fixture
    def make_async_limiter(self, issuer: MemoryIssuer) -> MakeAsyncLimiter:
        return issuer.aio_limiter


class TestRedisLimiter(ThroughBackend):
    @pytest.fixture
    def backend(self, redis_server: RedisServer) -> Iterator[Backend]:
        backend = fencing.connect(redis_server.url)
        yield backend
        backend.close()


class TestSqlLimiter(ThroughBackend):
    """On a fresh SQLite file, the session's PostgreSQL and its MariaDB
    (``sql_tables_url``), with the SDK's tables, as ``fencing migrate`` makes them."""

    @pytest.fixture
    def backend(self, sql_tables_url: str) -> Iterator[Backend]:
        backend = fencing.connect(sql_tables_url)
        yield backend
        backend.close()
