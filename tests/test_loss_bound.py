"""The loss bound (``fencing.testing.contract.LossBoundContract``, issue 32) on every
engine: a hold on a frozen issuer signals its loss by the lease's end, not when its
renewal's call times out. And with the connection cut rather than the server frozen
(a proxy that stops forwarding), on Redis and PostgreSQL.

Each engine's issuer is frozen for real (its server processes stopped with SIGSTOP and
checked stopped in ``/proc``), so the servers frozen are the test's own: a redis-server
per test (cheap), and, for the engines whose servers are costly to start, servers that
only their group's tests use, one test at a time (docs/testing.md).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from sqlalchemy import create_engine, make_url

import fencing
import fencing.redis
import fencing.redis.aio
from fencing.sql import create_tables
from fencing.testing.contract import AsyncLossBoundContract, Freeze, LossBoundContract
from fencing.testing.servers import (
    CuttableProxy,
    EtcdCluster,
    PostgresServer,
    RedisCluster,
    RedisServer,
    SentinelGroup,
    ZooKeeperServer,
    all_frozen,
    frozen,
)


class TestMemoryLossBound(LossBoundContract):
    """The memory issuer frozen: its lock held by the test, so every call waits."""

    @pytest.fixture
    def issuer(self) -> fencing.MemoryIssuer:
        return fencing.MemoryIssuer()

    @pytest.fixture
    def freeze(self, issuer: fencing.MemoryIssuer) -> Freeze:
        @contextlib.contextmanager
        def freeze() -> Iterator[None]:
            with issuer._changed:
                yield

        return freeze


@pytest.fixture
def frozen_redis(redis_factory: Callable[..., RedisServer]) -> RedisServer:
    """A redis-server of the test's own, to freeze."""
    return redis_factory()


@pytest.fixture(params=["frozen", "cut"])
def redis_outage(
    request: pytest.FixtureRequest, frozen_redis: RedisServer
) -> Iterator[tuple[int, Freeze]]:
    """The port to reach a redis-server of the test's own, and how its outage is made:
    the server frozen, or the connection to it cut (a proxy that stops forwarding)."""
    if request.param == "frozen":
        yield frozen_redis.port, frozen_redis.frozen
        return
    with CuttableProxy(frozen_redis.port) as proxy:
        yield proxy.port, proxy.cut


class TestRedisLossBound(LossBoundContract):
    """The user's own client, without a socket timeout: its calls to a frozen server, or
    through a cut connection, never end by themselves."""

    @pytest.fixture
    def issuer(self, redis_outage: tuple[int, Freeze]) -> Iterator[fencing.redis.RedisIssuer]:
        client = redis.Redis(port=redis_outage[0])
        yield fencing.redis.RedisIssuer(client)
        client.close()

    @pytest.fixture
    def freeze(self, redis_outage: tuple[int, Freeze]) -> Freeze:
        return redis_outage[1]


class TestAsyncRedisLossBound(AsyncLossBoundContract):
    @pytest.fixture
    async def async_issuer(
        self, redis_outage: tuple[int, Freeze]
    ) -> AsyncIterator[fencing.redis.aio.RedisIssuer]:
        client = redis.asyncio.Redis(port=redis_outage[0])
        yield fencing.redis.aio.RedisIssuer(client)
        await client.aclose()

    @pytest.fixture
    def freeze(self, redis_outage: tuple[int, Freeze]) -> Freeze:
        return redis_outage[1]


# -- the other engines, through fencing.connect(url) ---------------------------------------


class ConnectedLossBound(LossBoundContract):
    """The blocking issuer of ``fencing.connect(url)``; a subclass gives ``url`` and
    ``freeze``."""

    @pytest.fixture
    def issuer(self, url: str) -> Iterator[Any]:
        issuer = fencing.connect(url).fence("loss-bound").issuer
        yield issuer
        close = getattr(issuer, "close", None)
        if close is not None:
            close()


class AsyncConnectedLossBound(AsyncLossBoundContract):
    """The asyncio issuer of ``fencing.connect(url)`` (see ``ConnectedLossBound``)."""

    @pytest.fixture
    async def async_issuer(self, url: str) -> AsyncIterator[Any]:
        fence = fencing.connect(url).aio_fence("loss-bound")
        yield fence.issuer
        await fence.aclose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fencing.db'}"


@pytest.fixture
def sqlite_freeze(tmp_path: Path) -> Freeze:
    """SQLite has no server: its issuer is frozen by a writer that took the database's
    write lock and stalled, so every renewal waits for the busy timeout (30 s)."""

    @contextlib.contextmanager
    def freeze() -> Iterator[None]:
        # the issuer's own writes hold the lock briefly: wait for it as long as a loaded
        # machine may need (sqlite3's default of 5 s once ran out, under a load of 20)
        writer = sqlite3.connect(tmp_path / "fencing.db", isolation_level=None, timeout=60)
        try:
            writer.execute("BEGIN IMMEDIATE")
            yield
        finally:
            writer.close()  # rolls back: the lock is free again

    return freeze


class _Sqlite:
    @pytest.fixture
    def url(self, sqlite_url: str) -> str:
        return sqlite_url

    @pytest.fixture
    def freeze(self, sqlite_freeze: Freeze) -> Freeze:
        return sqlite_freeze


