"""ZooKeeper semaphore waiters are woken by the release of any slot (``WakesSlots``: a
watch on each slot's lease znode), proved by counting as on Redis and etcd (the scenario
is in ``slot_waiters``), blocking and asyncio. The control is the same issuer without
the capability: its waiter watches one slot (``WakesOnRelease``) and makes no take while
only another slot is released.

Where clients of one name use different permits, a free slot below the waiter's may be
one that the count refused; a waiter watching it would be woken at once, again and
again, for as long as the others hold their slots: it watches none then.
"""

from __future__ import annotations

import threading
import uuid
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
from waiting import PATIENCE, joined, wait_until, woken_only

import fencing
from fencing.issuer import Busy, SlotBusy
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


class Watching(Counting, ZooKeeperIssuer):
    """The control of the mixed permits: every refusal is marked to watch all the
    waiter's slots, as before the width was looked at."""

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        reply = super().try_acquire_slot(group, slot, permits, holder, ttl_ms, wait_ms)
        return SlotBusy(reply.expires_in, str(permits)) if isinstance(reply, SlotBusy) else reply


def _refused_by_the_count(
    client: KazooClient, issuer: ZooKeeperIssuer
) -> tuple[fencing.Semaphore, fencing.Semaphore, list[fencing.Permit]]:
    """A semaphore of 2 on ``issuer`` whose slots are both free while one of 4 holds slots
    2 and 3: the count refuses every take. Its acquires wait only for a wake-up
    (``woken_only``). Returns both semaphores and the permits held."""
    name = f"mixed-{uuid.uuid4().hex}"
    wide = fencing.Semaphore(ZooKeeperIssuer(client), name, permits=4, ttl=60)
    held = []
    for permit in [wide.acquire(timeout=PATIENCE) for _ in range(4)]:
        if permit.slot < 2:
            wide.release(permit)
        else:
            held.append(permit)
    narrow = fencing.Semaphore(issuer, name, permits=2, ttl=60)
    woken_only(narrow)
    return narrow, wide, held


def test_with_mixed_permits_a_waiter_refused_by_the_count_is_not_woken_by_a_free_slot(
    client: KazooClient,
) -> None:
    issuer = Counted(client)
    narrow, _, _ = _refused_by_the_count(client, issuer)
    with pytest.raises(fencing.AcquireTimeout):
        narrow.acquire(timeout=0.5)
    # a round, a wait that ran out, the last round
    assert issuer.takes == 2 * 2 and issuer.woken == [None]


def test_control_watching_the_free_slots_the_waiter_spins(client: KazooClient) -> None:
    issuer = Watching(client)
    narrow, wide, held = _refused_by_the_count(client, issuer)
    got: list[fencing.Permit] = []
    thread = threading.Thread(target=lambda: got.append(narrow.acquire(timeout=PATIENCE)))
    thread.start()
    try:
        wait_until(lambda: issuer.takes >= 20, "the waiter woken again and again")
    finally:
        wide.release(held[0])  # the count lets it in
        joined(thread)
    assert got and len(issuer.woken) >= 9 and None not in issuer.woken
