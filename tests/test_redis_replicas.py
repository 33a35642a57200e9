"""``min_replicas``: a lease counts once enough replicas acknowledged it (WAIT).

On a real primary and replica (``SentinelGroup``; the Sentinels only watch here). The
replica is frozen to make it miss acknowledgements. The failover itself is in
test_redis_sentinel_failover.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
import redis.cluster
from slot_waiters import Counted, assert_woken, waited
from waiting import joined, wait_until

import fencing
import fencing.aio
from fencing.redis._flows import Probe, WaitFor
from fencing.redis._issuer import RedisIssuer
from fencing.redis._scripts import lease_key
from fencing.testing.servers import SentinelGroup, ServerError


@pytest.fixture(scope="module")
def sentinel_group() -> Iterator[SentinelGroup]:
    """One group for the module: nothing here fails it over (frozen replicas are thawed)."""
    try:
        group = SentinelGroup(down_after_ms=500).start()
    except ServerError as exc:
        pytest.fail(f"cannot start a test server: {exc}")
    yield group
    group.close()


@pytest.fixture
def primary(sentinel_group: SentinelGroup) -> Iterator[redis.Redis]:
    client = redis.Redis(port=sentinel_group.primary.port, socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
def replica(sentinel_group: SentinelGroup) -> Iterator[redis.Redis]:
    client = redis.Redis(port=sentinel_group.replica.port, socket_timeout=5)
    yield client
    client.close()


def test_an_acknowledged_lease_is_on_the_replica(
    primary: redis.Redis, replica: redis.Redis
) -> None:
    fence = fencing.RedisFence(primary, "replicated", ttl=30, min_replicas=1)
    token = fence.acquire(timeout=0)
    # WAIT returned: the replica has processed the acquire script's writes
    assert replica.get(lease_key("replicated")) is not None
    fence.renew(token)
    fence.release(token)
    assert primary.get(lease_key("replicated")) is None


def test_a_rwlocks_grants_are_acknowledged_or_given_back(
    sentinel_group: SentinelGroup, primary: redis.Redis, replica: redis.Redis
) -> None:
    """A read-write lock with ``min_replicas``: a read and a write lease are on the
    replica once granted; with the replica frozen a grant is ``NotReplicated`` and given
    back (the rest of the lock's contract runs on one Redis: test_contract_rwlocks.py)."""
    backend = fencing.connect(
        f"redis://127.0.0.1:{sentinel_group.primary.port}/0?min_replicas=1&replica_timeout=2"
    )
    rwlock = backend.rwlock("replicated-rw", ttl=30)
    state, readers = b"fencing:{replicated-rw}:rw", b"fencing:{replicated-rw}:rw:readers"
    read = rwlock.read.acquire(timeout=0)
    held = replica.zrange(readers, 0, -1, withscores=True)
    assert held and held == primary.zrange(readers, 0, -1, withscores=True)
    rwlock.read.release(read)
    written = rwlock.write.acquire(timeout=5)
    assert written > read
    assert replica.hgetall(state) == primary.hgetall(state) != {}
    rwlock.write.release(written)
    lonely = fencing.connect(
        f"redis://127.0.0.1:{sentinel_group.primary.port}/0?min_replicas=1&replica_timeout=0.2"
    ).rwlock("replicated-rw", ttl=30)
    sentinel_group.freeze_replica()
    try:
        with pytest.raises(fencing.NotReplicated):
            lonely.read.acquire(timeout=0)
    finally:
        sentinel_group.thaw_replica(rejoin=True)
    assert not primary.exists(readers)  # given back: nothing is held
    backend.close()


def test_too_few_acknowledgements_release_the_lease(
    sentinel_group: SentinelGroup, primary: redis.Redis
) -> None:
    fence = fencing.RedisFence(primary, "lonely", ttl=30, min_replicas=1, replica_timeout=0.2)
    sentinel_group.freeze_replica()
    try:
        with pytest.raises(fencing.NotReplicated) as caught:
            fence.acquire(timeout=0)
    finally:
        sentinel_group.thaw_replica(rejoin=True)
    error = caught.value
    assert isinstance(error, fencing.FenceUnavailable)
    assert (error.acks, error.wanted, error.name) == (0, 1, "lonely")
    assert "0 of 1 replicas" in str(error) and "released" in str(error)
    assert primary.get(lease_key("lonely")) is None  # released: nothing is held
    # the replica back: the next acquire counts, with a higher token (given the replica
    # as long as a busy machine may need to acknowledge)
    patient = fencing.RedisFence(primary, "lonely", ttl=30, min_replicas=1, replica_timeout=2)
    assert int(patient.acquire(timeout=5)) > error.token


def test_more_replicas_than_exist(primary: redis.Redis) -> None:
    fence = fencing.RedisFence(primary, "two", min_replicas=2, replica_timeout=0.1)
    with pytest.raises(fencing.NotReplicated, match="1 of 2 replicas"):
        fence.acquire(timeout=0)
    assert primary.get(lease_key("two")) is None


def test_an_unacknowledged_renewal_keeps_the_lease(
    sentinel_group: SentinelGroup, primary: redis.Redis
) -> None:
    fence = fencing.RedisFence(primary, "renewed", ttl=30, min_replicas=1, replica_timeout=2)
    token = fence.acquire(timeout=0)
    sentinel_group.freeze_replica()
    try:
        with pytest.raises(fencing.NotReplicated, match="primary only"):
            fence.renew(token, ttl=60)
    finally:
        sentinel_group.thaw_replica(rejoin=True)
    assert primary.pttl(lease_key("renewed")) > 30_000  # renewed on the primary
    fence.release(token)  # still this fence's lease


def test_a_handed_over_lease_waits_for_the_replicas(primary: redis.Redis) -> None:
    """The waiter's BLPOP takes the lease; its WAIT covers the releasing script's writes."""
    fence = fencing.RedisFence(primary, "handed", ttl=30, min_replicas=1)
    first = fence.acquire(timeout=0)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(int(fence.acquire(timeout=30))))
    waiter.start()
    wait_until(lambda: primary.exists(b"fencing:{handed}:queue"), "the waiter queues")
    fence.release(first)
    joined(waiter)
    assert got and got[0] > int(first)
    fence.release(got[0])


