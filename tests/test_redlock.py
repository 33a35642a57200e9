"""Redlock with fence tokens (``fencing.redis.RedlockFence``) on real ``redis-server``
processes: the issuer contract on module-wide masters (blocking on three and on five,
asyncio and operations on five), and on nodes of their own the faults: a minority
killed (acquire still works), a majority down (``FenceUnavailable``, nothing left
held), nodes killed or restarted between an acquire's two rounds, nodes restarted empty
(tokens still strictly increasing, by the quorum and not by the clock), a frozen node;
bad input (fewer than three clients, one server twice, the wrong kind of client, not a
sequence), and ``redis+redlock://``.

Kleppmann's counterexample with real processes, and pottery's ``Redlock`` as the control,
is tests/test_redlock_kleppmann.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster
import test_rwlock_processes as frozen_rw
from redis.backoff import NoBackoff
from redis.retry import Retry
from rwlocks import ThroughBackend
from waiting import NEVER, PATIENCE, await_until, joined, wait_until, woken_only

import fencing
import fencing.aio
from fencing import FenceUnavailable, LeaseLost
from fencing._base.waits import JITTER
from fencing._connect import Backend
from fencing.redis import RedlockFence, RedlockIssuer
from fencing.redis._redlock_flows import Broadcast
from fencing.redis._redlock_rw_flows import RedlockRWFlows
from fencing.redis._redlock_rw_scripts import redlock_rw_keys
from fencing.redis._redlock_scripts import Grant, redlock_keys
from fencing.redis.aio import RedlockFence as AsyncRedlockFence
from fencing.redis.aio import RedlockIssuer as AsyncRedlockIssuer
from fencing.testing.contract import (
    AsyncFenceContract,
    FenceContract,
    InteropContract,
    MakeAsyncFence,
    MakeFence,
    OperationsContract,
)
from fencing.testing.servers import RedisServer, ServerError

NODES = 3


def _client(server: RedisServer) -> redis.Redis:
    """A client that reports a dead node at once (no retries) and a hung one in 2 s."""
    return redis.Redis(
        port=server.port, socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0)
    )


@pytest.fixture(scope="module")
def five_nodes() -> Iterator[list[RedisServer]]:
    """Five independent masters for this module's tests that never stop, freeze or kill
    one (those start their own, ``own_nodes``); the three-node tests use the first three
    (every test takes fence names of its own, so the two sizes never share a lease)."""
    servers: list[RedisServer] = []
    try:
        for _ in range(5):
            servers.append(RedisServer().start())
    except ServerError as exc:
        pytest.fail(f"cannot start a test server: {exc}")
    yield servers
    for server in servers:
        server.close()


@pytest.fixture
def nodes(five_nodes: list[RedisServer]) -> list[RedisServer]:
    """Three independent masters: the first three of the module's five."""
    return five_nodes[:NODES]


@pytest.fixture
def clients(nodes: list[RedisServer]) -> Iterator[list[redis.Redis]]:
    made = [_client(server) for server in nodes]
    yield made
    for client in made:
        client.close()


def _make_fences(servers: list[RedisServer]) -> Iterator[MakeFence]:
    """``make_fence`` for the blocking contracts: fences sharing one issuer on ``servers``."""
    clients = [_client(server) for server in servers]
    issuer = RedlockIssuer(clients)

    def make(name: str, ttl: float) -> fencing.Fence:
        return RedlockFence(clients, name, ttl, issuer=issuer)

    yield make
    issuer.close()
    for client in clients:
        client.close()


class TestRedlockFence(FenceContract):
    """The blocking contract on three masters."""

    @pytest.fixture
    def make_fence(self, nodes: list[RedisServer]) -> Iterator[MakeFence]:
        yield from _make_fences(nodes)


class TestRedlockRWLock(ThroughBackend):
    """Read-write locks on three masters through ``fencing.connect("redis+redlock://...")``,
    blocking and asyncio: the fence's quorum flows on the read-write scripts."""

    @pytest.fixture
    def backend(self, nodes: list[RedisServer]) -> Iterator[Backend]:
        hosts = ",".join(f"127.0.0.1:{server.port}" for server in nodes)
        backend = fencing.connect(f"redis+redlock://{hosts}?socket_timeout=2")
        yield backend
        backend.close()


