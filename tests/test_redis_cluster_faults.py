"""Redis Cluster under faults, on the session's real cluster: a failover that lost the
last increments, and a slot migrated while its lease is held.

The failover (the way DESIGN.md describes it): the replica of the master serving a
fence's slot is frozen (SIGSTOP) and its link cut (``CLIENT KILL TYPE replica``), tokens
are issued on the master, the master is SIGKILLed, the replica thawed and promoted
(``CLUSTER FAILOVER TAKEOVER``). Every token after the failover must exceed every token
before it; an INCR-only counter in the same slot (what Redisson's ``RFencedLock`` does)
must go back, which shows the increments really were lost, so the test can fail.

Each test heals the cluster before it returns (the killed node rejoins as a replica),
so the other tests of the session find it whole.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

import fencing
from fencing import FenceUnavailable, RedisFence
from fencing.redis._scripts import fence_keys, key_prefix
from fencing.testing.servers import RedisCluster, RedisClusterNode

ROUNDS = 3


@pytest.fixture
def healed(redis_cluster: RedisCluster) -> Iterator[RedisCluster]:
    """The session's cluster, made whole again after the test, whatever it did."""
    yield redis_cluster
    redis_cluster.heal()


class Issuing:
    """A fence and its INCR-only control counter on one cluster client, and what they
    issued: ``tokens`` from the fence, ``counts`` from the control."""

    def __init__(self, client: redis.cluster.RedisCluster, name: str) -> None:
        self.client = client
        self.fence = RedisFence(client, name, ttl=30)
        self.control = key_prefix(name) + "control"  # in the fence's slot, on its master
        self.tokens: list[int] = []
        self.counts: list[int] = []

    def issue(self, rounds: int = ROUNDS) -> None:
        for _ in range(rounds):
            token = self.fence.acquire(timeout=0)
            self.fence.release(token)
            self.tokens.append(token)
            self.counts.append(int(self.client.incr(self.control)))


@pytest.mark.parametrize("automatic", [False, True], ids=["takeover", "automatic"])
def test_tokens_after_a_failover_that_lost_increments_exceed_all_before(
    healed: RedisCluster, automatic: bool
) -> None:
    """``takeover``: the test promotes the replica (``CLUSTER FAILOVER TAKEOVER``);
    ``automatic``: the cluster does, once the others flag the dead master (the node
    timeout, 5 s, and an election)."""
    cluster = healed
    name = f"failover:{uuid.uuid4().hex}"
    master = cluster.master_for(name)
    replica = cluster.replicas_of(master)[0]
    before = Issuing(cluster.client(retry=Retry(NoBackoff(), 1)), name)

    before.issue()
    assert master.call("WAIT", 1, 5000) == 1  # the replica has these
    replica.freeze()
    assert cluster.cut_replication(master) == 1
    before.issue()  # these reach the master only
    master.kill()
    with pytest.raises(FenceUnavailable):  # no master for the slot: an error, not a hang
        before.fence.acquire(timeout=0)
    before.client.close()
    replica.thaw()
    cluster.failover(replica, automatic=automatic)
    assert cluster.master_for(name) is replica

    after = Issuing(cluster.client(), name)
    after.issue()
    after.client.close()

    assert after.counts[0] <= max(before.counts), (
        f"the control counter did not go back ({before.counts} then {after.counts}): "
        "the failover lost nothing, so it proves nothing"
    )
    assert min(after.tokens) > max(before.tokens), (before.tokens, after.tokens)
    assert after.tokens == sorted(set(after.tokens))


