"""``aclose()`` of the asyncio objects that ``fencing.connect(url)``'s backends make: it
closes the connections opened for that object (seen from the server where it can tell:
Redis ``CLIENT LIST`` by client name, PostgreSQL ``pg_stat_activity`` by application
name), never a client passed in nor a session the backend shares; twice is fine, and an
object used again reconnects."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

import psycopg
import pytest
import redis
import redis.asyncio
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import fencing
import fencing.aio
from fencing._base.owned import Owner
from fencing._connect import NoLimiter
from fencing.sql import create_tables
from fencing.testing.servers import PostgresServer, RedisServer

#: (kind, fixture) of each backend; etcd's and ZooKeeper's tests share their servers'
#: pytest-xdist worker (see conftest's groups).
KINDS = [
    pytest.param("redis", id="redis"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql"),
    pytest.param("etcd", id="etcd", marks=pytest.mark.xdist_group("etcd")),
    pytest.param("zookeeper", id="zookeeper", marks=pytest.mark.xdist_group("zookeeper")),
]

#: A probe: how many connections of the objects are open now.
Probe = Callable[[list[Owner]], Awaitable[int]]


def _issuer(obj: Owner) -> object:
    if isinstance(obj, fencing.aio.Semaphore):
        return obj.fences[0].issuer
    if isinstance(obj, fencing.aio.Limiter):
        return obj.store
    return obj.issuer  # type: ignore[attr-defined]


def _setup(kind: str, request: pytest.FixtureRequest, tag: str) -> tuple[str, Probe]:
    """The URL of ``kind`` whose connections carry ``tag``, and its probe."""
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")

        async def clients(objs: list[Owner]) -> int:
            with redis.Redis.from_url(server.url) as admin:
                return sum(c.get("name") == tag for c in admin.client_list())

        return f"{server.url}?client_name={tag}", clients
    if kind == "postgresql":
        url = request.getfixturevalue("pg_url")
        _create_tables(url)
        pg: PostgresServer = request.getfixturevalue("postgres_server")

        async def sessions(objs: list[Owner]) -> int:
            dsn = f"host=127.0.0.1 port={pg.port} user=postgres dbname=postgres"
            with psycopg.connect(dsn) as conn:
                query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                row = conn.execute(query, (tag,)).fetchone()
            return int(row[0]) if row else 0

        return f"{url}?application_name={tag}", sessions
    if kind == "sqlite":
        path = request.getfixturevalue("tmp_path") / "fencing.db"

        async def pooled(objs: list[Owner]) -> int:  # no server to ask: the pools do
            pools = [_issuer(obj).engine.pool for obj in objs]  # type: ignore[attr-defined]
            return sum(pool.checkedin() + pool.checkedout() for pool in pools)

        return f"sqlite:///{path}", pooled
    if kind == "etcd":
        cluster = request.getfixturevalue("etcd_cluster")

        async def channels(objs: list[Owner]) -> int:  # one per member used, until closed
            members = [_issuer(obj).cluster._members for obj in objs]  # type: ignore[attr-defined]
            return sum(len(m) for m in members)

        return cluster.url, channels
    zookeeper = request.getfixturevalue("zookeeper_server")
    return zookeeper.url, _none


def _create_tables(url: str) -> None:
    engine = create_engine(url)
    create_tables(engine)
    engine.dispose()


async def _none(objs: list[Owner]) -> int:
    return 0


async def _use(obj: Owner) -> None:
    """One call that needs the server, on any of the four kinds of object."""
    if isinstance(obj, fencing.aio.Fence):
        await obj.release(await obj.acquire(timeout=5))
    elif isinstance(obj, fencing.aio.Election):
        await obj.leader()
    elif isinstance(obj, fencing.aio.Semaphore):
        await obj.release(await obj.acquire(timeout=5))
    else:
        assert isinstance(obj, fencing.aio.Limiter)
        await obj.try_acquire()


@pytest.mark.parametrize("kind", KINDS)
async def test_aclose_closes_what_the_backend_opened_for_the_object(
    kind: str, request: pytest.FixtureRequest
) -> None:
    tag = f"aclose{uuid.uuid4().hex[:12]}"
    url, probe = _setup(kind, request, tag)
    backend = fencing.connect(url)
    name = f"aclose:{tag}"
    objs: list[Owner] = [
        backend.aio_fence(name, ttl=10),
        backend.aio_election(f"{name}:e", ttl=10),
    ]
    objs.append(backend.aio_semaphore(f"{name}:s", 2, 10))
    if not isinstance(backend, NoLimiter):  # etcd and ZooKeeper have no rate limiter
        objs.append(backend.aio_limiter(name, 5, 60))
    try:
        for obj in objs:
            await _use(obj)
        opened = await probe(objs)
        assert kind == "zookeeper" or opened >= len(objs), f"{opened} connections seen"
        for obj in objs:
            await obj.aclose()
        assert await _closed(probe, objs), "aclose left connections open"
        if kind == "zookeeper":  # its objects own nothing: the session is the backend's
            assert backend.client.connected  # type: ignore[attr-defined]
        for obj in objs:
            await obj.aclose()  # twice: nothing to do
        await _use(objs[0])  # used again: it reconnects
    finally:
        for obj in objs:
            await obj.aclose()
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    assert await _closed(probe, objs)


async def _closed(probe: Probe, objs: list[Owner]) -> bool:
    """Whether the probe sees no connection left, within a generous deadline (a server
    notices a closed socket in its own time)."""
    deadline = time.monotonic() + 30
    while await probe(objs) != 0:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_aclose_leaves_a_client_or_engine_passed_in_open(
    redis_server: RedisServer, pg_url: str
) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url)
    _create_tables(pg_url)
    engine: AsyncEngine = create_async_engine(pg_url)
    try:
        name = f"aclose:{uuid.uuid4().hex}"
        for fence in (fencing.aio.RedisFence(client, name), fencing.aio.SqlFence(engine, name)):
            await fence.release(await fence.acquire(timeout=5))
            await fence.aclose()
        assert await client.ping()
        assert engine.pool.checkedin() == 1  # type: ignore[attr-defined]
    finally:
        await client.aclose()
        await engine.dispose()


async def test_the_asyncio_issuers_old_close_warns_and_closes() -> None:
    issuer = fencing.aio.EtcdIssuer("etcd://127.0.0.1:1")  # no I/O: no channel opened yet
    with pytest.warns(DeprecationWarning, match=r"close\(\) is now aclose\(\)"):
        await issuer.close()
