"""The etcd issuer beyond the contract, on the session's real 3-member cluster: URLs,
an unreachable or frozen cluster, names as keys, waiters woken by the watch, a lease
lost under ``hold()`` and the leader killed while a fence is held. A frozen holder
refused at a guard is the contract's (``StaleHolderContract``, test_etcd_contract.py).

The tests that kill or freeze a member give it back before they end, so the session's
cluster stays whole for the others.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from aetcd import rpc
from waiting import wait_until

import fencing
from fencing import (
    AcquireTimeout,
    FenceSetupError,
    FenceUnavailable,
    LeaseLost,
)
from fencing._lease.protocol import Waiting
from fencing.etcd import EtcdFence, EtcdIssuer, EtcdOptions, parse_etcd_url
from fencing.etcd._leases import Lease, LeasePool
from fencing.etcd._messages import MAX_LEASE_SECONDS
from fencing.etcd.aio import EtcdFence as AsyncEtcdFence
from fencing.issuer import AsyncWakesOnRelease, WakesOnRelease
from fencing.testing.contract._helpers import _waits_seen
from fencing.testing.servers import EtcdCluster, free_port

PATIENCE = 30.0


def fresh(what: str) -> str:
    return f"etcd-test:{what}:{uuid.uuid4().hex}"


@pytest.fixture
def issuer(etcd_cluster: EtcdCluster) -> Iterator[EtcdIssuer]:
    issuer = EtcdIssuer(etcd_cluster.url)
    yield issuer
    issuer.close()


def raw_kv(cluster: EtcdCluster) -> tuple[grpc.Channel, rpc.KVStub]:
    """A plain gRPC channel to the cluster, to look at or meddle with keys directly."""
    channel = grpc.insecure_channel(cluster.leader().endpoint)
    return channel, rpc.KVStub(channel)


# -- URLs --------------------------------------------------------------------------------------


def test_url_options_are_parsed() -> None:
    options = parse_etcd_url(
        "etcds://alice:s%40cret@h1:2379,h2:2380?timeout=2.5&prefix=app/&ca=/ca.pem"
        "&cert=/c.pem&key=/k.pem"
    )
    assert options == EtcdOptions(
        endpoints=("h1:2379", "h2:2380"),
        user="alice",
        password="s@cret",
        timeout=2.5,
        prefix="app/",
        tls=True,
        ca="/ca.pem",
        cert="/c.pem",
        key="/k.pem",
    )
    assert "s@cret" not in repr(options)
    assert parse_etcd_url("etcd://127.0.0.1:2379").tls is False


@pytest.mark.parametrize(
    "url",
    [
        "etcd://",
        "etcd://,",
        "etcd://h1",
        "etcd://h1:0",
        "etcd://h1:99999",
        "etcd://h1:2379/path",
        "etcd://h1:2379?colour=blue",
        "etcd://h1:2379?timeout=soon",
        "etcd://h1:2379?timeout=0",
        "etcd://h1:2379?timeout=nan",
        "etcd://h1:2379?tls=maybe",
        "etcd://h1:2379?ca=/ca.pem",
        "etcds://h1:2379?cert=/c.pem",
        "etcd://alice@h1:2379",
    ],
)
def test_bad_url_is_a_value_error_from_connect(url: str) -> None:
    with pytest.raises(ValueError):
        fencing.connect(url)


# -- an unreachable or frozen cluster ------------------------------------------------------------


def _raises_unavailable_in_time(url: str) -> None:
    """acquire on ``url`` raises FenceUnavailable, blocking and asyncio, and returns well
    within the patience (a limit against a hang, not a timing check)."""
    errors: list[BaseException] = []

    def blocking() -> None:
        try:
            EtcdFence(url, fresh("down"), ttl=5).acquire(timeout=0)
        except BaseException as exc:
            errors.append(exc)

    async def in_asyncio() -> None:
        try:
            await AsyncEtcdFence(url, fresh("down"), ttl=5).acquire(timeout=0)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=blocking, daemon=True)
    thread.start()
    thread.join(PATIENCE)
    assert not thread.is_alive(), "acquire on an unreachable cluster hung"
    asyncio.run(asyncio.wait_for(in_asyncio(), PATIENCE))
    assert len(errors) == 2 and all(isinstance(e, FenceUnavailable) for e in errors), errors
    assert all(isinstance(e.__cause__, grpc.RpcError) for e in errors), "cause not kept"


def test_unreachable_cluster_is_unavailable_within_the_timeout() -> None:
    _raises_unavailable_in_time(
        f"etcd://127.0.0.1:{free_port()},127.0.0.1:{free_port()}?timeout=0.5"
    )


def test_frozen_member_is_unavailable_within_the_timeout(etcd_cluster: EtcdCluster) -> None:
    """A member that answers nothing (SIGSTOP) is a timeout, not a hang."""
    member = etcd_cluster.members[0]
    etcd_cluster.freeze(member)
    try:
        _raises_unavailable_in_time(f"etcd://{member.endpoint}?timeout=0.5")
    finally:
        etcd_cluster.thaw(member)


# -- names and keys ------------------------------------------------------------------------------


def test_any_valid_name_is_its_own_key(issuer: EtcdIssuer, etcd_cluster: EtcdCluster) -> None:
    """Names with slashes, dots, spaces or any Unicode are encoded as they are: each one is
    its own key (no prefix matching), and ``a/..`` is not ``a``'s parent."""
    base = fresh("names")
    names = [base, f"{base}/", f"{base}/..", f"{base}/child", f"{base} é 鍵 ∞", f"{base}\n"]
    fences = [EtcdFence(issuer, name, ttl=5) for name in names]
    tokens = [fence.acquire(timeout=0) for fence in fences]  # none excludes another
    channel, kv = raw_kv(etcd_cluster)
    with channel:
        for name, token in zip(names, tokens, strict=True):
            reply = kv.Range(rpc.RangeRequest(key=f"fencing/{name}".encode()), timeout=5)
            assert [kv.create_revision for kv in reply.kvs] == [int(token)], name
    for fence, token in zip(fences, tokens, strict=True):
        fence.release(token)


