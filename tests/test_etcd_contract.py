"""The public contract against the etcd issuer, blocking and asyncio, on the session's
real 3-member etcd cluster.

etcd grants lease TTLs in whole seconds, at least 1 s on the test cluster (its floor is
1.5 election timeouts, rounded up), so the leases the contract lets expire are 1 s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from processes import CONTEXT
from rwlocks import ThroughBackend

import fencing
import fencing.aio
from fencing._connect import Backend
from fencing.etcd import EtcdFence, EtcdIssuer
from fencing.etcd.aio import EtcdFence as AsyncEtcdFence
from fencing.etcd.aio import EtcdIssuer as AsyncEtcdIssuer
from fencing.testing.contract import (
    AsyncElectionContract,
    AsyncFenceContract,
    AsyncSemaphoreContract,
    ElectionContract,
    FenceContract,
    InteropContract,
    MakeAsyncFence,
    MakeAsyncSemaphore,
    MakeFence,
    MakeSemaphore,
    OperationsContract,
    SemaphoreContract,
    StaleHolderContract,
)
from fencing.testing.servers import EtcdCluster


class EtcdTerms:
    """etcd's lease terms: TTLs in whole seconds (see the module docstring)."""

    short_ttl = 1.0
    renewal_ttl = 1.2  # a 2 s etcd lease (whole seconds), renewed every 0.4 s
    #: The hold check waits 2.64 s: past the 2 s lease, and past the 2.4 s that one
    #: renewal (at 0.4 s) and no more would keep it.
    hold_check_ttls = 2.2


class TestEtcdFence(EtcdTerms, FenceContract):
    @pytest.fixture
    def make_fence(self, etcd_cluster: EtcdCluster) -> Iterator[MakeFence]:
        issuer = EtcdIssuer(etcd_cluster.url)

        def make(name: str, ttl: float) -> fencing.Fence:
            return EtcdFence(issuer, name, ttl)

        yield make
        issuer.close()


class TestAsyncEtcdFence(EtcdTerms, AsyncFenceContract):
    @pytest.fixture
    async def make_fence(self, etcd_cluster: EtcdCluster) -> AsyncIterator[MakeAsyncFence]:
        issuer = AsyncEtcdIssuer(etcd_cluster.url)

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return AsyncEtcdFence(issuer, name, ttl)

        yield make
        await issuer.aclose()


class TestEtcdInterop(EtcdTerms, InteropContract):
    make_fence = TestEtcdFence.make_fence
    make_async_fence = TestAsyncEtcdFence.make_fence


class TestEtcdStaleHolder(EtcdTerms, StaleHolderContract):
    processes = CONTEXT
    make_fence = TestEtcdFence.make_fence

    @pytest.fixture
    def holder_url(self, etcd_cluster: EtcdCluster) -> str:
        return etcd_cluster.url


class TestEtcdElection(EtcdTerms, ElectionContract):
    make_fence = TestEtcdFence.make_fence


class TestAsyncEtcdElection(EtcdTerms, AsyncElectionContract):
    make_fence = TestAsyncEtcdFence.make_fence


class TestEtcdOperations(EtcdTerms, OperationsContract):
    """``fencing status``/``list``/``release --force`` on etcd (a fence exists while held)."""

    make_fence = TestEtcdFence.make_fence


class TestEtcdSemaphore(EtcdTerms, SemaphoreContract):
    """Through what a user calls: ``fencing.connect(url).semaphore`` (fewer racing rounds:
    each acquisition is a Raft write)."""

    semaphore_rounds = 4

    @pytest.fixture
    def make_semaphore(self, etcd_cluster: EtcdCluster) -> Iterator[MakeSemaphore]:
        backend = fencing.connect(etcd_cluster.url)
        yield backend.semaphore
        backend.close()


class TestAsyncEtcdSemaphore(EtcdTerms, AsyncSemaphoreContract):
    """``fencing.connect(url).aio_semaphore``, each closed (its channels) on the test's loop."""

    semaphore_rounds = 4

    @pytest.fixture
    async def make_semaphore(self, etcd_cluster: EtcdCluster) -> AsyncIterator[MakeAsyncSemaphore]:
        backend = fencing.connect(etcd_cluster.url)
        made: list[fencing.aio.Semaphore] = []

        def make(name: str, permits: int, ttl: float) -> fencing.aio.Semaphore:
            made.append(backend.aio_semaphore(name, permits, ttl))
            return made[-1]

        yield make
        for semaphore in made:  # an issuer (channels) of its own each
            await semaphore.aclose()


class TestEtcdRWLock(EtcdTerms, ThroughBackend):
    """Read-write locks through ``fencing.connect``: leases of 1 s let expire, a hold's
    of 1.2 s (a 2 s etcd lease, renewed every 0.4 s)."""

    hold_ttl = 1.2

    @pytest.fixture
    def backend(self, etcd_cluster: EtcdCluster) -> Iterator[Backend]:
        backend = fencing.connect(etcd_cluster.url)
        yield backend
        backend.close()