class TestSqliteLossBound(_Sqlite, ConnectedLossBound):
    pass


class TestAsyncSqliteLossBound(_Sqlite, AsyncConnectedLossBound):
    @pytest.fixture
    def url(self, sqlite_url: str) -> str:
        return sqlite_url.replace("sqlite:", "sqlite+aiosqlite:")


@pytest.fixture
def pg_tables_url(pg_url: str) -> str:
    """The session's PostgreSQL, with the SDK's tables. Freezing it stops only this
    worker's tests, one at a time (SIGSTOP is transparent to the connections after)."""
    engine = create_engine(pg_url)
    create_tables(engine)
    engine.dispose()
    return pg_url


class _Postgres:
    @pytest.fixture
    def url(self, pg_tables_url: str) -> str:
        return pg_tables_url

    @pytest.fixture
    def freeze(self, postgres_server: PostgresServer) -> Freeze:
        return postgres_server.frozen


class TestPostgresLossBound(_Postgres, ConnectedLossBound):
    pass


class TestAsyncPostgresLossBound(_Postgres, AsyncConnectedLossBound):
    pass


@pytest.fixture
def redlock_nodes(redis_factory: Callable[..., RedisServer]) -> list[RedisServer]:
    """Three masters of the test's own; two of them (a majority) are frozen."""
    return [redis_factory() for _ in range(3)]


class _Redlock:
    @pytest.fixture
    def url(self, redlock_nodes: list[RedisServer]) -> str:
        return "redis+redlock://" + ",".join(f"127.0.0.1:{node.port}" for node in redlock_nodes)

    @pytest.fixture
    def freeze(self, redlock_nodes: list[RedisServer]) -> Freeze:
        return lambda: all_frozen(redlock_nodes[:2])


class TestRedlockLossBound(_Redlock, ConnectedLossBound):
    pass


class TestAsyncRedlockLossBound(_Redlock, AsyncConnectedLossBound):
    pass


class _Sentinel:
    @pytest.fixture
    def url(self, sentinel_group: SentinelGroup) -> str:
        return sentinel_group.url

    @pytest.fixture
    def freeze(self, sentinel_group: SentinelGroup) -> Freeze:
        """The whole group, Sentinels too: a frozen primary alone would be failed over,
        and a renewal on the promoted replica may rightly keep the lease."""
        group = sentinel_group
        return lambda: all_frozen([group.primary, group.replica, *group.sentinels])


class TestSentinelLossBound(_Sentinel, ConnectedLossBound):
    pass


class TestAsyncSentinelLossBound(_Sentinel, AsyncConnectedLossBound):
    pass


# The engines below freeze the session's servers of their group (docs/testing.md): only
# that group's tests use them, one at a time, and every freeze is shorter than what they
# would notice (the Cluster's node timeout, 5 s; ZooKeeper's sessions, 10 s; etcd's
# elections count ticks, which a frozen member does not).


class _RedisCluster:
    @pytest.fixture
    def url(self, redis_cluster: RedisCluster) -> str:
        return redis_cluster.url

    @pytest.fixture
    def freeze(self, redis_cluster: RedisCluster) -> Freeze:
        return lambda: all_frozen(redis_cluster.nodes)


class TestRedisClusterLossBound(_RedisCluster, ConnectedLossBound):
    pass


class TestAsyncRedisClusterLossBound(_RedisCluster, AsyncConnectedLossBound):
    pass


class _Etcd:
    @pytest.fixture
    def url(self, etcd_cluster: EtcdCluster) -> str:
        return etcd_cluster.url

    @pytest.fixture
    def freeze(self, etcd_cluster: EtcdCluster) -> Freeze:
        members = etcd_cluster.members
        return lambda: frozen([member.process.pid for member in members if member.process])


class TestEtcdLossBound(_Etcd, ConnectedLossBound):
    pass


class TestAsyncEtcdLossBound(_Etcd, AsyncConnectedLossBound):
    pass


class _ZooKeeper:
    @pytest.fixture
    def url(self, zookeeper_server: ZooKeeperServer) -> str:
        return zookeeper_server.url

    @pytest.fixture
    def freeze(self, zookeeper_server: ZooKeeperServer) -> Freeze:
        return zookeeper_server.frozen


class TestZooKeeperLossBound(_ZooKeeper, ConnectedLossBound):
    pass


class TestAsyncZooKeeperLossBound(_ZooKeeper, AsyncConnectedLossBound):
    pass


# -- the connection cut, not the server: a proxy that stops forwarding ---------------------


@pytest.fixture
def pg_proxy(postgres_server: PostgresServer) -> Iterator[CuttableProxy]:
    with CuttableProxy(postgres_server.port) as proxy:
        yield proxy


class _PostgresCut:
    """The connection to the session's PostgreSQL cut (the server itself runs on)."""

    @pytest.fixture
    def url(self, pg_tables_url: str, pg_proxy: CuttableProxy) -> str:
        return str(make_url(pg_tables_url).set(port=pg_proxy.port))

    @pytest.fixture
    def freeze(self, pg_proxy: CuttableProxy) -> Freeze:
        return pg_proxy.cut


class TestPostgresCutLossBound(_PostgresCut, ConnectedLossBound):
    pass


class TestAsyncPostgresCutLossBound(_PostgresCut, AsyncConnectedLossBound):
    pass