def test_a_semaphore_waiter_is_woken_through_wait(sentinel_group: SentinelGroup) -> None:
    """A refused slot take carries the release stream's id through WAIT's pipeline; the
    release of any slot wakes the waiter (counted as in test_redis_semaphore_wake.py; a
    client without socket_timeout, so nothing but the release ends its wait)."""
    client = redis.Redis(port=sentinel_group.primary.port)
    issuer = Counted(client, min_replicas=1)
    assert_woken(issuer, *waited(issuer))
    client.close()


def test_after_script_flush(primary: redis.Redis, replica: redis.Redis) -> None:
    """After ``SCRIPT FLUSH`` the acquire's and the release's scripts meet NOSCRIPT inside
    WAIT's pipeline: each is loaded and the pipeline sent again, and does its work once,
    acknowledged by the replica."""
    fence = fencing.RedisFence(primary, "flushed", ttl=30, min_replicas=1)
    before = fence.acquire(timeout=0)
    fence.release(before)
    primary.script_flush()
    token = fence.acquire(timeout=0)
    assert token > before
    held = fencing.RedisIssuer(primary).status("flushed")
    assert held.held and held.token == token, held
    assert replica.get(lease_key("flushed")) == primary.get(lease_key("flushed")) is not None
    primary.script_flush()
    fence.release(token)
    assert primary.get(lease_key("flushed")) is None
    assert replica.get(lease_key("flushed")) is None  # the release's WAIT covered it
    assert not fencing.RedisIssuer(primary).status("flushed").held