# -- waiting -------------------------------------------------------------------------------------


def test_issuers_wake_waiters_instead_of_polling() -> None:
    assert issubclass(EtcdIssuer, WakesOnRelease)
    assert issubclass(fencing.etcd.aio.EtcdIssuer, AsyncWakesOnRelease)


def test_a_release_wakes_the_waiter_through_the_watch(issuer: EtcdIssuer) -> None:
    """The waiter blocks for up to a minute between attempts here, so it can only get the
    lease within the patience if the watch on the key wakes it at the release. Its watch
    starts from the revision its refused attempt saw, so a release after that refusal
    wakes it even before the watch is open: the release waits for the refusal (the
    fence's debug record), not for a while."""
    name = fresh("wake")
    holder, waiter = EtcdFence(issuer, name, ttl=30), EtcdFence(issuer, name, ttl=30)
    waiter._waiting = Waiting(False, True, waiter.clock.monotonic, max_block=60.0)
    token = holder.acquire(timeout=0)
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=120)), daemon=True)
    with _waits_seen(name) as waits:
        thread.start()
        assert waits.wait(PATIENCE), "the waiter never found the lease busy"
    holder.release(token)  # LeaseLost if the waiter had taken it meanwhile
    thread.join(PATIENCE)
    assert not thread.is_alive(), "the release did not wake the waiter"
    assert got and got[0] > token
    waiter.release(got[0])


# -- a lease lost under hold() -------------------------------------------------------------------


def test_a_lease_lost_during_hold_sets_the_lost_flag(
    issuer: EtcdIssuer, etcd_cluster: EtcdCluster
) -> None:
    """The key is deleted behind the holder's back (as an operator or a compaction of
    leases would): the next renewal finds the lease gone, the hold is lost, and leaving
    it raises ``LeaseLost``."""
    name = fresh("lost")
    fence = EtcdFence(issuer, name, ttl=1.5)
    hold = fence.hold()
    with pytest.raises(LeaseLost), hold:
        channel, kv = raw_kv(etcd_cluster)
        with channel:
            kv.DeleteRange(rpc.DeleteRangeRequest(key=f"fencing/{name}".encode()), timeout=5)
        deadline = time.monotonic() + PATIENCE
        while not hold.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hold.lost
    newer = EtcdFence(issuer, name, ttl=5).acquire(timeout=0)
    assert hold.token is not None and newer > hold.token


# -- the leader killed while a fence is held -----------------------------------------------------


