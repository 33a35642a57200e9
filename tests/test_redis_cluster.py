"""Redis Cluster: the keys of a fence share the slot of its name (checked against the
server's CLUSTER KEYSLOT), the scripts touch one slot (every key of every script, for
names with awkward braces, on the session's real cluster), fences spread over the
masters, the hand-off BLPOPs on the right node, ``redis+cluster://`` URLs, and clients
of the wrong kind are refused at construction or named in the error.

The contracts run against the cluster in test_redis_cluster_contract.py; failover and
slot migration in test_redis_cluster_faults.py.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.crc
from hypothesis import given, settings
from hypothesis import strategies as st

import fencing
import fencing.aio
from fencing import FencedLock, FenceUnavailable, RedisFence, RedisMark
from fencing.redis._backend import RedisClusterBackend
from fencing.redis._clients import socket_timeout_of
from fencing.redis._scripts import RELEASE, fence_keys, hash_tag, key_prefix, key_slot
from fencing.testing.servers import RedisCluster

#: Names whose braces make Redis Cluster's hash-tag rule bite, and some that do not.
AWKWARD_NAMES = [
    "plain",
    "orders{eu}:7",  # the user's tag: the fence goes to the slot of "eu"
    "{orders}",  # a tag spanning the name: same slot as "orders", yet another fence
    "orders",
    "{}",  # empty tag: Redis hashes the whole name
    "x{}y{z}",  # first tag empty: the whole name, not "z"
    "}{",
    "a}b",
    "}",
    "{",
    "{a",
    "{{a}}",  # tag "{a"
    "a{b{c}d}",  # tag "b{c"
    "é{ü}∂",  # non-ASCII, tag "ü"
    "名前}",
    "💥{}💥",
]

SUFFIXES = ["lease", "counter", "queue", "waiting", "wake:0123abcd"]


def test_every_key_of_a_fence_is_in_the_slot_of_its_name(redis_cluster: RedisCluster) -> None:
    """What the server says, not our own CRC: CLUSTER KEYSLOT of each key == of the name."""
    for name in AWKWARD_NAMES:
        slot = redis_cluster.slot_of(name)
        assert key_slot(name) == slot, name
        for suffix in SUFFIXES:
            key = key_prefix(name) + suffix
            assert redis_cluster.slot_of(key) == slot, (name, key)


def test_a_users_hash_tag_is_kept() -> None:
    assert key_prefix("orders{eu}:7") == "fencing:{eu}:orders{eu}:7:"
    assert key_prefix("plain") == "fencing:{plain}:"  # unchanged since 0.1
    assert hash_tag("orders{eu}:7") == "eu"
    assert {key_slot(key_prefix(f"orders{{eu}}:{i}")) for i in range(20)} == {key_slot("eu")}


def test_distinct_names_never_share_keys() -> None:
    prefixes = [key_prefix(name) for name in AWKWARD_NAMES]
    assert len(set(prefixes)) == len(prefixes)


#: A name that cannot be its own tag costs a search the first time (milliseconds).
no_deadline = settings(deadline=None)


@no_deadline
@given(st.text(alphabet="ab{}:é💥", min_size=1, max_size=10))
def test_slot_of_the_prefix_is_the_slot_of_the_name(name: str) -> None:
    """Against redis-py's own slot function, an implementation independent of ours."""
    slot = redis.crc.key_slot(name.encode())
    assert key_slot(name) == slot
    assert redis.crc.key_slot(fence_keys(name).lease) == slot
    assert "}" not in name or key_prefix(name).count("}") >= 2  # never a plain name's prefix


@no_deadline
@given(st.text(alphabet="ab{}", min_size=1, max_size=6), st.text(alphabet="ab{}", max_size=6))
def test_prefixes_are_distinct_for_distinct_names(first: str, second: str) -> None:
    if first != second and second:
        assert key_prefix(first) != key_prefix(second)


def test_every_slot_has_a_hexadecimal_twin_below_the_documented_bound() -> None:
    """``_slot_twin`` searches hexadecimal numbers: each of the 16384 slots has one below
    0x4cd71, so the search for a name that cannot be its own tag always ends soon."""
    seen: set[int] = set()
    for number in range(0x4CD71):
        seen.add(key_slot(f"{number:x}"))
    assert len(seen) == 16384


def test_scripts_touch_one_slot_for_awkward_names(
    cluster_client: redis.cluster.RedisCluster,
) -> None:
    """Acquire, a queued busy attempt, hand-off on release, renew and release touch every
    key a script may touch, for every awkward name: a key outside the slot would fail
    the script (CROSSSLOT or "non local key")."""
    suffix = uuid.uuid4().hex[:6]
    for base in AWKWARD_NAMES:
        name = base + suffix
        holder = RedisFence(cluster_client, name, ttl=30)
        waiter = RedisFence(cluster_client, name, ttl=30)
        token = holder.acquire()
        with pytest.raises(fencing.AcquireTimeout):
            waiter.acquire(timeout=0.05)  # queued, then left the queue
        holder.renew(token)  # LeaseLost if its script missed the lease
        holder.release(token)
        handed = waiter.acquire(timeout=0)
        assert handed > token
        waiter.release(handed)