@pytest.fixture
def url(nodes: list[RedisServer]) -> str:
    """``redis+redlock://`` over the three masters, for the frozen processes' tests."""
    return "redis+redlock://" + ",".join(f"127.0.0.1:{server.port}" for server in nodes)


# Readers and writers frozen past their leases (SIGSTOP), each with its control, on
# Redlock: tests/test_rwlock_processes.py's tests, run with this module's ``url``.
test_a_reader_frozen_past_its_lease_is_refused_once_a_writer_claimed = (
    frozen_rw.test_a_reader_frozen_past_its_lease_is_refused_once_a_writer_claimed
)
test_a_writer_frozen_past_its_lease_is_refused_once_a_reader_claimed = (
    frozen_rw.test_a_writer_frozen_past_its_lease_is_refused_once_a_reader_claimed
)


def _redlock_threads(since: set[threading.Thread]) -> set[threading.Thread]:
    return {
        thread
        for thread in threading.enumerate()
        if thread.name.startswith("fencing-redlock") and thread not in since
    }


def test_close_stops_the_threads_the_fence_made_and_only_those(
    clients: list[redis.Redis],
) -> None:
    """A ``RedlockFence`` made from clients starts an issuer's threads; ``close()`` ends
    them (twice is fine, the clients stay open, and the fence works again after it),
    while a fence given an issuer leaves that issuer's threads to their owner."""
    before = set(threading.enumerate())
    shared = RedlockIssuer(clients)
    other = RedlockFence((), "close:shared", 5, issuer=shared)
    other.release(other.acquire(timeout=0))
    shared_threads = _redlock_threads(before)
    own = RedlockFence(clients, "close:own", 5)
    own.release(own.acquire(timeout=0))
    made = _redlock_threads(before | shared_threads)
    assert shared_threads and made and all(thread.is_alive() for thread in made)  # the control
    own.close()
    own.close()
    wait_until(lambda: not any(thread.is_alive() for thread in made), "the fence's threads end")
    other.close()
    assert all(thread.is_alive() for thread in shared_threads), "it closed an issuer passed in"
    other.release(other.acquire(timeout=0))
    assert all(client.ping() for client in clients)
    own.release(own.acquire(timeout=0))  # new threads, closed again
    own.close()
    shared.close()


class OnFive:
    """Blocking fences on five masters (a majority of 3), for the operations and interop
    contracts; the fence contract runs blocking on three (``TestRedlockFence``) and
    asyncio on five (``TestAsyncRedlockFenceOnFive``): one flow code, both quorum sizes."""

    @pytest.fixture
    def make_fence(self, five_nodes: list[RedisServer]) -> Iterator[MakeFence]:
        yield from _make_fences(five_nodes)


class TestAsyncRedlockFenceOnFive(AsyncFenceContract):
    """The asyncio contract on five masters (its flows are the blocking fence's
    ``RedlockFlows``, which the blocking contract also runs on three)."""

    @pytest.fixture
    async def make_fence(self, five_nodes: list[RedisServer]) -> AsyncIterator[MakeAsyncFence]:
        clients = [redis.asyncio.Redis(port=server.port, socket_timeout=2) for server in five_nodes]
        issuer = AsyncRedlockIssuer(clients)

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return AsyncRedlockFence(clients, name, ttl, issuer=issuer)

        yield make
        for client in clients:
            await client.aclose()


class TestRedlockOperationsOnFive(OnFive, OperationsContract):
    """``fencing status``/``list``/``release --force`` on Redlock fences on five masters."""


class TestRedlockInteropOnFive(OnFive, InteropContract):
    """A blocking and an asyncio Redlock fence of one name on five masters."""

    make_async_fence = TestAsyncRedlockFenceOnFive.make_fence


# -- waiters woken by the release ---------------------------------------------------------------


