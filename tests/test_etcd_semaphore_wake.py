"""etcd semaphore waiters are woken by the release of any slot (``WakesSlots``: a watch
of the slots' keys from the refused take's revision), proved by counting as on Redis
(the scenario is in ``slot_waiters``), blocking and asyncio. The control is the same
issuer without the capability: its waiter watches one slot (``WakesOnRelease``) and
makes no take while only another slot is released.
"""

from __future__ import annotations

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

from fencing.etcd import EtcdIssuer
from fencing.etcd.aio import EtcdIssuer as AsyncEtcdIssuer
from fencing.testing.servers import EtcdCluster


class Counted(Counting, EtcdIssuer):
    """An etcd issuer that counts its slot takes and keeps what each wait returned."""


class OneSlot(WatchingOne, EtcdIssuer):  # type: ignore[misc]  # (its None is the point)
    """The control: an etcd issuer whose waiter watches one slot."""


class AsyncCounted(AsyncCounting, AsyncEtcdIssuer):
    """The asyncio ``Counted``."""


def test_a_waiter_is_woken_by_the_release_of_any_slot(etcd_cluster: EtcdCluster) -> None:
    issuer = Counted(etcd_cluster.url)
    assert_woken(issuer, *waited(issuer))
    issuer.close()


def test_a_release_between_the_refusal_and_the_wait_is_not_missed(
    etcd_cluster: EtcdCluster,
) -> None:
    """Replayed by the watch from the take's revision, or found by its two local reads."""
    issuer = Counted(etcd_cluster.url)
    released_before_the_wait(issuer)
    issuer.close()


def test_control_without_the_capability_the_release_of_another_slot_does_not_wake(
    etcd_cluster: EtcdCluster,
) -> None:
    issuer = OneSlot(etcd_cluster.url)
    assert unwoken_takes(issuer) == PERMITS and not issuer.woken
    issuer.close()


async def test_an_asyncio_waiter_is_woken_by_the_release_of_any_slot(
    etcd_cluster: EtcdCluster,
) -> None:
    issuer = AsyncCounted(etcd_cluster.url)
    assert_woken(issuer, *await awaited(issuer))
    await issuer.aclose()