def test_killing_the_leader_keeps_the_fence_working(etcd_cluster: EtcdCluster) -> None:
    """SIGKILL the leader while a lease is held and renewed: the fence goes on through the
    other two members; the lease survives or its hold says it is lost; every token after
    that is higher than every token before."""
    issuer = EtcdIssuer(etcd_cluster.url + "?timeout=10")
    name = fresh("leader")
    fence = EtcdFence(issuer, name, ttl=3)
    before = [int(fence.acquire(timeout=0))]
    fence.release(before[0])
    hold = fence.hold()
    killed = None
    try:
        with hold as token:
            before.append(int(token))
            killed = etcd_cluster.kill_leader()
            # at once, during the election: the calls fail over to the other members
            other = EtcdFence(issuer, fresh("elsewhere"), ttl=3)
            other.release(other.acquire(timeout=0))
            if not hold.lost:
                fence.renew(token)
        survived = True
    except LeaseLost:
        survived = False
        assert hold.lost
    finally:
        if killed is not None:
            etcd_cluster.restart(killed)
    after = []
    for _ in range(3):
        newer = fence.acquire(timeout=PATIENCE)
        after.append(int(newer))
        fence.release(newer)
    assert min(after) > max(before), f"tokens {after} after {before}"
    assert after == sorted(after) and len(set(after)) == 3
    print(f"lease {'survived' if survived else 'was reported lost'}; tokens {before} -> {after}")
    issuer.close()


# -- leases kept for the next acquire --------------------------------------------------------------


def _lease_of(cluster: EtcdCluster, name: str) -> int:
    channel, kv = raw_kv(cluster)
    with channel:
        reply = kv.Range(rpc.RangeRequest(key=f"fencing/{name}".encode()), timeout=5)
    return int(reply.kvs[0].lease)


def test_a_kept_lease_runs_its_full_ttl_again(
    issuer: EtcdIssuer, etcd_cluster: EtcdCluster
) -> None:
    """The lease a release leaves is used by the next acquire, which restarts its TTL: the
    next holder's lease has its whole TTL, not what was left of the old one."""
    name = fresh("kept")
    fence = EtcdFence(issuer, name, ttl=30)
    token = fence.acquire(timeout=0)
    lease = _lease_of(etcd_cluster, name)
    fence.release(token)

    def left() -> int:
        channel = grpc.insecure_channel(etcd_cluster.leader().endpoint)
        with channel:
            request = rpc.LeaseTimeToLiveRequest(ID=lease)
            return int(rpc.LeaseStub(channel).LeaseTimeToLive(request, timeout=5).TTL)

    # a few seconds gone (under half the TTL: it is used again)
    wait_until(lambda: left() <= 27, "the kept lease to run down", poll=0.2)
    before = left()
    newer = fence.acquire(timeout=0)
    assert _lease_of(etcd_cluster, name) == lease
    assert left() > before, "the reused lease did not start its TTL again"
    fence.release(newer)


def test_a_kept_lease_that_vanished_is_replaced(
    issuer: EtcdIssuer, etcd_cluster: EtcdCluster
) -> None:
    """A kept lease revoked behind the issuer's back: the next acquire grants a new one."""
    name = fresh("vanished")
    fence = EtcdFence(issuer, name, ttl=10)
    token = fence.acquire(timeout=0)
    lease = _lease_of(etcd_cluster, name)
    fence.release(token)
    channel = grpc.insecure_channel(etcd_cluster.leader().endpoint)
    with channel:
        rpc.LeaseStub(channel).LeaseRevoke(rpc.LeaseRevokeRequest(ID=lease), timeout=5)
    newer = fence.acquire(timeout=0)
    assert newer > token and _lease_of(etcd_cluster, name) != lease
    fence.release(newer)


def test_the_lease_pool_keeps_one_young_lease_per_name_and_ttl() -> None:
    now = [100.0]
    pool = LeasePool(lambda: now[0], capacity=2)
    assert pool.take("a", 10) == (None, None)
    first, second = Lease(1, 10, 100.0), Lease(2, 10, 100.0)
    assert pool.keep("a", first) and not pool.keep("a", second)  # one per name and TTL
    assert pool.keep("b", Lease(3, 4, 100.0)) and not pool.keep("c", Lease(4, 4, 100.0))  # full
    now[0] = 104.9
    assert pool.take("a", 10) == (first, None)  # younger than half its TTL: used
    assert pool.take("a", 10) == (None, None)  # and gone from the pool
    assert pool.take("b", 4) == (None, Lease(3, 4, 100.0))  # older: to be revoked
    pool.hold("a", 7, first)
    pool.kept_alive("a", 7, 1, 104.9)
    assert pool.released("a", 7, 99) is None  # not the lease the key was on
    pool.hold("a", 7, first)
    assert pool.released("a", 7, 1) == Lease(1, 10, 100.0)


# -- auth ------------------------------------------------------------------------------------------