def _blocked(nodes: list[RedisServer]) -> int:
    """How many clients are blocked (``BLPOP``) on the nodes."""
    total = 0
    for server in nodes:
        with redis.Redis(port=server.port) as client:
            total += int(client.info("clients")["blocked_clients"])
    return total


def test_a_waiter_is_woken_by_the_release(nodes: list[RedisServer]) -> None:
    """The holder's lease lasts 600 s and the waiter waits ``NEVER`` between attempts (its
    ``BLPOP`` is capped below a socket timeout longer still): served within ``PATIENCE``
    means woken by the release, which left a wake-up on every node."""
    clients = [redis.Redis(port=server.port, socket_timeout=2 * NEVER) for server in nodes]
    issuer = RedlockIssuer(clients)
    holder = RedlockFence(clients, "woken", ttl=600, issuer=issuer)
    waiter = RedlockFence(clients, "woken", ttl=30, issuer=issuer)
    woken_only(waiter)
    token = holder.acquire(timeout=0)
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=NEVER)))
    thread.daemon = True  # if it is never woken, it must not hold up the run's end
    thread.start()
    wait_until(lambda: _blocked(nodes) == 1, "the waiter blocked on a node's wake list")
    holder.release(token)
    joined(thread)
    assert got and got[0] > token
    waiter.release(got[0])
    issuer.close()
    for client in clients:
        client.close()


async def test_an_asyncio_waiter_is_woken_by_the_release(nodes: list[RedisServer]) -> None:
    """The asyncio twin of ``test_a_waiter_is_woken_by_the_release``."""
    clients = [redis.asyncio.Redis(port=server.port, socket_timeout=2 * NEVER) for server in nodes]
    issuer = AsyncRedlockIssuer(clients)
    holder = AsyncRedlockFence(clients, "awoken", ttl=600, issuer=issuer)
    waiter = AsyncRedlockFence(clients, "awoken", ttl=30, issuer=issuer)
    woken_only(waiter)
    token = await holder.acquire(timeout=0)
    task = asyncio.ensure_future(waiter.acquire(timeout=NEVER))

    async def blocked() -> bool:
        return await asyncio.to_thread(_blocked, nodes) == 1

    await await_until(blocked, "the waiter blocked on a node's wake list")
    await holder.release(token)
    got = await asyncio.wait_for(task, PATIENCE)
    assert got > token
    await waiter.release(got)
    for client in clients:
        await client.aclose()


def test_a_node_that_refuses_the_proposal_holds_the_same_lease(
    nodes: list[RedisServer], clients: list[redis.Redis]
) -> None:
    """One node's counter an hour ahead of the clocks: it grants the lease but refuses
    the proposed token, which the other two take (the token, in one round); it is then
    made the same lease (``"<token>:<holder>"``), so the release leaves nothing held
    there (a bare grant would outlive the release by its ttl)."""
    issuer = RedlockIssuer(clients)
    # A node slow to answer (a loaded machine) makes a commit round, which also moves the
    # other two counters an hour ahead: so each try is on a name of its own.
    for attempt in range(20):
        name = f"refused:{attempt}"
        fence = RedlockFence(clients, name, ttl=30, issuer=issuer)
        fence.release(fence.acquire(timeout=0))  # the issuer has seen every node
        ahead = max(_counters(nodes, name)) + 3600 * 10**6  # type: ignore[type-var,operator]
        clients[2].set(redlock_keys(name).counter, ahead)
        token = fence.acquire(timeout=0)
        if token < ahead:  # taken by the other two in one round: not node 2's candidate
            break
        fence.release(token)
    assert token < ahead, "the proposal was never taken in one round"
    held = [f"{int(token)}:".encode()] * NODES

    def leases() -> list[bytes]:
        values = [client.get(redlock_keys(name).lease) or b"" for client in clients]
        return [bytes(value)[: len(held[0])] for value in values]  # type: ignore[arg-type]

    wait_until(lambda: leases() == held, "the same lease on every node")
    fence.release(token)
    assert _lease_keys(nodes, name) == [0, 0, 0]
    issuer.close()