async def test_asyncio_fence(sentinel_group: SentinelGroup) -> None:
    client = redis.asyncio.Redis(port=sentinel_group.primary.port, socket_timeout=5)
    try:
        fence = fencing.aio.RedisFence(client, "async", min_replicas=1, replica_timeout=2)
        token = await fence.acquire(timeout=0)
        await fence.renew(token)
        await fence.release(token)
        sentinel_group.freeze_replica()
        try:
            with pytest.raises(fencing.NotReplicated):
                await fence.acquire(timeout=0)
        finally:
            sentinel_group.thaw_replica(rejoin=True)
        assert await client.get(lease_key("async")) is None
    finally:
        await client.aclose()


def test_debian_redis_has_no_waitaof(primary: redis.Redis) -> None:
    """Found, not assumed: 7.0 answers WAIT; 7.2 with the append-only file, WAITAOF."""
    probe = Probe()
    probe.perform(primary)
    assert probe.result is False  # Debian 12's 7.0.15
    assert Probe.waitaof({"redis_version": "7.2.4", "aof_enabled": 1})
    assert not Probe.waitaof({"redis_version": "7.2.4", "aof_enabled": 0})
    assert not Probe.waitaof({"redis_version": "7.0.15", "aof_enabled": 1})
    primary.acl_setuser(
        "no-info", enabled=True, nopass=True, categories=["+@all"], commands=["-info"], keys=["~*"]
    )
    port = primary.connection_pool.connection_kwargs["port"]
    limited = redis.Redis(port=port, username="no-info", password="x")
    try:
        probe.perform(limited)  # INFO refused: WAIT, not an error
        assert probe.result is False
    finally:
        limited.close()
        primary.acl_deluser("no-info")
    assert WaitFor(1, 500, aof=True).command() == ("WAITAOF", 0, 1, 500)
    assert WaitFor(1, 500, aof=True).acks([0, 1]) == 1
    assert WaitFor(2, 500, aof=False).command() == ("WAIT", 2, 500)


@pytest.mark.parametrize(
    ("value", "error"),
    [(True, TypeError), (1.0, TypeError), ("1", TypeError), (None, TypeError), (-1, ValueError)],
)
def test_bad_min_replicas(value: object, error: type[Exception]) -> None:
    client = redis.Redis(port=1)  # never connected: the check comes first
    with pytest.raises(error, match="min_replicas"):
        fencing.RedisFence(client, "x", min_replicas=value)  # type: ignore[arg-type]
    with pytest.raises(error, match="min_replicas"):
        fencing.aio.RedisFence(redis.asyncio.Redis(port=1), "x", min_replicas=value)  # type: ignore[arg-type]


def test_bad_replica_timeout() -> None:
    client = redis.Redis(port=1, socket_timeout=0.5)
    with pytest.raises(ValueError, match="shorter than the client's socket_timeout"):
        fencing.RedisFence(client, "x", min_replicas=1, replica_timeout=0.5)
    with pytest.raises(ValueError, match="replica_timeout"):
        fencing.RedisFence(client, "x", min_replicas=1, replica_timeout=0)
    with pytest.raises(TypeError, match="replica_timeout"):
        fencing.RedisFence(client, "x", min_replicas=1, replica_timeout="1")  # type: ignore[arg-type]
    # the default: 1 s, or half the socket timeout when that is shorter
    assert RedisIssuer(client, min_replicas=1).flows.replica_timeout == 0.25
    assert RedisIssuer(redis.Redis(port=1), min_replicas=1).flows.replica_timeout == 1.0


def test_a_cluster_client_cannot_wait() -> None:
    cluster = object.__new__(redis.cluster.RedisCluster)  # the type is what is checked
    with pytest.raises(TypeError, match="min_replicas needs a redis"):
        fencing.RedisFence(cluster, "x", min_replicas=1)
