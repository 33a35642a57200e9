"""The public contract (``fencing.testing.contract``) against the ZooKeeper issuer, blocking
and asyncio, on a real ZooKeeper server (Debian's package, started by the session).

ZooKeeper leases live as long as their holder's session (``expires_while_held = False``);
``end_session`` expires a fence's session the way ZooKeeper's own tests do: a second
client joins the session with its id and password and closes it, so the servers end the
session (and delete its ephemeral znodes) as after a timeout. Every fence gets a kazoo
client (a session) of its own, as separate processes would have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from processes import CONTEXT

import fencing
import fencing.aio
from fencing.testing.contract import (
    AsyncElectionContract,
    AsyncFenceContract,
    AsyncSemaphoreContract,
    ElectionContract,
    FenceContract,
    InteropContract,
    MakeAsyncFence,
    MakeAsyncRWLock,
    MakeAsyncSemaphore,
    MakeFence,
    MakeRWLock,
    MakeSemaphore,
    OperationsContract,
    RWLockContract,
    SemaphoreContract,
    StaleHolderContract,
)
from fencing.testing.servers import ZooKeeperServer
from fencing.zookeeper import ZooKeeperFence, ZooKeeperIssuer
from fencing.zookeeper.aio import ZooKeeperFence as AsyncZooKeeperFence
from fencing.zookeeper.aio import ZooKeeperIssuer as AsyncZooKeeperIssuer

#: Seconds: long enough that a busy test machine never loses a session by accident.
SESSION_TIMEOUT = 10.0


def expire_session(client: KazooClient) -> None:
    """Make the servers end ``client``'s session now, as if it had timed out."""
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts) + (client.chroot or "")
    twin = KazooClient(hosts=hosts, client_id=client.client_id, timeout=SESSION_TIMEOUT)
    twin.start(timeout=10)
    twin.stop()
    twin.close()


@pytest.fixture
def kazoo_clients(zookeeper_server: ZooKeeperServer) -> Iterator[list[KazooClient]]:
    """Started kazoo clients, stopped at the end of the test; append to get one more."""
    clients: list[KazooClient] = []
    yield clients
    for client in clients:
        client.stop()
        client.close()


def new_client(server: ZooKeeperServer, clients: list[KazooClient]) -> KazooClient:
    client = KazooClient(hosts=server.hosts, timeout=SESSION_TIMEOUT)
    client.start(timeout=10)
    clients.append(client)
    return client


class ZooKeeperTerms:
    """What both contract classes declare for ZooKeeper."""

    expires_while_held = False
    #: A lease's life is its session's, so hold() may confirm it often: shorter checks.
    renewal_ttl = 0.5

    def end_session(self, fence: Any) -> None:
        expire_session(fence.issuer.client)


class TestZooKeeperFence(ZooKeeperTerms, FenceContract):
    @pytest.fixture
    def make_fence(
        self, zookeeper_server: ZooKeeperServer, kazoo_clients: list[KazooClient]
    ) -> MakeFence:
        def make(name: str, ttl: float) -> fencing.Fence:
            return ZooKeeperFence(new_client(zookeeper_server, kazoo_clients), name, ttl)

        return make


class TestAsyncZooKeeperFence(ZooKeeperTerms, AsyncFenceContract):
    @pytest.fixture
    def make_fence(
        self, zookeeper_server: ZooKeeperServer, kazoo_clients: list[KazooClient]
    ) -> MakeAsyncFence:
        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return AsyncZooKeeperFence(new_client(zookeeper_server, kazoo_clients), name, ttl)

        return make


class TestZooKeeperInterop(ZooKeeperTerms, InteropContract):
    make_fence = TestZooKeeperFence.make_fence
    make_async_fence = TestAsyncZooKeeperFence.make_fence


class TestZooKeeperStaleHolder(StaleHolderContract):
    """The holder's session times out in 1 s while it is frozen: its lease goes with it."""

    processes = CONTEXT
    make_fence = TestZooKeeperFence.make_fence

    @pytest.fixture
    def holder_url(self, zookeeper_server: ZooKeeperServer) -> str:
        return f"{zookeeper_server.url}?session_timeout=1"


class TestZooKeeperElection(ZooKeeperTerms, ElectionContract):
    make_fence = TestZooKeeperFence.make_fence


class TestAsyncZooKeeperElection(ZooKeeperTerms, AsyncElectionContract):
    make_fence = TestAsyncZooKeeperFence.make_fence