# -- faults, on nodes of their own ------------------------------------------------------------


def test_a_waiter_on_a_node_that_hangs_or_is_down_still_gets_the_lease(
    own_nodes: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiter blocks on node 0 (the random choice pinned), which is frozen, then
    down: it cannot be woken there, and gets the lease once the holder's short lease
    (never released) has expired, from the other two."""
    clients = [
        redis.Redis(port=server.port, socket_timeout=30, retry=Retry(NoBackoff(), 0))
        for server in own_nodes
    ]
    monkeypatch.setattr(JITTER, "randrange", lambda n: 0)
    issuer = RedlockIssuer(clients)
    holder = RedlockFence(clients, "hangs", ttl=0.5, issuer=issuer)
    waiter = RedlockFence(clients, "hangs", ttl=2, issuer=issuer)
    last = 0
    for fault in ("frozen", "down"):
        if fault == "frozen":
            own_nodes[0].freeze()
        else:
            own_nodes[0].thaw()
            own_nodes[0].stop()
        token = holder.acquire(timeout=PATIENCE)  # and never released: it expires
        got = waiter.acquire(timeout=PATIENCE)
        assert last < token < got
        waiter.release(got)
        last = got
    issuer.close()


@pytest.fixture
def own_nodes(redis_factory: Callable[..., RedisServer]) -> list[RedisServer]:
    return [redis_factory() for _ in range(NODES)]


def _lease_keys(servers: list[RedisServer], name: str) -> list[int]:
    """How many nodes still have a lease key for ``name`` (the live ones only)."""
    found = []
    for server in servers:
        if server.running:
            with redis.Redis(port=server.port) as client:
                found.append(client.exists(redlock_keys(name).lease))
    return found


def test_a_minority_down_and_a_majority_down(own_nodes: list[RedisServer]) -> None:
    clients = [_client(server) for server in own_nodes]
    fence = RedlockFence(clients, "faults", ttl=30)
    before = fence.acquire(timeout=0)
    fence.release(before)
    own_nodes[0].stop()  # a minority: the other two still make a majority
    token = fence.acquire(timeout=0)
    assert token > before
    fence.renew(token)
    fence.release(token)
    own_nodes[1].stop()  # a majority down: no lease, and nothing left held on the third
    with pytest.raises(FenceUnavailable, match="1 of 3 nodes answered"):
        fence.acquire(timeout=0)
    wait_until(lambda: _lease_keys(own_nodes, "faults") == [0], "the third node's grant given back")
    with pytest.raises(FenceUnavailable):
        fence.acquire(timeout=1)  # waiting does not turn it into a timeout
    wait_until(lambda: _lease_keys(own_nodes, "faults") == [0], "the third node's grant given back")


def test_renew_and_release_need_a_majority(own_nodes: list[RedisServer]) -> None:
    clients = [_client(server) for server in own_nodes]
    fence = RedlockFence(clients, "renewals", ttl=30)
    token = fence.acquire(timeout=0)
    for server in own_nodes[:2]:
        server.stop()
    with pytest.raises(FenceUnavailable):  # cannot tell whether it is still held
        fence.renew(token)
    with pytest.raises(FenceUnavailable):
        fence.release(token)
    for server in own_nodes[:2]:
        server.start()  # back empty: the lease is now on one node only
    with pytest.raises(LeaseLost):  # a majority answered: not this lease
        fence.renew(token)


def _counters(servers: list[RedisServer], name: str) -> list[int | None]:
    values = []
    for server in servers:
        with redis.Redis(port=server.port) as client:
            raw = client.get(redlock_keys(name).counter)
            values.append(None if raw is None else int(raw))
    return values


def test_a_node_restarted_empty_cannot_make_a_token_go_back(own_nodes: list[RedisServer]) -> None:
    """Counters far above every node's clock (as after a clock that ran an hour ahead),
    so only the quorum can keep the next token above them: each node in turn is
    restarted empty, a minority at a time, between acquisitions; the tokens keep
    increasing, and the restarted node is repaired by the next commit. The control:
    with a majority restarted empty, the token goes back (only the clock floor is left)."""
    name = "amnesia"
    clients = [_client(server) for server in own_nodes]
    fence = RedlockFence(clients, name, ttl=30)
    first = fence.acquire(timeout=0)
    fence.release(first)
    ahead = first + 3600 * 10**6  # an hour of microseconds
    for client in clients:
        client.set(redlock_keys(name).counter, ahead)
    tokens = [first]
    for node in [0, 1, 2, 0, 1]:
        own_nodes[node].stop()
        own_nodes[node].start()  # empty: no persistence
        token = fence.acquire(timeout=0)
        fence.release(token)
        tokens.append(token)
        assert token > ahead
        committed = [token] * NODES  # the commit repaired the restarted node
        wait_until(
            lambda c=committed: _counters(own_nodes, name) == c,  # type: ignore[misc]
            "every counter committed",
        )
    assert tokens == sorted(set(tokens))
    for node in (0, 1):  # the control: a majority forgets
        own_nodes[node].stop()
        own_nodes[node].start()
    own_nodes[2].freeze()  # and the one that remembers does not answer in time
    try:
        control = RedlockFence([*clients[:2], _client(own_nodes[2])], name, ttl=5)
        token = control.acquire(timeout=PATIENCE)
    finally:
        own_nodes[2].thaw()
    assert token < tokens[-1]  # the limit docs/redlock.md states: a majority lost its data


def _kill(*servers: RedisServer) -> None:
    """SIGKILL each (no shutdown of any kind), then reap it."""
    for server in servers:
        assert server.process is not None
        server.process.kill()
        server.stop()


def _after_round_one(
    issuer: RedlockIssuer, monkeypatch: pytest.MonkeyPatch
) -> list[Callable[[], None]]:
    """Faults to make right after an acquire's first round (one per acquire, in order
    of their adding): its replies are in, round 2 (if any) is not sent yet."""
    faults: list[Callable[[], None]] = []
    broadcast = issuer.port.broadcast

    def with_faults(step: Broadcast) -> None:
        broadcast(step)
        if step.fresh and faults:  # an acquire's first round is its only fresh step
            faults.pop(0)()

    monkeypatch.setattr(issuer.port, "broadcast", with_faults)
    return faults


def test_nodes_killed_or_restarted_in_the_middle_of_an_acquire(
    own_nodes: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faults made right after an acquire's first round. An issuer's first acquire has
    no proposal yet, so it takes two rounds: a node SIGKILLed between them, and the
    acquire completes on the other two. Then (a proposal taken in round 1) a node
    restarted empty right after it, its grant and counter forgotten: the next acquire
    is higher and repairs the empty nodes. A new issuer's first acquire again, with two
    nodes SIGKILLed between its rounds: a clean ``FenceUnavailable`` at the commit, and
    the third node's grant given back."""
    name = "mid-acquire"
    clients = [_client(server) for server in own_nodes]
    issuer = RedlockIssuer(clients)
    fence = RedlockFence(clients, name, ttl=30, issuer=issuer)
    faults = _after_round_one(issuer, monkeypatch)
    faults += [lambda: _kill(own_nodes[2]), own_nodes[0].restart]
    killed = fence.acquire(timeout=0)
    assert not own_nodes[2].running
    fence.release(killed)  # on the two left
    own_nodes[2].start()  # empty
    restarted = fence.acquire(timeout=0)
    assert not faults and restarted > killed
    fence.release(restarted)
    repaired = fence.acquire(timeout=0)
    assert repaired > restarted
    assert _counters(own_nodes, name) == [repaired] * NODES
    fence.release(repaired)
    issuer.close()
    issuer = RedlockIssuer(clients)
    _after_round_one(issuer, monkeypatch).append(lambda: _kill(*own_nodes[:2]))
    with pytest.raises(FenceUnavailable, match="1 of 3 nodes answered the commit"):
        RedlockFence(clients, name, ttl=30, issuer=issuer).acquire(timeout=PATIENCE)
    assert _lease_keys(own_nodes, name) == [0]  # the third node's grant was given back
    issuer.close()


