"""Redis semaphore waiters are woken by the release of any slot (``WakesSlots``), proved
by counting, not timing (the scenario is in ``slot_waiters``, shared with etcd's):
standalone and Cluster, blocking and asyncio. The control is the same issuer without
the capability (an engine that cannot wake): backing off with jitter, it tries the
slots round after round while the permits stay held. Through ``min_replicas`` (WAIT):
test_redis_replicas.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
from slot_waiters import (
    PERMITS,
    AsyncCounted,
    Counted,
    Polling,
    assert_woken,
    awaited,
    released_before_the_wait,
    waited,
)

from fencing.testing.servers import RedisCluster, RedisServer


@pytest.fixture
def standalone(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis(port=redis_server.port)
    yield client
    client.close()


def test_a_waiter_is_woken_by_the_release_of_any_slot(standalone: redis.Redis) -> None:
    issuer = Counted(standalone)
    assert_woken(issuer, *waited(issuer))


def test_a_release_between_the_refusal_and_the_wait_is_not_missed(
    standalone: redis.Redis,
) -> None:
    released_before_the_wait(Counted(standalone))


def test_control_without_the_capability_the_waiter_backs_off_and_tries_again(
    standalone: redis.Redis,
) -> None:
    """It gets to three rounds while every permit is held (the woken waiter stays at one),
    and is served by a round, not a wake-up."""
    issuer = Polling(standalone)
    released, got = waited(issuer, rounds=3)
    assert got.slot == released.slot and not issuer.woken
    assert issuer.takes > 3 * PERMITS


def test_on_redis_cluster(redis_cluster: RedisCluster) -> None:
    # socket_timeout given: a cluster client that is given none reports none, while its
    # nodes' connections time out after redis-py's default 5 s
    client = redis_cluster.client(socket_timeout=5)
    issuer = Counted(client)
    assert_woken(issuer, *waited(issuer))
    client.close()


async def test_an_asyncio_waiter_is_woken_by_the_release_of_any_slot(
    redis_server: RedisServer,
) -> None:
    client = redis.asyncio.Redis(port=redis_server.port)
    issuer = AsyncCounted(client)
    assert_woken(issuer, *await awaited(issuer))
    await client.aclose()
