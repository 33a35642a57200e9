"""``observe()`` on etcd and ZooKeeper wakes on the engine's watch, not on its poll.

Each observer polls every 600 s: a change reported before the test's deadline (60 s)
can only have come through the watch (``fencing.issuer.WatchesLease``). The observer
sees every term in order, and ``None`` once nobody leads.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import uuid
from collections.abc import Callable
from typing import Any

from waiting import PATIENCE, joined

import fencing
from fencing.issuer import AsyncWatchesLease, WatchesLease
from fencing.testing.servers import EtcdCluster, ZooKeeperEnsemble, ZooKeeperServer

#: Far longer than the test's deadline: a change seen in time came through the watch.
NEVER_POLLED = 600.0


def _observed_through_the_watch(url: str) -> None:
    backend: Any = fencing.connect(url)
    name = f"observed:{uuid.uuid4().hex}"
    election = backend.election(name, ttl=10)
    assert isinstance(election.issuer, WatchesLease)
    changes: queue.Queue[fencing.Leader | None] = queue.Queue()

    def observe() -> None:
        for leader in backend.election(name, ttl=10).observe(poll=NEVER_POLLED):
            changes.put(leader)
            if leader is not None and leader.value == "b":
                break

    def next_change() -> fencing.Leader | None:
        return changes.get(timeout=PATIENCE)

    observer = threading.Thread(target=observe, daemon=True)
    try:
        observer.start()
        assert next_change() is None  # nobody leads yet
        first = election.campaign("a")
        seen = next_change()
        assert seen is not None and (seen.value, seen.token) == ("a", first.token)
        first.resign()
        assert next_change() is None  # the resignation, through the watch
        second = election.campaign("b")
        seen = next_change()
        assert seen is not None and (seen.value, seen.token) == ("b", second.token)
        assert second.token > first.token
        second.resign()
        joined(observer)
    finally:
        backend.close()


def test_etcd_observe_wakes_on_the_watch(etcd_cluster: EtcdCluster) -> None:
    _observed_through_the_watch(etcd_cluster.url)


def test_zookeeper_observe_wakes_on_the_watch(zookeeper_server: ZooKeeperServer) -> None:
    _observed_through_the_watch(zookeeper_server.url)


async def _aobserved_through_the_watch(url: str) -> None:
    backend: Any = fencing.connect(url)
    name = f"observed:{uuid.uuid4().hex}"
    election = backend.aio_election(name, ttl=10)
    assert isinstance(election.issuer, AsyncWatchesLease)
    changes: asyncio.Queue[fencing.Leader | None] = asyncio.Queue()

    async def observe() -> None:
        async for leader in backend.aio_election(name, ttl=10).observe(poll=NEVER_POLLED):
            await changes.put(leader)
            if leader is not None and leader.value == "b":
                break

    async def next_change() -> fencing.Leader | None:
        return await asyncio.wait_for(changes.get(), PATIENCE)

    observer = asyncio.create_task(observe())
    try:
        assert await next_change() is None
        first = await election.campaign("a")
        seen = await next_change()
        assert seen is not None and (seen.value, seen.token) == ("a", first.token)
        await first.resign()
        assert await next_change() is None
        second = await election.campaign("b")
        seen = await next_change()
        assert seen is not None and (seen.value, seen.token) == ("b", second.token)
        await second.resign()
        await asyncio.wait_for(observer, PATIENCE)
    finally:
        observer.cancel()
        result = backend.close()
        if asyncio.iscoroutine(result):
            await result


async def test_etcd_asyncio_observe_wakes_on_the_watch(etcd_cluster: EtcdCluster) -> None:
    await _aobserved_through_the_watch(etcd_cluster.url)


async def test_zookeeper_asyncio_observe_wakes_on_the_watch(
    zookeeper_server: ZooKeeperServer,
) -> None:
    await _aobserved_through_the_watch(zookeeper_server.url)


def test_issuers_without_a_watch_poll() -> None:
    assert not isinstance(fencing.MemoryIssuer(), WatchesLease)


# -- the engine's own leader killed during a term ----------------------------------------


def _term_across_a_leader_kill(url: str, kill: Callable[[], object]) -> None:
    """A term is held while the engine's leader is SIGKILLed: the term survives or is
    found lost, the next term's token is higher, and an observer (on the watch, through
    the fail-over) sees the terms in order. Never a second term with the same or a
    lower token."""
    backend: Any = fencing.connect(url)
    name = f"killed:{uuid.uuid4().hex}"
    election = backend.election(name, ttl=4)
    changes: queue.Queue[fencing.Leader | None] = queue.Queue()
    history: list[fencing.Leader | None] = []

    def observe() -> None:
        while True:  # an outage ends an observe() with FenceUnavailable: observe again
            try:
                for leader in backend.election(name, ttl=4).observe(poll=NEVER_POLLED):
                    history.append(leader)
                    changes.put(leader)
                    if leader is not None and leader.value == "b":
                        return
            except fencing.FenceUnavailable:
                continue

    observer = threading.Thread(target=observe, daemon=True)
    try:
        observer.start()
        assert changes.get(timeout=PATIENCE) is None
        first = election.campaign("a")
        seen = changes.get(timeout=PATIENCE)
        assert seen is not None and seen.token == first.token
        kill()
        first.resign()  # hands over if it survived; a lost term has nothing to hand over
        second = backend.election(name, ttl=4).campaign("b", timeout=PATIENCE)
        assert second.token > first.token, f"term {second.token:d} after {first.token:d}"
        leader = election.leader()
        assert leader is not None and (leader.value, leader.token) == ("b", second.token)
        joined(observer)
        terms = [int(c.token) for c in history if c is not None]
        assert terms == sorted(terms) and terms[-1] == second.token
        second.resign()
    finally:
        backend.close()


def test_etcd_leader_killed_during_a_term(etcd_cluster: EtcdCluster) -> None:
    killed: list[Any] = []
    try:
        _term_across_a_leader_kill(
            etcd_cluster.url + "?timeout=10", lambda: killed.append(etcd_cluster.kill_leader())
        )
    finally:
        for member in killed:
            etcd_cluster.restart(member)


def test_zookeeper_leader_killed_during_a_term(zookeeper_ensemble: ZooKeeperEnsemble) -> None:
    try:
        _term_across_a_leader_kill(
            f"{zookeeper_ensemble.url}?timeout=2&session_timeout=4",
            zookeeper_ensemble.kill_leader,
        )
    finally:
        zookeeper_ensemble.heal()