def test_a_frozen_node_delays_nothing_and_gets_its_grant_back(
    own_nodes: list[RedisServer],
) -> None:
    """A frozen minority node: the acquire goes on without it (after a short grace),
    and the lease it grants once thawed is given back (or committed, then released)."""
    name = "frozen"
    clients = [
        redis.Redis(port=server.port, socket_timeout=30, retry=Retry(NoBackoff(), 0))
        for server in own_nodes
    ]
    fence = RedlockFence(clients, name, ttl=10)
    own_nodes[2].freeze()
    try:
        token = fence.acquire(timeout=0)
        fence.release(token)
    finally:
        own_nodes[2].thaw()
    wait_until(lambda: _lease_keys(own_nodes, name) == [0, 0, 0], "no lease left on any node")
    again = fence.acquire(timeout=0)
    assert again > token
    fence.release(again)


# -- bad input --------------------------------------------------------------------------------


def test_bad_clients_are_refused_before_any_io(nodes: list[RedisServer]) -> None:
    one, two, three = (redis.Redis(port=server.port) for server in nodes)
    same_server = redis.Redis(port=nodes[0].port)
    aclient = redis.asyncio.Redis(port=nodes[0].port)
    cluster = redis.cluster.RedisCluster.__new__(redis.cluster.RedisCluster)
    cases: list[tuple[object, type[Exception], str]] = [
        ([], ValueError, "at least 3 independent Redis masters, got 0"),
        ((), ValueError, "at least 3"),
        ([one], ValueError, "at least 3 .*got 1"),
        ([one, two], ValueError, "at least 3 .*got 2"),
        (one, TypeError, "sequence"),
        ("localhost:6379", TypeError, "sequence"),
        ({one, two, three}, TypeError, "sequence"),
        (iter([one, two, three]), TypeError, "sequence"),
        ([one, two, one], ValueError, "twice"),
        ([one, two, same_server], ValueError, "same server"),
        ([one, two, aclient], TypeError, r"fencing\.redis\.aio\.RedlockFence"),
        ([one, two, "redis://x"], TypeError, "must be a redis.Redis"),
        ([one, two, cluster], TypeError, "Redis Cluster"),
    ]
    for clients, error, message in cases:
        with pytest.raises(error, match=message):
            RedlockFence(clients, "bad")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"fencing\.redis\.RedlockFence"):
        AsyncRedlockFence([one, two, three], "bad")  # type: ignore[list-item]
    with pytest.raises(TypeError, match="Redis Cluster"):
        AsyncRedlockFence([aclient, cluster], "bad")  # type: ignore[list-item]
    good = [one, two, three]
    with pytest.raises(ValueError):
        RedlockFence(good, "bad", release_timeout=0)
    with pytest.raises(TypeError):
        RedlockFence(good, "bad", release_timeout=True)
    for bad_name, error in ((b"bytes", TypeError), ("", ValueError)):
        with pytest.raises(error):
            RedlockFence(good, bad_name)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RedlockFence(good, "bad", ttl=float("nan"))
    for client in good:
        assert client.keys("fencing:redlock:{bad}*") == []