def test_fences_spread_over_the_masters(
    redis_cluster: RedisCluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    """Each lease lives on the master serving its name's slot; 30 names reach all three."""
    fences = [RedisFence(cluster_client, f"spread:{i}:{uuid.uuid4().hex}", 30) for i in range(30)]
    tokens = [fence.acquire() for fence in fences]
    holders = set()
    for fence in fences:
        master = redis_cluster.master_for(fence.name)
        assert master.call("EXISTS", fence_keys(fence.name).lease) == 1
        holders.add(master.port)
    assert holders == {master.port for master in redis_cluster.masters()}
    for fence, token in zip(fences, tokens, strict=True):
        fence.release(token)


def test_a_users_tag_colocates_fences(
    redis_cluster: RedisCluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    tag = uuid.uuid4().hex
    fences = [RedisFence(cluster_client, f"orders{{{tag}}}:{i}", 30) for i in range(5)]
    tokens = [fence.acquire() for fence in fences]
    master = redis_cluster.master_for(tag)
    assert all(master.call("EXISTS", fence_keys(f.name).lease) == 1 for f in fences)
    for fence, token in zip(fences, tokens, strict=True):
        fence.release(token)


def test_hand_off_on_cluster_queues_and_wakes_on_the_node_of_the_slot(
    redis_cluster: RedisCluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    name = f"handoff:{uuid.uuid4().hex}"
    holder = RedisFence(cluster_client, name, ttl=30)
    token = holder.acquire()
    got: list[fencing.FenceToken] = []

    def wait() -> None:
        client = redis_cluster.client()
        got.append(RedisFence(client, name, ttl=30).acquire(timeout=20))
        client.close()

    thread = threading.Thread(target=wait)
    thread.start()
    master = redis_cluster.master_for(name)
    queue = key_prefix(name) + "queue"
    deadline = time.monotonic() + 60  # a bound against a hang, not a speed check
    while master.call("LLEN", queue) != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert master.call("LLEN", queue) == 1, "the waiter never queued on its slot's master"
    master.call("SCRIPT", "LOAD", RELEASE.text)  # no NOSCRIPT retry in the count below
    places = master.call("HVALS", key_prefix(name) + "waiting")
    deadline = time.monotonic() + 60
    while master.call("HVALS", key_prefix(name) + "waiting") == places:
        assert time.monotonic() < deadline, "the waiter stopped renewing its place"
        time.sleep(0.005)  # until the waiter starts a new round: its next is 1 s away
    master.call("CONFIG", "RESETSTAT")
    holder.release(token)
    thread.join(20)
    assert not thread.is_alive() and len(got) == 1 and got[0] > token
    assert master.call("GET", fence_keys(name).lease).startswith(f"{int(got[0])}:")
    scripts = master.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert scripts == 1, f"{scripts} scripts: the waiter asked again instead of being woken"


def test_scripts_are_reloaded_on_every_master_after_a_flush(
    redis_cluster: RedisCluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    fence = RedisFence(cluster_client, f"flush:{uuid.uuid4().hex}", 30)
    first = fence.acquire()
    fence.release(first)
    for master in redis_cluster.masters():
        master.call("SCRIPT", "FLUSH")
    second = fence.acquire()
    fence.release(second)
    assert second > first


def test_fenced_lock_on_a_cluster_client(cluster_client: redis.cluster.RedisCluster) -> None:
    name = f"lock{{{uuid.uuid4().hex}}}:1"
    lock = cluster_client.lock(name, timeout=10, lock_class=FencedLock)
    assert lock.acquire(blocking=False)
    first = lock.fence_token
    assert first is not None and lock.owned()
    other = cluster_client.lock(name, timeout=10, lock_class=FencedLock)
    assert not other.acquire(blocking=False)
    lock.release()
    assert other.acquire(blocking=False)
    assert other.fence_token is not None and other.fence_token > first
    other.release()


def test_mark_on_a_cluster_client(cluster_client: redis.cluster.RedisCluster) -> None:
    mark = RedisMark(cluster_client, f"mark:{uuid.uuid4().hex}")
    guarded = fencing.guard(lambda: "ok", mark=mark)
    assert guarded(fencing.FenceToken(7, "r")) == "ok"
    with pytest.raises(fencing.StaleTokenError):
        guarded(fencing.FenceToken(6, "r"))
    assert mark.current == 7


# -- connect ---------------------------------------------------------------------------------


def test_connect_cluster_url_gives_cluster_fences(redis_cluster: RedisCluster) -> None:
    backend = fencing.connect(redis_cluster.url + "?socket_timeout=4")
    assert isinstance(backend, RedisClusterBackend)
    fence = backend.fence(f"url:{uuid.uuid4().hex}", ttl=5)
    assert isinstance(fence, RedisFence)
    client = fence.issuer.client  # type: ignore[attr-defined]
    assert isinstance(client, redis.cluster.RedisCluster)
    assert socket_timeout_of(client) == 4.0
    token = fence.acquire()
    fence.release(token)
    assert fence.acquire() > token
    client.close()


async def test_connect_cluster_url_gives_asyncio_cluster_fences(
    redis_cluster: RedisCluster,
) -> None:
    backend = fencing.connect(redis_cluster.url)
    name = f"url:{uuid.uuid4().hex}"
    sync_fence = backend.fence(name, ttl=5)
    fence = backend.aio_fence(name, ttl=5)
    client = fence.issuer.client  # type: ignore[attr-defined]
    assert isinstance(client, redis.asyncio.cluster.RedisCluster)
    held = sync_fence.acquire()
    with pytest.raises(fencing.AcquireTimeout):
        await fence.acquire(timeout=0)
    sync_fence.release(held)
    token = await fence.acquire(timeout=0)
    assert token > held
    await fence.release(token)
    await client.aclose()
    sync_fence.issuer.client.close()  # type: ignore[attr-defined]


def test_a_semaphore_a_limiter_and_a_rwlock_keep_their_keys_in_one_cluster_slot(
    redis_cluster: RedisCluster,
) -> None:
    """Every key of every slot of a semaphore (a permit held in each, and the release
    stream a waiter made), a limiter's keys of both windows, and a read-write lock's (two
    readers), are in one cluster slot, whatever master it is
    on; each refuses there what it must. The rest of their contracts run on one Redis
    (the same scripts: test_contract_semaphores.py, _limiters.py, _rwlocks.py)."""
    backend = fencing.connect(redis_cluster.url)
    client = backend.issuer.client  # type: ignore[attr-defined]
    name = f"bounded:{uuid.uuid4().hex}"
    semaphore = backend.semaphore(name, permits=4, ttl=30)
    permits = [semaphore.acquire(timeout=0) for _ in range(4)]
    with pytest.raises(fencing.AcquireTimeout):
        semaphore.acquire(timeout=0.01)  # a waiter: its refused take makes the stream
    for window in ("sliding", "fixed"):
        limiter = backend.limiter(name, 1, 30, window)
        assert limiter.try_acquire() and not limiter.try_acquire()
    rwlock = backend.rwlock(name, ttl=30)
    reads = [rwlock.read.acquire(timeout=0) for _ in range(2)]
    assert int(reads[0]) == int(reads[1])  # one read epoch
    with pytest.raises(fencing.AcquireTimeout):
        rwlock.write.acquire(timeout=0)  # readers hold it
    keys = list(client.scan_iter(match=f"*{name}*", target_nodes=client.ALL_NODES))
    assert len(keys) >= 4 + 2 + 1, keys
    assert any(key.endswith(b":released") for key in keys), keys  # the semaphore's stream
    assert any(key.endswith(b":rw:readers") for key in keys), keys  # the read-write lock's
    assert len({client.keyslot(key) for key in keys}) == 1, keys
    for permit in permits:
        semaphore.release(permit)
    for read in reads:
        rwlock.read.release(read)
    written = rwlock.write.acquire(timeout=10)
    assert int(written) > int(reads[0])
    rwlock.write.release(written)
    client.close()


def test_connect_cluster_url_with_one_live_node_among_dead_ones(
    redis_cluster: RedisCluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    """The hosts are startup nodes: one that answers is enough. The client learns the
    whole cluster from it, and its lease is the cluster's (another client sees it)."""
    live = redis_cluster.nodes[0]
    url = f"redis+cluster://127.0.0.1:1,{live.address}/0"
    name = f"url:{uuid.uuid4().hex}"
    fence = fencing.connect(url).fence(name, ttl=5)
    client = fence.issuer.client  # type: ignore[attr-defined]
    token = fence.acquire(timeout=0)
    found = {node.port for node in client.get_primaries()}
    assert found == {node.port for node in redis_cluster.masters()}, found
    seen = fencing.RedisIssuer(cluster_client).status(name)
    assert seen.held and seen.token == token, seen
    fence.release(token)
    client.close()


@pytest.mark.parametrize(
    "url",
    ["redis+cluster://", "redis+cluster://host", "redis+cluster://h:1,h2", "redis+cluster://:1"],
)
def test_bad_cluster_urls_are_refused_at_connect(url: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        fencing.connect(url)


def test_cluster_url_keeps_auth_tls_and_options() -> None:
    backend = RedisClusterBackend("rediss+cluster://u:p%40ss@h1:7000,[::1]:7001/0?socket_timeout=2")
    assert backend._hosts == [("h1", 7000), ("::1", 7001)]
    assert backend._client_options == {
        "username": "u", "password": "p@ss", "socket_timeout": 2.0, "ssl": True
    }  # fmt: skip
    with pytest.raises(ValueError, match="database 0 only"):
        fencing.connect("redis+cluster://h1:7000/1")
    with pytest.raises(ValueError, match="min_replicas needs one primary"):
        fencing.connect("redis+cluster://h1:7000?min_replicas=1")


# -- clients of the wrong kind ---------------------------------------------------------------


def test_clients_of_the_other_kind_are_refused_at_construction(
    redis_cluster: RedisCluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    async_cluster = redis_cluster.async_client()
    with pytest.raises(TypeError, match=r"fencing\.aio\.RedisFence"):
        RedisFence(async_cluster, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"use fencing\.RedisFence"):
        fencing.aio.RedisFence(cluster_client, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RedisCluster"):
        RedisMark(async_cluster, "k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"redis\.cluster\.RedisCluster"):
        RedisFence(redis_cluster.url, "x")  # type: ignore[arg-type]


def test_a_standalone_client_on_a_cluster_node_is_told_to_use_a_cluster_client(
    redis_cluster: RedisCluster,
) -> None:
    """A plain ``redis.Redis`` on a cluster node works for the slots that node serves and
    names the fix for the others; the redirection is the cause, nothing is left behind."""
    node = redis_cluster.masters()[0]
    elsewhere = next(
        f"moved:{i}" for i in range(1000) if redis_cluster.master_for(f"moved:{i}") is not node
    )
    client = redis.Redis(port=node.port)
    with pytest.raises(FenceUnavailable, match="Redis Cluster node") as caught:
        RedisFence(client, elsewhere).acquire(timeout=0)
    assert isinstance(caught.value.__cause__, redis.exceptions.MovedError)
    with pytest.raises(FenceUnavailable, match="Redis Cluster node"):
        RedisMark(client, elsewhere).current  # noqa: B018
    client.close()
    master = redis_cluster.master_for(elsewhere)
    assert master.call("EXISTS", fence_keys(elsewhere).lease) == 0


def test_only_a_migrating_slots_refusal_is_tolerated_by_the_scripts(
    redis_client: redis.Redis,
) -> None:
    """The scripts do without a key only when a migrating slot's source refuses it
    ("non local key"); any other error on a derived key still fails the call."""
    holder = RedisFence(redis_client, "wrongtype", ttl=10)
    token = holder.acquire()
    redis_client.set(key_prefix("wrongtype") + "waiting", "not a hash")
    with pytest.raises(FenceUnavailable, match="WRONGTYPE"):
        RedisFence(redis_client, "wrongtype", ttl=10).acquire(timeout=0.05)
    holder.release(token)


def test_names_lists_awkward_names_by_their_keys(
    cluster_client: redis.cluster.RedisCluster,
) -> None:
    """``fencing list`` reads names back from the keys, in every form of key prefix."""
    prefix = f"list{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}{base}" for base in AWKWARD_NAMES]
    fences = [RedisFence(cluster_client, name, ttl=30) for name in names]
    tokens = [fence.acquire(timeout=0) for fence in fences]
    issuer = fences[0].issuer
    assert isinstance(issuer, fencing.RedisIssuer)
    assert sorted(issuer.names(prefix)) == sorted(names)
    assert sorted(issuer.names(prefix + "orders")) == sorted(
        name for name in names if name.startswith(prefix + "orders")
    )
    for name in names:
        assert issuer.status(name).held
    for fence, token in zip(fences, tokens, strict=True):
        fence.release(token)


def test_the_command_line_reaches_the_cluster_of_a_cluster_url(
    redis_cluster: RedisCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fencing status --url redis+cluster://...`` reads a lease on whatever master it is
    on. What status, list (SCAN on every master) and force-release promise is
    ``OperationsContract``'s (test_redis_cluster_contract.py)."""
    from fencing import cli

    backend = fencing.connect(redis_cluster.url)
    fence = backend.fence(f"ops:{uuid.uuid4().hex}", ttl=30)
    token = fence.acquire(timeout=0)
    capsys.readouterr()
    assert cli.main(["status", "--json", "--url", redis_cluster.url, fence.name]) == 0
    assert json.loads(capsys.readouterr().out)["token"] == token
    fence.release(token)
    backend.issuer.client.close()  # type: ignore[attr-defined]
