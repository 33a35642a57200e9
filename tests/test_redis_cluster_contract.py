"""The public contracts (``fencing.testing.contract``) against Redis Cluster: the issuer
blocking and asyncio (``redis.cluster.RedisCluster``,
``redis.asyncio.cluster.RedisCluster``), its operations (status, names, force release)
and the mark, on the session's cluster of 3 masters with a replica each.

Names are random, so the contract's fences land on all three masters. The semaphore,
the read-write lock and the limiter run the scripts the Redis contracts run
(test_contract_semaphores.py, _rwlocks.py, _limiters.py); what a cluster adds, every key
of one of them in one slot, is test_redis_cluster.py's.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.cluster

import fencing
import fencing.aio
from fencing import RedisMark
from fencing.testing.contract import (
    AsyncElectionContract,
    AsyncFenceContract,
    ElectionContract,
    FenceContract,
    InteropContract,
    MakeAsyncFence,
    MakeFence,
    MakeMark,
    MarkContract,
    OperationsContract,
)
from fencing.testing.servers import RedisCluster


@pytest.fixture(scope="module")
def cluster_client(redis_cluster: RedisCluster) -> Iterator[redis.cluster.RedisCluster]:
    """One blocking client of the session's cluster for this module (conftest's is one per
    test): a new client finds every node, about 30 ms of CPU, which each of the 60-odd
    blocking tests here paid. Nothing here stops or freezes a node, and every name is
    random, so the tests share it as the threads of one program would."""
    client = redis_cluster.client()
    yield client
    client.close()


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