def test_even_counts_take_a_strict_majority(
    own_nodes: list[RedisServer], redis_factory: Callable[..., RedisServer]
) -> None:
    """Four nodes: three must answer (a majority of 4 is 3), so two down stop it."""
    servers = [*own_nodes, redis_factory()]
    fence = RedlockFence([_client(server) for server in servers], "even", ttl=30)
    token = fence.acquire(timeout=0)
    fence.release(token)
    servers[3].stop()
    assert fence.acquire(timeout=0) > token
    servers[2].stop()
    with pytest.raises(FenceUnavailable, match="2 of 4 nodes answered"):
        fence.acquire(timeout=0)


# -- fencing.connect ----------------------------------------------------------------------------


def test_connect_redlock_url(nodes: list[RedisServer]) -> None:
    hosts = ",".join(f"127.0.0.1:{server.port}" for server in nodes)
    backend = fencing.connect(f"redis+redlock://{hosts}/0?socket_timeout=2")
    fence = backend.fence("connected", ttl=30)
    assert isinstance(fence, RedlockFence)
    token = fence.acquire(timeout=0)
    fence.release(token)

    async def asyncio_side() -> int:
        afence = backend.aio_fence("connected", ttl=30)
        assert isinstance(afence, fencing.aio.RedlockFence)
        newer = await afence.acquire(timeout=0)
        await afence.release(newer)
        for client in afence.issuer.clients:  # type: ignore[attr-defined]
            await client.aclose()
        return newer

    assert asyncio.run(asyncio_side()) > token
    backend.close()
    assert repr(backend).startswith("RedlockBackend(")
    with pytest.raises(ValueError, match="host:port"):
        fencing.connect("redis+redlock://127.0.0.1:1,nohost")
    with pytest.raises(ValueError, match="at least 3 host:port"):
        fencing.connect("redis+redlock://127.0.0.1:1,127.0.0.1:2")
    assert type(fencing.connect("rediss+redlock://a:1,b:2,c:3")).__name__ == "RedlockBackend"


