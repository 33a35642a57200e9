"""The public contracts (``fencing.testing.contract``) against Redis Cluster: the issuer
blocking and asyncio (``redis.cluster.RedisCluster``,
``redis.asyncio.cluster.RedisCluster``), its operations (status, names, force release),
the mark, the semaphore, the read-write lock and the limiter (through ``fencing.connect``), on the
session's cluster of 3 masters with a replica each.

Names are random, so the contract's fences land on all three masters.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.cluster
from limiters import ThroughBackend as ThroughLimiters
from rwlocks import ThroughBackend

import fencing
import fencing.aio
from fencing import RedisMark
from fencing._connect import Backend
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
    MakeMark,
    MakeSemaphore,
    MarkContract,
    OperationsContract,
    SemaphoreContract,
)
from fencing.testing.servers import RedisCluster


class TestRedisClusterFence(FenceContract):
    @pytest.fixture
    def make_fence(self, cluster_client: redis.cluster.RedisCluster) -> MakeFence:
        def make(name: str, ttl: float) -> fencing.Fence:
            return fencing.RedisFence(cluster_client, name, ttl)

        return make


class TestRedisClusterOperations(OperationsContract):
    """``fencing status``/``list``/``release --force`` on the cluster (SCAN on every master)."""

    make_fence = TestRedisClusterFence.make_fence


class TestAsyncRedisClusterFence(AsyncFenceContract):
    @pytest.fixture
    async def make_fence(self, redis_cluster: RedisCluster) -> AsyncIterator[MakeAsyncFence]:
        client = redis_cluster.async_client()

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return fencing.aio.RedisFence(client, name, ttl)

        yield make
        await client.aclose()


class TestRedisClusterElection(ElectionContract):
    make_fence = TestRedisClusterFence.make_fence


class TestAsyncRedisClusterElection(AsyncElectionContract):
    make_fence = TestAsyncRedisClusterFence.make_fence


class TestRedisClusterInterop(InteropContract):
    make_fence = TestRedisClusterFence.make_fence
    make_async_fence = TestAsyncRedisClusterFence.make_fence


class TestRedisClusterMark(MarkContract):
    #: Only check-and-raise is one atomic Lua step; the guarded call runs outside Redis.
    serializes_calls = False

    @pytest.fixture
    def make_mark(self, cluster_client: redis.cluster.RedisCluster) -> MakeMark:
        return lambda: RedisMark(cluster_client, f"mark:{uuid.uuid4().hex}")


class TestRedisClusterSemaphore(SemaphoreContract):
    @pytest.fixture
    def make_semaphore(self, redis_cluster: RedisCluster) -> Iterator[MakeSemaphore]:
        backend = fencing.connect(redis_cluster.url)
        yield backend.semaphore
        backend.close()


class TestAsyncRedisClusterSemaphore(AsyncSemaphoreContract):
    @pytest.fixture
    async def make_semaphore(
        self, redis_cluster: RedisCluster
    ) -> AsyncIterator[MakeAsyncSemaphore]:
        client = redis_cluster.async_client()
        issuer = fencing.aio.RedisIssuer(client)
        yield lambda name, permits, ttl: fencing.aio.Semaphore(issuer, name, permits, ttl)
        await client.aclose()


class TestRedisClusterRWLock(ThroughBackend):
    @pytest.fixture
    def backend(self, redis_cluster: RedisCluster) -> Iterator[Backend]:
        backend = fencing.connect(redis_cluster.url)
        yield backend
        backend.close()


class TestRedisClusterLimiter(ThroughLimiters):
    @pytest.fixture
    def backend(self, redis_cluster: RedisCluster) -> Iterator[Backend]:
        backend = fencing.connect(redis_cluster.url)
        yield backend
        backend.close()
