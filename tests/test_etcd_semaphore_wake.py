"""etcd semaphore waiters are woken by the release of any slot (``WakesSlots``: a watch
of the slots' keys from the refused take's revision), proved by counting as on Redis
(the scenario is in ``slot_waiters``), blocking and asyncio. The control is the same
issuer without the capability: its waiter watches one slot (``WakesOnRelease``), is not
woken by the release of another, and is served by its next round.
"""

from __future__ import annotations

from slot_waiters import (
    PERMITS,
    AsyncCounting,
    Counting,
    assert_woken,
    awaited,
    released_before_the_wait,
    waited,
)

from fencing.etcd import EtcdIssuer
from fencing.etcd.aio import EtcdIssuer as AsyncEtcdIssuer
from fencing.testing.servers import EtcdCluster


class Counted(Counting, EtcdIssuer):
    """An etcd issuer that counts its slot takes and keeps what each wait returned."""


class OneSlot(Counted):
    """The control: no ``WakesSlots`` (a protocol member set to None is not implemented);
    it keeps the fences its waiters watched."""

    await_slot_release = None  # type: ignore[assignment]

    def await_release(self, name: str, seconds: float) -> None:
        self.watched.append(name)
        super().await_release(name, seconds)


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
    """The waiter watched one slot, another was released: it took that one in a later
    round (more than one round of takes), and no slot wait ran."""
    issuer = OneSlot(etcd_cluster.url)
    released, got = waited(issuer, past_its_watch=True)
    assert got.slot == released.slot and not issuer.woken
    assert issuer.takes > PERMITS + 1, issuer.takes
    issuer.close()


async def test_an_asyncio_waiter_is_woken_by_the_release_of_any_slot(
    etcd_cluster: EtcdCluster,
) -> None:
    issuer = AsyncCounted(etcd_cluster.url)
    assert_woken(issuer, *await awaited(issuer))
    await issuer.aclose()