def _refused(cluster: EtcdCluster, metadata: Any) -> bool:
    """True once etcd refuses the auth token in ``metadata`` (it expired)."""
    channel, kv = raw_kv(cluster)
    with channel:
        try:
            kv.Range(rpc.RangeRequest(key=b"fencing/"), timeout=5, metadata=metadata)
        except grpc.RpcError as exc:
            return bool(exc.code() == grpc.StatusCode.UNAUTHENTICATED)
    return False


def test_auth_from_the_url_and_a_new_token_when_it_expires() -> None:
    """A cluster with auth on (its tokens last 1 s): the URL's user and password get a
    token; once it expired, the issuer asks for a new one and goes on. No or wrong
    credentials are ``FenceUnavailable`` with etcd's reason; a user without a role on the
    prefix gets ``FenceSetupError`` saying what to grant, and once granted, it works."""
    with EtcdCluster(1, extra_args=("--auth-token-ttl", "1")) as cluster:
        cluster.etcdctl("user", "add", "root:s3cret")
        cluster.etcdctl("auth", "enable")
        url = cluster.url.replace("etcd://", "etcd://root:s3cret@")
        issuer = EtcdIssuer(url)
        fence = EtcdFence(issuer, fresh("auth"), ttl=10)
        token = fence.acquire(timeout=0)
        first = issuer.cluster.metadata
        # each use of a token keeps it another second: look less often than that
        wait_until(lambda: _refused(cluster, first), "etcd to expire the auth token", poll=2.5)
        fence.renew(token)
        fence.release(token)
        assert first is not None and issuer.cluster.metadata not in (None, first)
        issuer.close()
        for bad in (cluster.url, cluster.url.replace("etcd://", "etcd://root:wrong@")):
            with pytest.raises(FenceUnavailable, match="etcd failed: INVALID_ARGUMENT"):
                EtcdFence(bad, fresh("auth"), ttl=10).acquire(timeout=0)
        cluster.etcdctl("--user", "root:s3cret", "user", "add", "app:pw")  # no role yet
        app = EtcdFence(cluster.url.replace("etcd://", "etcd://app:pw@"), fresh("app"), ttl=10)
        with pytest.raises(FenceSetupError, match="grant-permission"):
            app.acquire(timeout=0)
        for command in (
            ("role", "add", "fences"),
            ("role", "grant-permission", "fences", "--prefix=true", "readwrite", "fencing/"),
            ("user", "grant-role", "app", "fences"),
        ):
            cluster.etcdctl("--user", "root:s3cret", *command)
        app.release(app.acquire(timeout=0))


# -- TLS -------------------------------------------------------------------------------------------


def test_tls_with_a_client_certificate() -> None:
    """A member that serves only TLS and wants client certificates: ``etcds://`` with the
    URL's ``ca``/``cert``/``key`` works, blocking and asyncio; plaintext, or TLS without
    the client certificate, is ``FenceUnavailable`` within the timeout."""
    with EtcdCluster(1, tls=True) as cluster:
        backend = fencing.connect(cluster.url)
        name = fresh("tls")
        fence = backend.fence(name, ttl=5)
        token = fence.acquire(timeout=0)

        async def from_asyncio() -> None:
            with pytest.raises(AcquireTimeout):
                await backend.aio_fence(name, ttl=5).acquire(timeout=0)

        asyncio.run(from_asyncio())
        fence.release(token)
        hosts, _, query = cluster.url.removeprefix("etcds://").partition("?")
        without_cert = query.partition("&cert=")[0]
        for url in (f"etcd://{hosts}?timeout=1", f"etcds://{hosts}?{without_cert}&timeout=1"):
            with pytest.raises(FenceUnavailable):
                EtcdFence(url, fresh("tls"), ttl=5).acquire(timeout=0)


# -- the extra -------------------------------------------------------------------------------------

_WITHOUT_GRPC = """
import sys
sys.modules["grpc"] = None  # as if fencing[etcd] were not installed
import fencing
fencing.connect("sqlite:///" + sys.argv[1])
try:
    fencing.connect("etcd://127.0.0.1:2379")
except ModuleNotFoundError as exc:
    print(exc)
"""


