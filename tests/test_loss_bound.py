"""The loss bound (``fencing.testing.contract.LossBoundContract``, issue 32) on every
engine: a hold on a frozen issuer signals its loss by the lease's end, not when its
renewal's call times out.

Each engine's issuer is frozen for real (its server processes stopped with SIGSTOP and
checked stopped in ``/proc``), so the servers frozen are the test's own: a redis-server
per test (cheap), and, for the engines whose servers are costly to start, servers that
only their group's tests use, one test at a time (docs/testing.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import redis
import redis.asyncio

import fencing
import fencing.redis
import fencing.redis.aio
from fencing.testing.contract import AsyncLossBoundContract, Freeze, LossBoundContract
from fencing.testing.servers import RedisServer


class TestMemoryLossBound(LossBoundContract):
    """The memory issuer frozen: its lock held by the test, so every call waits."""

    @pytest.fixture
    def issuer(self) -> fencing.MemoryIssuer:
        return fencing.MemoryIssuer()

    @pytest.fixture
    def freeze(self, issuer: fencing.MemoryIssuer) -> Freeze:
        @contextlib.contextmanager
        def freeze() -> Iterator[None]:
            with issuer._changed:
                yield

        return freeze


@pytest.fixture
def frozen_redis(redis_factory: Callable[..., RedisServer]) -> RedisServer:
    """A redis-server of the test's own, to freeze."""
    return redis_factory()


class TestRedisLossBound(LossBoundContract):
    """The user's own client, without a socket timeout: its calls to a frozen server
    never end by themselves."""

    @pytest.fixture
    def issuer(self, frozen_redis: RedisServer) -> Iterator[fencing.redis.RedisIssuer]:
        client = redis.Redis(port=frozen_redis.port)
        yield fencing.redis.RedisIssuer(client)
        client.close()

    @pytest.fixture
    def freeze(self, frozen_redis: RedisServer) -> Freeze:
        return frozen_redis.frozen


class TestAsyncRedisLossBound(AsyncLossBoundContract):
    @pytest.fixture
    async def async_issuer(
        self, frozen_redis: RedisServer
    ) -> AsyncIterator[fencing.redis.aio.RedisIssuer]:
        client = redis.asyncio.Redis(port=frozen_redis.port)
        yield fencing.redis.aio.RedisIssuer(client)
        await client.aclose()

    @pytest.fixture
    def freeze(self, frozen_redis: RedisServer) -> Freeze:
        return frozen_redis.frozen
