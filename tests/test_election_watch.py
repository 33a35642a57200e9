"""``observe()`` through the engine's own leader killed during a term (etcd, ZooKeeper).

That an observer is woken by the engine's watch (``fencing.issuer.WatchesLease``) on
etcd, ZooKeeper and Redis is the election contract's promise
(``test_observers_see_every_change`` polls every 600 s on an issuer with a watch). Here
each observer polls every 600 s too: a change reported before the test's deadline can
only have come through the watch, also across the fail-over.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable
from typing import Any

from waiting import PATIENCE, joined

import fencing
from fencing.etcd import EtcdIssuer
from fencing.etcd.aio import EtcdIssuer as AsyncEtcdIssuer
from fencing.issuer import AsyncWatchesLease, WatchesLease
from fencing.redis import RedisIssuer
from fencing.redis.aio import RedisIssuer as AsyncRedisIssuer
from fencing.sql import SqlIssuer
from fencing.sql.aio import SqlIssuer as AsyncSqlIssuer
from fencing.testing.servers import EtcdCluster, ZooKeeperEnsemble
from fencing.zookeeper import ZooKeeperIssuer
from fencing.zookeeper.aio import ZooKeeperIssuer as AsyncZooKeeperIssuer

#: Far longer than the test's deadline: a change seen in time came through the watch.
NEVER_POLLED = 600.0


def test_which_issuers_watch() -> None:
    """The issuers with an engine's watch declare it (the contract's observer then polls
    every 600 s on them); the others are polled (SQL: every ``poll`` seconds)."""
    watching = [RedisIssuer, EtcdIssuer, ZooKeeperIssuer]
    assert all(issubclass(kind, WatchesLease) for kind in watching)
    awatching = [AsyncRedisIssuer, AsyncEtcdIssuer, AsyncZooKeeperIssuer]
    assert all(issubclass(kind, AsyncWatchesLease) for kind in awatching)
    polled = [fencing.MemoryIssuer, SqlIssuer]
    assert not any(issubclass(kind, WatchesLease) for kind in polled)
    assert not issubclass(AsyncSqlIssuer, AsyncWatchesLease)


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