# -- the session capability can fail ------------------------------------------------------


class LeaseOutlivesSession(ZooKeeperTerms, FenceContract):
    """A broken promise: the lease survives the end of its session (here ``end_session``
    ends nothing). Short patience: the checks must fail, and fail fast."""

    patience = 1.0

    def end_session(self, fence: Any) -> None:
        pass


class NoSessionHook(FenceContract):
    """Declares session-bound leases but gives the contract no way to end a session."""

    expires_while_held = False


def test_contract_fails_a_lease_that_outlives_its_session(
    zookeeper_server: ZooKeeperServer, kazoo_clients: list[KazooClient]
) -> None:
    def make(name: str, ttl: float) -> fencing.Fence:
        return ZooKeeperFence(new_client(zookeeper_server, kazoo_clients), name, ttl)

    broken = LeaseOutlivesSession()
    with pytest.raises(fencing.AcquireTimeout):
        broken.test_crashed_holder_is_followed_by_a_higher_token(make)
    with pytest.raises(fencing.AcquireTimeout):  # the next holder never gets in
        broken.test_hold_surfaces_a_lost_lease(make)
    with pytest.raises(NotImplementedError, match="must provide end_session"):
        NoSessionHook().test_crashed_holder_is_followed_by_a_higher_token(make)


class TestZooKeeperOperations(OperationsContract):
    """``fencing status``/``list``/``release --force`` on ZooKeeper."""

    make_fence = TestZooKeeperFence.make_fence


@pytest.fixture
def zookeeper_backends(zookeeper_server: ZooKeeperServer) -> Iterator[list[Any]]:
    """Backends of ``fencing.connect`` (one session each), closed at the end of the test."""
    backends: list[Any] = []
    yield backends
    for backend in backends:
        backend.close()


class TestZooKeeperSemaphore(ZooKeeperTerms, SemaphoreContract):
    """Through ``fencing.connect(url).semaphore``, one session per semaphore, so that
    ``end_session`` ends one holder's permits only."""

    semaphore_rounds = 4

    @pytest.fixture
    def make_semaphore(
        self, zookeeper_server: ZooKeeperServer, zookeeper_backends: list[Any]
    ) -> MakeSemaphore:
        def make(name: str, permits: int, ttl: float) -> fencing.Semaphore:
            zookeeper_backends.append(fencing.connect(zookeeper_server.url))
            return zookeeper_backends[-1].semaphore(name, permits, ttl)  # type: ignore[no-any-return]

        return make


class TestAsyncZooKeeperSemaphore(ZooKeeperTerms, AsyncSemaphoreContract):
    semaphore_rounds = 4

    @pytest.fixture
    def make_semaphore(
        self, zookeeper_server: ZooKeeperServer, zookeeper_backends: list[Any]
    ) -> MakeAsyncSemaphore:
        def make(name: str, permits: int, ttl: float) -> fencing.aio.Semaphore:
            zookeeper_backends.append(fencing.connect(zookeeper_server.url))
            return zookeeper_backends[-1].aio_semaphore(name, permits, ttl)  # type: ignore[no-any-return]

        return make


class TestZooKeeperRWLock(ZooKeeperTerms, RWLockContract):
    """Each read-write lock on a session of its own, as separate processes would have; a
    crashed holder's session is ended (``end_session`` of a side: the client of the
    issuer behind it)."""

    @pytest.fixture
    def make_rwlock(
        self, zookeeper_server: ZooKeeperServer, kazoo_clients: list[KazooClient]
    ) -> MakeRWLock:
        def make(name: str, ttl: float) -> fencing.RWLock:
            issuer = ZooKeeperIssuer(new_client(zookeeper_server, kazoo_clients))
            return fencing.RWLock(issuer, name, ttl)

        return make

    @pytest.fixture
    def make_async_rwlock(
        self, zookeeper_server: ZooKeeperServer, kazoo_clients: list[KazooClient]
    ) -> MakeAsyncRWLock:
        def make(name: str, ttl: float) -> fencing.aio.RWLock:
            issuer = AsyncZooKeeperIssuer(new_client(zookeeper_server, kazoo_clients))
            return fencing.aio.RWLock(issuer, name, ttl)

        return make

    def end_session(self, fence: Any) -> None:
        expire_session(fence.issuer.issuer.client)