def test_status_and_force_release_with_a_node_down(own_nodes: list[RedisServer]) -> None:
    """A minority down: status and force release still see the majority's lease."""
    clients = [_client(server) for server in own_nodes]
    issuer = RedlockIssuer(clients)
    fence = RedlockFence(clients, "ops", ttl=30, issuer=issuer)
    token = fence.acquire(timeout=0)
    own_nodes[2].stop()
    status = issuer.status("ops")
    assert status.held and status.token == token and status.last_token == token
    assert list(issuer.names("op")) == ["ops"]
    ended = issuer.force_release("ops")
    assert ended.held and ended.token == token
    assert fence.acquire(timeout=0) > token
    own_nodes[1].stop()
    with pytest.raises(FenceUnavailable):
        issuer.status("ops")
    with pytest.raises(FenceUnavailable):
        list(issuer.names())
    issuer.close()


def test_fencing_status_on_a_redlock_url(
    nodes: list[RedisServer], clients: list[redis.Redis]
) -> None:
    url = "redis+redlock://" + ",".join(f"127.0.0.1:{server.port}" for server in nodes)
    fence = RedlockFence(clients, "cli:status", ttl=30)
    token = fence.acquire(timeout=0)
    done = subprocess.run(
        [sys.executable, "-m", "fencing.cli", "status", "cli:status", "--url", url],
        capture_output=True, text=True, timeout=PATIENCE, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"with token {int(token)}" in done.stdout
    fence.release(token)


async def test_a_cancelled_asyncio_acquire_leaves_nothing_held(
    own_nodes: list[RedisServer],
) -> None:
    """Cancelled while a majority is frozen: what the nodes grant, then or once thawed,
    is given back (the give-back is chained after each late reply)."""
    name = "cancelled"
    clients = [redis.asyncio.Redis(port=server.port, socket_timeout=30) for server in own_nodes]
    fence = AsyncRedlockFence(clients, name, ttl=30)
    for server in own_nodes[1:]:
        server.freeze()
    try:
        task = asyncio.ensure_future(fence.acquire(timeout=PATIENCE))

        async def granted() -> bool:
            return await asyncio.to_thread(_lease_keys, own_nodes[:1], name) == [1]

        await await_until(granted, "the live node granted")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        for server in own_nodes[1:]:
            server.thaw()

    async def none_left() -> bool:
        return await asyncio.to_thread(_lease_keys, own_nodes, name) == [0, 0, 0]

    await await_until(none_left, "every grant given back")
    for client in clients:
        await client.aclose()


def test_two_addresses_of_one_server_are_refused_before_anything_is_taken(
    nodes: list[RedisServer],
) -> None:
    """``localhost`` and ``127.0.0.1`` look different but are one server: its ``run_id``
    gives it away at the first acquire, before any lease is taken."""
    clients = [
        redis.Redis(host="127.0.0.1", port=nodes[0].port),
        redis.Redis(host="localhost", port=nodes[0].port),
        redis.Redis(port=nodes[1].port),
    ]
    fence = RedlockFence(clients, "same-server", ttl=30)
    with pytest.raises(fencing.FenceSetupError, match="same Redis server"):
        fence.acquire(timeout=0)
    assert _lease_keys(nodes, "same-server") == [0, 0, 0]

    async def asyncio_side() -> None:
        aclients = [
            redis.asyncio.Redis(
                host=c.get_connection_kwargs()["host"], port=c.get_connection_kwargs()["port"]
            )
            for c in clients
        ]
        afence = AsyncRedlockFence(aclients, "same-server", ttl=30)
        with pytest.raises(fencing.FenceSetupError, match="same Redis server"):
            await afence.acquire(timeout=0)
        for client in aclients:
            await client.aclose()

    asyncio.run(asyncio_side())


class OneNodeEpoch(RedlockRWFlows):
    """Broken on purpose: a token that one node holds for the lease is the token (not
    only one a majority holds), and the nodes that granted are left as they are."""

    def decided(self, granted: list[Grant], proposal: int) -> int | None:
        return next((grant.held for grant in granted if grant.held is not None), None)

    @staticmethod
    def make_same(*args: Any) -> None:
        pass


@pytest.mark.parametrize("broken", [False, True], ids=["quorum", "control"])
def test_rwlock_readers_join_the_majoritys_epoch_and_writers_stay_above_it(
    own_nodes: list[RedisServer], broken: bool
) -> None:
    """A node left in another read epoch (readers that formed there alone, its counter
    far ahead: no token of a majority) is outvoted: two readers still share one epoch,
    the majority's, above the writer before them; the next writer is above that epoch;
    with that node down (a minority), the next epoch is above that writer. The control
    takes one node's word for the epoch: the readers get the stray epoch, and the next
    writer's token is below it (a reader's claim would refuse that writer's writes)."""
    clients = [_client(server) for server in own_nodes]
    issuer = RedlockIssuer(clients)
    try:
        if broken:
            issuer.flows = OneNodeEpoch(len(clients))
        rw = fencing.RWLock(issuer, "rw-stray", ttl=30)
        first = rw.write.acquire(timeout=0)
        rw.write.release(first)
        keys = redlock_rw_keys("rw-stray")
        stray = first + 10**12  # an epoch and counter far ahead, on node 0 alone
        clients[0].set(keys.counter, stray)
        clients[0].hset(keys.lock, "epoch", stray)
        clients[0].zadd(keys.readers, {"stray-reader": 2**50})
        one, two = rw.read.acquire(timeout=0), rw.read.acquire(timeout=0)
        assert one == two, f"readers holding together have tokens {one} and {two}"
        assert first < one, "the read epoch is not above the write before it"
        if broken:  # no majority is in that epoch: the readers' leases are lost at once
            for token in (one, two):
                with pytest.raises(LeaseLost):
                    rw.read.release(token)
            for client in clients[1:]:  # their leases there, in another epoch than the
                client.delete(keys.readers)  # token, end with their ttl: end them now
            writer = rw.write.acquire(timeout=0)
            assert one == stray > writer, f"the control's epoch {one} is not above {writer}"
            return
        rw.read.renew(one)  # a majority renews
        rw.read.release(one)
        rw.read.release(two)
        writer = rw.write.acquire(timeout=0)  # nodes 1 and 2 (node 0's stray reader is in)
        assert one < stray, "the stray node's epoch was taken"
        assert writer > one, f"the writer's {writer} is not above the read epoch {one}"
        rw.write.release(writer)
        own_nodes[0].stop()  # a minority down: the stray node
        again = rw.read.acquire(timeout=0)
        assert again > writer, f"a new read epoch {again} is not above the write {writer}"
        rw.read.release(again)
    finally:
        issuer.close()
        for client in clients:
            client.close()