@pytest.mark.parametrize("stage", ["migrating", "moved", "done"])
def test_a_slot_migrates_while_its_lease_is_held(
    healed: RedisCluster, cluster_client: redis.cluster.RedisCluster, stage: str
) -> None:
    """The lease is renewed at every step of the migration (importing/migrating set, keys
    moved, slot reassigned) and released at ``stage``; a waiter queued before the
    migration began gets the lease with a higher token, and so does a later acquire."""
    cluster = healed
    name = f"migrate:{uuid.uuid4().hex}"
    slot = cluster.slot_of(name)
    source = cluster.master_of_slot(slot)
    target = next(master for master in cluster.masters() if master is not source)
    holder = RedisFence(cluster_client, name, ttl=30)
    token = holder.acquire()
    handed: list[fencing.FenceToken] = []
    waiter = threading.Thread(target=_wait_for, args=(cluster, name, handed))
    waiter.start()
    _until_queued(source, name)

    steps: dict[str, Callable[[], object]] = {
        "migrating": lambda: cluster.begin_migration(slot, target),
        "moved": lambda: cluster.move_keys(slot, target),
        "done": lambda: cluster.end_migration(slot, target),
    }
    held = True
    for step, run in steps.items():
        run()
        if not held:
            continue
        holder.renew(token)  # LeaseLost if the script missed the lease
        with pytest.raises(fencing.AcquireTimeout):  # busy, wherever the keys are now
            RedisFence(cluster_client, name).acquire(timeout=0)
        if step == stage:
            holder.release(token)
            held = False
            waiter.join(30)
            assert not waiter.is_alive() and len(handed) == 1 and handed[0] > token
    later = RedisFence(cluster_client, name, ttl=30)
    last = later.acquire(timeout=0)  # the waiter released: free, on the target now
    assert last > handed[0]
    assert target.call("EXISTS", fence_keys(name).lease) == 1
    assert source.call("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    later.release(last)


def _wait_for(cluster: RedisCluster, name: str, handed: list[fencing.FenceToken]) -> None:
    """Block on the fence until handed the lease, then release it (a short socket
    timeout: a wake-up lost in the migration is retried soon)."""
    client = cluster.client(socket_timeout=1)
    fence = RedisFence(client, name, ttl=30)
    token = fence.acquire(timeout=30)
    handed.append(token)
    fence.release(token)
    client.close()


def _until_queued(master: RedisClusterNode, name: str) -> None:
    queue = key_prefix(name) + "queue"
    deadline = time.monotonic() + 60  # a bound against a hang, not a speed check
    while master.call("LLEN", queue) != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert master.call("LLEN", queue) == 1, "the waiter never queued"


@pytest.mark.parametrize("replicated", [True, False], ids=["lease-replicated", "lease-lost"])
def test_a_hold_follows_a_failover_or_reports_its_lease_lost(
    healed: RedisCluster, replicated: bool
) -> None:
    """``hold()``'s renewer rides out the failover of its slot's master: when the replica
    had the lease it keeps renewing it on the new master; when the failover lost the
    lease, the hold says so (``lost``, then ``LeaseLost`` on leaving)."""
    cluster = healed
    name = f"hold:{uuid.uuid4().hex}"
    master = cluster.master_for(name)
    replica = cluster.replicas_of(master)[0]
    lease = fence_keys(name).lease
    client = cluster.client(socket_timeout=1, retry=Retry(NoBackoff(), 1))
    # renewed every 3.3 s: the lease outlives the failover and the client's rediscovery of
    # the slot's master on a loaded machine
    fence = RedisFence(client, name, ttl=10)
    hold = fence.hold()
    if not replicated:  # the lease will be granted after the replica's link is cut
        replica.freeze()
        assert cluster.cut_replication(master) == 1
    try:
        with hold as token:
            if replicated:
                assert master.call("WAIT", 1, 5000) == 1
            master.kill()
            replica.thaw()
            cluster.failover(replica)
            if replicated:
                left = replica.call("PTTL", lease)
                _until(lambda: replica.call("PTTL", lease) > left, "a renewal on the new master")
                assert not hold.lost
            else:
                _until(lambda: hold.lost, "the hold to find its lease lost")
    except fencing.LeaseLost:
        assert not replicated, "the replicated lease was reported lost"
    else:
        assert replicated, "leaving a hold whose lease was lost raised nothing"
    later = RedisFence(client, name, ttl=5)
    after = later.acquire(timeout=5)
    assert after > token
    later.release(after)
    client.close()


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60  # a bound against a hang, not a speed check
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_fenced_lock_keeps_working_while_its_slot_migrates(
    healed: RedisCluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    """A ``FencedLock``'s lease is its own key (``name``), its counter and queue under
    ``key_prefix(name)``: one slot, and only the lock key declared, so no step of the
    migration makes Redis refuse its scripts (TRYAGAIN) for a key still to come."""
    cluster = healed
    name = f"lockmig:{uuid.uuid4().hex}"
    slot = cluster.slot_of(name)
    source = cluster.master_of_slot(slot)
    target = next(master for master in cluster.masters() if master is not source)
    lock = cluster_client.lock(name, timeout=30, lock_class=fencing.FencedLock)
    other = cluster_client.lock(name, timeout=30, lock_class=fencing.FencedLock, sleep=0.1)
    assert lock.acquire(blocking=False)
    first = lock.fence_token
    assert first is not None
    cluster.begin_migration(slot, target)
    assert lock.extend(5)
    assert not other.acquire(blocking_timeout=0.2)  # queues (or polls), then gives up
    cluster.move_keys(slot, target)
    assert lock.extend(5)
    lock.release()  # at the target, by ASK
    assert other.acquire(blocking=False)
    cluster.end_migration(slot, target)
    assert other.fence_token is not None and other.fence_token > first
    other.release()
