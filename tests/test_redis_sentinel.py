"""``fencing.connect("redis+sentinel://...")``: the URL, the issuer contract through
Sentinel (blocking and asyncio, with ``min_replicas=1``), the semaphore contract (also
with ``min_replicas=1``: a slot take, refused or not, goes through WAIT's pipeline), and
an unknown service. The read-write lock and the limiter run the scripts the Redis
contracts run, on the client these fences use; the read-write lock's WAIT is in
test_redis_replicas.py.

A failover through Sentinel is in test_redis_sentinel_failover.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import fencing
import fencing.aio
from fencing.redis._backend import RedisBackend, fence_options
from fencing.redis._issuer import AsyncRedisIssuer, RedisIssuer
from fencing.redis._sentinel import SentinelURL, parse_sentinel_url
from fencing.testing.contract import (
    AsyncFenceContract,
    ElectionContract,
    FenceContract,
    InteropContract,
    MakeAsyncFence,
    MakeElection,
    MakeFence,
    MakeSemaphore,
    SemaphoreContract,
)
from fencing.testing.servers import SentinelGroup, ServerError


@pytest.fixture(scope="module")
def stable_group() -> Iterator[SentinelGroup]:
    """One group for the module, never failed over."""
    try:
        group = SentinelGroup().start()
    except ServerError as exc:
        pytest.fail(f"cannot start a test server: {exc}")
    yield group
    group.close()


def client_of(fence: fencing.Fence | fencing.aio.Fence) -> Any:
    issuer = fence.issuer
    assert isinstance(issuer, (RedisIssuer, AsyncRedisIssuer))
    return issuer.client


class TestSentinelFence(FenceContract):
    """The contract through Sentinel, each lease acknowledged by the replica."""

    @pytest.fixture
    def make_fence(self, stable_group: SentinelGroup) -> Iterator[MakeFence]:
        backend = fencing.connect(stable_group.url + "?min_replicas=1")
        made: list[fencing.Fence] = []

        def make(name: str, ttl: float) -> fencing.Fence:
            made.append(backend.fence(name, ttl))
            return made[-1]

        yield make
        if made:
            client_of(made[0]).close()  # one client for all of the backend's fences


class TestAsyncSentinelFence(AsyncFenceContract):
    @pytest.fixture
    async def make_fence(self, stable_group: SentinelGroup) -> AsyncIterator[MakeAsyncFence]:
        backend = fencing.connect(stable_group.url + "?min_replicas=1")
        made: list[fencing.aio.Fence] = []

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            made.append(backend.aio_fence(name, ttl))
            return made[-1]

        yield make
        for fence in made:
            await fence.aclose()


class TestSentinelInterop(InteropContract):
    make_fence = TestSentinelFence.make_fence
    make_async_fence = TestAsyncSentinelFence.make_fence


class TestSentinelElection(ElectionContract):
    """Through the backend's own ``election``, each term acknowledged by the replica."""

    make_fence = TestSentinelFence.make_fence

    @pytest.fixture
    def make_election(self, stable_group: SentinelGroup) -> Iterator[MakeElection]:
        backend = fencing.connect(stable_group.url + "?min_replicas=1")
        yield backend.election
        backend.close()


class TestSentinelSemaphore(SemaphoreContract):
    @pytest.fixture
    def make_semaphore(self, stable_group: SentinelGroup) -> Iterator[MakeSemaphore]:
        backend = fencing.connect(stable_group.url + "?min_replicas=1")
        yield backend.semaphore
        backend.close()


def test_an_unknown_service_says_so(stable_group: SentinelGroup) -> None:
    hosts = ",".join(f"{h}:{p}" for h, p in stable_group.addresses)
    fence = fencing.connect(f"redis+sentinel://{hosts}/no-such-service").fence("x")
    with pytest.raises(fencing.FenceUnavailable, match="unknown service name") as caught:
        fence.acquire(timeout=0)
    assert "no-such-service" in str(caught.value)
    client_of(fence).close()


async def test_an_unknown_service_says_so_asyncio(stable_group: SentinelGroup) -> None:
    hosts = ",".join(f"{h}:{p}" for h, p in stable_group.addresses)
    fence = fencing.connect(f"redis+sentinel://{hosts}/nope").aio_fence("x")
    with pytest.raises(fencing.FenceUnavailable, match=r"unknown service name.*'nope'"):
        await fence.acquire(timeout=0)
    await fence.aclose()


