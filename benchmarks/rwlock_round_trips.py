"""Requests a read-write lock sends on ZooKeeper and etcd, against the fence's: a count
that the machine's load does not move (docs/rwlock.md, "Speed").

``python benchmarks/rwlock_round_trips.py``: starts a ZooKeeper server and a 3-member
etcd cluster, and counts every kazoo request (``_Reply``, one per request sent; a
waiter's ``WatchLock`` look as its three) and every etcd call (``Cluster.call``): per
uncontended acquire + release (the mean of 20 after 5 of warm-up), and in the hand-off
from the release to the waiter's acquire returning, the waiter's own requests included
(the median of 8; the waiter's look before the release is not counted).

Imports fencing (its ZooKeeper and etcd issuers, their steps), kazoo and the servers.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

import fencing
from fencing.etcd import EtcdIssuer, _cluster
from fencing.testing.servers import EtcdCluster, ZooKeeperServer
from fencing.zookeeper import ZooKeeperIssuer, _flows, _rw_flows

sent: Counter[str] = Counter()
_lock = threading.Lock()


def _count(owner: Any, attribute: str, key: str, requests: int = 1) -> None:
    """Count ``requests`` under ``key`` at every call of ``owner.attribute``."""
    original = getattr(owner, attribute)

    def counted(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            sent[key] += requests
        return original(*args, **kwargs)

    setattr(owner, attribute, counted)


def _now(key: str) -> int:
    with _lock:
        return sent[key]


def _cycles(acquire: Callable[[], Any], release: Callable[[Any], Any], key: str) -> float:
    for _ in range(5):
        release(acquire())
    before = _now(key)
    for _ in range(20):
        release(acquire())
    return (_now(key) - before) / 20


def _wait(waiter: Any, key: str, held: list[int]) -> None:
    """The waiter's acquire, the count as it returns, its release."""
    got = waiter.acquire(timeout=30)
    held.append(_now(key))
    waiter.release(got)


def _handoff(holder: Any, waiter: Any, key: str) -> int:
    counts = []
    for _ in range(8):
        token = holder.acquire(timeout=30)
        held: list[int] = []
        thread = threading.Thread(target=_wait, args=(waiter, key, held))
        thread.start()
        time.sleep(0.2)  # the waiter waits (its look is before the release: not counted)
        start = _now(key)
        holder.release(token)
        thread.join()
        counts.append(held[0] - start)
    return sorted(counts)[len(counts) // 2]


def count(issuer: Any, key: str) -> dict[str, float]:
    fence = fencing.Fence(issuer, f"trips-fence-{key}", ttl=30)
    rw = fencing.RWLock(issuer, f"trips-rw-{key}", ttl=30)
    one, other = (fencing.Fence(issuer, f"trips-hand-{key}", ttl=30) for _ in range(2))
    reader = fencing.RWLock(issuer, f"trips-hand-rw-{key}", ttl=30).read
    writer = fencing.RWLock(issuer, f"trips-hand-rw-{key}", ttl=30).write
    return {
        "fence": _cycles(fence.acquire, fence.release, key),
        "rw.read": _cycles(rw.read.acquire, rw.read.release, key),
        "rw.write": _cycles(rw.write.acquire, rw.write.release, key),
        "fence hand-off": _handoff(one, other, key),
        "reader -> writer hand-off": _handoff(reader, writer, key),
    }


def main() -> None:
    _count(_flows._Reply, "perform", "zookeeper")
    _count(_rw_flows.WatchLock, "_changed", "zookeeper", requests=3)
    _count(_cluster.Cluster, "call", "etcd")
    with ZooKeeperServer() as zookeeper, EtcdCluster() as etcd:
        kazoo = KazooClient(hosts=zookeeper.hosts)
        kazoo.start(timeout=30)
        try:
            for engine, issuer in (
                ("ZooKeeper", ZooKeeperIssuer(kazoo)),
                ("etcd", EtcdIssuer(etcd.url)),
            ):
                key = engine.lower()
                for what, requests in count(issuer, key).items():
                    print(f"{engine + ':':11}{what:27} {requests:g} requests")
        finally:
            kazoo.stop()
            kazoo.close()


if __name__ == "__main__":
    main()
