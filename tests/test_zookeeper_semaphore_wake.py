"""ZooKeeper semaphore waiters are woken by the release of any slot (``WakesSlots``: a
watch on each slot's lease znode), proved by counting as on Redis and etcd (the scenario
is in ``slot_waiters``), blocking and asyncio. The control is the same issuer without
the capability: its waiter watches one slot (``WakesOnRelease``) and makes no take while
only another slot is released.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from slot_waiters import (
    PERMITS,
    AsyncCounting,
    Counting,
    WatchingOne,
    assert_woken,
    awaited,
    released_before_the_wait,
    unwoken_takes,
    waited,
)

from fencing.testing.servers import ZooKeeperServer
from fencing.zookeeper import ZooKeeperIssuer
from fencing.zookeeper.aio import ZooKeeperIssuer as AsyncZooKeeperIssuer


class Counted(Counting, ZooKeeperIssuer):
    """A ZooKeeper issuer that counts its slot takes and keeps what each wait returned."""


class OneSlot(WatchingOne, ZooKeeperIssuer):  # type: ignore[misc]  # (its None is the point)
    """The control: a ZooKeeper issuer whose waiter watches one slot."""


class AsyncCounted(AsyncCounting, AsyncZooKeeperIssuer):
    """The asyncio ``Counted``."""


@pytest.fixture
def client(zookeeper_server: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper_server.hosts)
    client.start()
    yield client
    client.stop()
    client.close()


def test_a_waiter_is_woken_by_the_release_of_any_slot(client: KazooClient) -> None:
    issuer = Counted(client)
    assert_woken(issuer, *waited(issuer))


def test_a_release_between_the_refusal_and_the_wait_is_not_missed(client: KazooClient) -> None:
    """The released slot's znode is found gone when its watch is set."""
    released_before_the_wait(Counted(client))


def test_control_without_the_capability_the_release_of_another_slot_does_not_wake(
    client: KazooClient,
) -> None:
    issuer = OneSlot(client)
    assert unwoken_takes(issuer) == PERMITS and not issuer.woken


async def test_an_asyncio_waiter_is_woken_by_the_release_of_any_slot(client: KazooClient) -> None:
    issuer = AsyncCounted(client)
    assert_woken(issuer, *await awaited(issuer))
