"""The public contract (``fencing.testing.contract``) against every issuer of the package,
blocking and asyncio (and the two together, ``InteropContract``): memory, Redis, SQLite,
PostgreSQL and MariaDB; and against the issuer of
examples/custom_issuer.py, which docs/issuers.md says passes it.

Each class only says how to make a fence; the tests are the contract's. Backend-specific
behaviour (scripts, restarts, hand-off, SQL rows) is tested in the backend's own module.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis
import redis.asyncio
from interop import ThroughBackend
from processes import CONTEXT

import fencing
import fencing.aio
from fencing import MemoryIssuer
from fencing._connect import Backend
from fencing.sql import SqlFence, SqlIssuer
from fencing.testing.contract import (
    AsyncElectionContract,
    AsyncFenceContract,
    ElectionContract,
    FenceContract,
    InteropContract,
    MakeAsyncFence,
    MakeFence,
    OperationsContract,
    StaleHolderContract,
)
from fencing.testing.servers import RedisServer


def load_example(name: str) -> ModuleType:
    """A script of examples/ as a module (examples/ is not a package)."""
    path = Path(__file__).resolve().parent.parent / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestCustomIssuerExample(FenceContract):
    """The issuer of examples/custom_issuer.py passes, as docs/issuers.md says."""

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        issuer = load_example("custom_issuer").DictIssuer()

        def make(name: str, ttl: float) -> fencing.Fence:
            return fencing.Fence(issuer, name, ttl)

        return make


class TestMemoryFence(FenceContract):
    @pytest.fixture
    def make_fence(self) -> MakeFence:
        issuer = MemoryIssuer()

        def make(name: str, ttl: float) -> fencing.Fence:
            return fencing.MemoryFence(name, ttl, issuer=issuer)

        return make


class TestAsyncMemoryFence(AsyncFenceContract):
    @pytest.fixture
    def make_fence(self) -> MakeAsyncFence:
        issuer = MemoryIssuer()

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return fencing.aio.MemoryFence(name, ttl, issuer=issuer)

        return make


class TestRedisFence(FenceContract):
    @pytest.fixture
    def make_fence(self, redis_client: redis.Redis) -> MakeFence:
        def make(name: str, ttl: float) -> fencing.Fence:
            return fencing.RedisFence(redis_client, name, ttl)

        return make


class TestAsyncRedisFence(AsyncFenceContract):
    @pytest.fixture
    async def make_fence(self, redis_server: RedisServer) -> AsyncIterator[MakeAsyncFence]:
        client = redis.asyncio.Redis(port=redis_server.port)

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return fencing.aio.RedisFence(client, name, ttl)

        yield make
        await client.aclose()


@pytest.fixture(scope="module")
def server_issuer() -> Iterator[Callable[[str], SqlIssuer]]:
    """The blocking issuer of a database of the session's PostgreSQL or MariaDB, one per
    URL for the module's tests: a new one opens its pool's connections again (on MariaDB
    a PyMySQL connection and the engine check, about 50 ms of CPU per test). Every name
    is a uuid, so the tests share them as the threads of one program would."""
    issuers: dict[str, SqlIssuer] = {}

    def issuer(url: str) -> SqlIssuer:
        if url not in issuers:
            issuers[url] = SqlIssuer(url)
        return issuers[url]

    yield issuer
    for made in issuers.values():
        made.engine.dispose()


class TestSqlFence(FenceContract):
    """On a SQLite file, PostgreSQL and MariaDB (``sql_tables_url`` runs each test on each;
    a fresh SQLite file gets an issuer of its own)."""

    @pytest.fixture
    def make_fence(
        self, sql_tables_url: str, server_issuer: Callable[[str], SqlIssuer]
    ) -> Iterator[MakeFence]:
        url = sql_tables_url
        fresh = url.startswith("sqlite")
        issuer = SqlIssuer(url) if fresh else server_issuer(url)

        def make(name: str, ttl: float) -> fencing.Fence:
            return SqlFence(url, name, ttl, issuer=issuer)

        yield make
        if fresh:
            issuer.engine.dispose()


class TestAsyncSqlFence(AsyncFenceContract):
    """On a SQLite file, PostgreSQL and MariaDB, with each asyncio driver."""

    @pytest.fixture
    async def make_fence(self, async_sql_url: str) -> AsyncIterator[MakeAsyncFence]:
        url = async_sql_url
        issuer = fencing.aio.SqlIssuer(url)

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return fencing.aio.SqlFence(url, name, ttl, issuer=issuer)

        yield make
        await issuer.aclose()


class TestMemoryOperations(OperationsContract):
    """``fencing status``/``list``/``release --force`` on the memory issuer."""

    make_fence = TestMemoryFence.make_fence


class TestRedisOperations(OperationsContract):
    """The same on Redis (the STATUS and FORCE_RELEASE scripts, SCAN)."""

    make_fence = TestRedisFence.make_fence


class TestSqlOperations(OperationsContract):
    """The same on a SQLite file, PostgreSQL and MariaDB."""

    make_fence = TestSqlFence.make_fence


# -- elections: fencing.Election on every issuer with status ------------------------------


class TestMemoryElection(ElectionContract):
    make_fence = TestMemoryFence.make_fence


class TestAsyncMemoryElection(AsyncElectionContract):
    make_fence = TestAsyncMemoryFence.make_fence


class TestRedisElection(ElectionContract):
    make_fence = TestRedisFence.make_fence


class TestAsyncRedisElection(AsyncElectionContract):
    make_fence = TestAsyncRedisFence.make_fence


class TestSqlElection(ElectionContract):
    """On a SQLite file, PostgreSQL and MariaDB."""

    make_fence = TestSqlFence.make_fence


class TestAsyncSqlElection(AsyncElectionContract):
    """On a SQLite file, PostgreSQL and MariaDB, with each asyncio driver."""

    make_fence = TestAsyncSqlFence.make_fence


# -- blocking and asyncio fences of one name: one fence ------------------------------------------


class TestMemoryInterop(InteropContract):
    @pytest.fixture
    def issuer(self) -> MemoryIssuer:
        return MemoryIssuer()

    @pytest.fixture
    def make_fence(self, issuer: MemoryIssuer) -> MakeFence:
        return lambda name, ttl: fencing.MemoryFence(name, ttl, issuer=issuer)

    @pytest.fixture
    def make_async_fence(self, issuer: MemoryIssuer) -> MakeAsyncFence:
        return lambda name, ttl: fencing.aio.MemoryFence(name, ttl, issuer=issuer)


class TestRedisInterop(InteropContract):
    make_fence = TestRedisFence.make_fence
    make_async_fence = TestAsyncRedisFence.make_fence


class TestSqlInterop(ThroughBackend):
    """Through ``fencing.connect`` on a SQLite file, PostgreSQL and MariaDB."""

    @pytest.fixture
    def backend(self, sql_tables_url: str) -> Iterator[Backend]:
        backend = fencing.connect(sql_tables_url)
        yield backend
        backend.close()


# -- a holder process frozen past its lease ------------------------------------------------------


class TestRedisStaleHolder(StaleHolderContract):
    processes = CONTEXT
    make_fence = TestRedisFence.make_fence

    @pytest.fixture
    def holder_url(self, redis_server: RedisServer) -> str:
        return redis_server.url


class TestSqlStaleHolder(StaleHolderContract):
    """On a SQLite file, PostgreSQL and MariaDB."""

    processes = CONTEXT
    make_fence = TestSqlFence.make_fence

    @pytest.fixture
    def holder_url(self, sql_tables_url: str) -> str:
        return sql_tables_url