def test_a_sentinel_and_a_direct_fence_share_leases(stable_group: SentinelGroup) -> None:
    import redis

    direct = redis.Redis(port=stable_group.primary.port)
    through = fencing.connect(stable_group.url).fence("shared", ttl=5)
    token = through.acquire(timeout=0)
    with pytest.raises(fencing.AcquireTimeout):
        fencing.RedisFence(direct, "shared").acquire(timeout=0)
    through.release(token)
    assert int(fencing.RedisFence(direct, "shared").acquire(timeout=0)) > int(token)
    direct.close()
    client_of(through).close()


# -- the URL (no I/O) --------------------------------------------------------------------


def test_url_grammar() -> None:
    url = parse_sentinel_url(
        "redis+sentinel://:s%40cret@a.example:26380,b.example,[::1]:5000/orders/3"
        "?socket_timeout=0.5&sentinel_password=watch&sentinel_username=eye"
    )
    assert url == SentinelURL(
        hosts=[("a.example", 26380), ("b.example", 26379), ("::1", 5000)],
        service="orders",
        db=3,
        password="s@cret",
        sentinel_username="eye",
        sentinel_password="watch",
        socket_timeout=0.5,
        socket_connect_timeout=0.5,
    )
    defaults = parse_sentinel_url("redis+sentinel://h/svc")
    assert (defaults.db, defaults.socket_timeout, defaults.username) == (0, 5.0, None)
    assert parse_sentinel_url("redis+sentinel://u:p@h/svc?db=2").db == 2
    assert parse_sentinel_url("redis+sentinel://u:p@h/svc").username == "u"


def test_tls_options() -> None:
    url = parse_sentinel_url(
        "rediss+sentinel://h/svc?ssl_cert_reqs=none&ssl_ca_certs=/ca.pem&ssl_check_hostname=false"
    )
    assert url.tls == {
        "ssl": True,
        "ssl_cert_reqs": "none",
        "ssl_ca_certs": "/ca.pem",
        "ssl_check_hostname": False,
    }
    assert url.connection()["ssl"] is True  # to the Sentinels and to the data nodes
    client = RedisBackend("rediss+sentinel://h/svc?ssl_cert_reqs=none").fence("x")
    kwargs = client_of(client).connection_pool.connection_kwargs
    assert kwargs["ssl_cert_reqs"] == "none" and kwargs["socket_timeout"] == 5.0


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://h:1", "path is /<service>"),
        ("redis+sentinel://h:1/svc/0/extra", "path is /<service>"),
        ("redis+sentinel:///svc", "at least one Sentinel host"),
        ("redis+sentinel://h:x/svc", "Sentinel port"),
        ("redis+sentinel://h/svc/zero", "db"),
        ("redis+sentinel://h/svc?socket_timeout=0", "socket_timeout"),
        ("redis+sentinel://h/svc?socket_timeout=soon", "socket_timeout"),
        ("redis+sentinel://h/svc?colour=blue", "unknown option"),
        ("redis+sentinel://h/svc?ssl_ca_certs=/x", "unknown option"),  # needs rediss+
        ("rediss+sentinel://h/svc?ssl_check_hostname=maybe", "ssl_check_hostname"),
        ("redis+sentinel://h/svc?min_replicas=one", "min_replicas"),
        ("redis+sentinel://h/svc?min_replicas=-1", "min_replicas"),
        ("redis://h/0?replica_timeout=-1", "replica_timeout"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fencing.connect(url)


def test_replication_options_in_any_redis_url() -> None:
    url, options = fence_options(
        "redis://h:1/2?socket_timeout=3&min_replicas=1&replica_timeout=0.5"
    )
    assert url == "redis://h:1/2?socket_timeout=3"
    assert options == {"min_replicas": 1, "replica_timeout": 0.5}
    assert fence_options("unix:///run/r.sock?min_replicas=1") == (
        "unix:///run/r.sock",
        {"min_replicas": 1},
    )
    assert fence_options("redis://h/0?db=1") == ("redis://h/0?db=1", {})
    fence = fencing.connect("redis://localhost:1/0?min_replicas=2").fence("x")
    issuer = fence.issuer
    assert isinstance(issuer, RedisIssuer) and issuer.flows.min_replicas == 2
    sentinel = fencing.connect("redis+sentinel://h/svc?min_replicas=1&replica_timeout=0.25")
    aio = sentinel.aio_fence("y").issuer
    assert isinstance(aio, AsyncRedisIssuer)
    assert (aio.flows.min_replicas, aio.flows.replica_timeout) == (1, 0.25)