def test_import_fencing_needs_no_etcd_client(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_GRPC, str(tmp_path / "f.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "'etcd' extra" in result.stdout and "fencing[etcd]" in result.stdout


def test_a_frozen_member_is_passed_over(etcd_cluster: EtcdCluster) -> None:
    """The first member of the URL answers nothing (SIGSTOP, as a partition would look):
    each call gives it its share of the timeout, then goes on to the next member, so
    the fence keeps working, and once the member is back nothing is amiss."""
    member = etcd_cluster.members[0]
    issuer = EtcdIssuer(etcd_cluster.url + "?timeout=3")
    fence = EtcdFence(issuer, fresh("frozen"), ttl=5)
    etcd_cluster.freeze(member)
    try:
        token = fence.acquire(timeout=0)
        fence.renew(token)
        fence.release(token)
    finally:
        etcd_cluster.thaw(member)
    etcd_cluster.wait_until_serving()
    newer = fence.acquire(timeout=0)
    assert newer > token
    fence.release(newer)
    issuer.close()


# -- the operators' commands -----------------------------------------------------------------------


def test_the_command_line_reaches_the_cluster_of_an_etcd_url(
    etcd_cluster: EtcdCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fencing status --url etcd://...`` reads the lease on the cluster. What status,
    list and force-release promise is ``OperationsContract``'s (test_etcd_contract.py)."""
    from fencing import cli

    name = fresh("cli")
    fence = EtcdFence(etcd_cluster.url, name, ttl=30)
    token = fence.acquire(timeout=0)
    capsys.readouterr()
    assert cli.main(["status", "--url", etcd_cluster.url, name]) == 0
    out = capsys.readouterr().out
    assert "held by" in out and f"with token {int(token)}" in out, out
    fence.release(token)


def test_a_ttl_etcd_cannot_grant_is_refused_before_any_request(issuer: EtcdIssuer) -> None:
    """etcd's longest lease is 9e9 s; longer (up to fencing's own limit) is a ``ValueError``
    from the fence, and from ``renew``, with the lease as it was."""
    too_long = MAX_LEASE_SECONDS + 1
    with pytest.raises(ValueError, match="at most"):
        EtcdFence(issuer, fresh("long"), ttl=too_long)
    fence = EtcdFence(issuer, fresh("long"), ttl=MAX_LEASE_SECONDS)
    token = fence.acquire(timeout=0)
    with pytest.raises(ValueError, match="at most"):
        fence.renew(token, ttl=too_long)
    fence.renew(token)
    fence.release(token)


def test_grpc_aio_core_failure_is_retried_on_the_same_member_not_reported() -> None:
    """grpc.aio reports ``INTERNAL: Internal error from Core`` for a bidirectional call
    (a watch, a keep-alive) that the member ended while the client still wrote to it:
    a client-side race under load, not the member's answer. A watch ends quietly on it
    (the waiter looks again); any call is tried again on the same member. An
    ``INTERNAL`` the member sent is still a failure."""
    from fencing.etcd._cluster import Cluster
    from fencing.etcd._issuer import _ran_out

    def error(details: str) -> grpc.aio.AioRpcError:
        empty = grpc.aio.Metadata()
        return grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, empty, empty, details)

    core, sent = error("Internal error from Core"), error("etcdserver: corrupt cluster")
    assert _ran_out(core) and not _ran_out(sent)
    cluster = Cluster(parse_etcd_url("etcd://127.0.0.1:1,127.0.0.1:2"))
    far = time.monotonic() + 60
    move, left = cluster._next_move(core, 0, far, False, False)
    assert move == "retry" and left > 0 and cluster.member()[0] == 0  # not skipped
    assert cluster._next_move(sent, 0, far, False, False) == ("fail", 0.0)
    spent = time.monotonic() - 60  # a deadline long past: nothing left to retry in
    assert cluster._next_move(core, 0, spent, False, False) == ("fail", 0.0)
    cluster.close()


def test_a_read_write_locks_keys_are_not_listed_as_fences(issuer: EtcdIssuer) -> None:
    """A read-write lock's keys are the lock's name with a NUL and more (no fence name
    holds one): ``names`` lists the fence of that name, never them."""
    name = f"listed-{uuid.uuid4().hex}"
    rw = fencing.RWLock(issuer, name, ttl=30)
    read, write = rw.read.acquire(timeout=0), fencing.RWLock(issuer, f"{name}-w", ttl=30)
    token = write.write.acquire(timeout=0)
    fence = EtcdFence(issuer, name, 30)
    held = fence.acquire(timeout=0)
    try:
        assert list(issuer.names(name)) == [name]  # not "name\0r/...", nor "name-w\0w"
        assert issuer.rw_status(name).holders, "the lock's reader is not live"
    finally:
        fence.release(held)
        rw.read.release(read)
        write.write.release(token)
