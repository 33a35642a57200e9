"""Family ``rwlock``: the read-write lock of issue 33 against the fence, on each engine.

One uncontended acquire + release of ``rw.read`` and of ``rw.write``, against the
fence's own acquire + release on the same issuer (the floor of each engine): the issue's
budget is a read at most 1.15x the fence. Then the hand-off: from the last reader's
release to the acquire of a writer waiting for it (a thread of its own), against the
fence's from its holder's release to a waiter's acquire: at most 1.2x. Engines: the
in-memory issuer, the run's Redis, a SQLite file in the run's scratch directory, a
single ZooKeeper server and a 3-member etcd cluster that this family starts; on
ZooKeeper, kazoo's own ``ReadLock``/``WriteLock`` side by side (no tokens, no fencing).

Imports fencing, redis-py, kazoo, the throwaway servers and the harness.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import redis
from kazoo.client import KazooClient

import fencing
from fencing.etcd import EtcdIssuer
from fencing.redis import RedisIssuer
from fencing.sql import SqlIssuer
from fencing.testing.servers import EtcdCluster, ZooKeeperServer
from fencing.zookeeper import ZooKeeperIssuer
from harness import Batch, Context, Table, Variant, now_ns, run_rounds, timed


def _cycle(side: KazooSide) -> None:
    side.acquire()
    side.release()


class KazooSide:
    """kazoo's ``ReadLock`` or ``WriteLock`` with a fence side's ``acquire``/``release``."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def acquire(self, timeout: float | None = None) -> None:
        self.lock.acquire(timeout=timeout)

    def release(self, token: object = None) -> None:
        self.lock.release()


def run(ctx: Context) -> list[Table]:
    with ZooKeeperServer() as zookeeper, EtcdCluster() as etcd:
        kazoo = KazooClient(hosts=zookeeper.hosts)
        kazoo.start(timeout=30)
        try:
            return _run(ctx, kazoo, etcd.url)
        finally:
            kazoo.stop()
            kazoo.close()


def _run(ctx: Context, kazoo: KazooClient, etcd_url: str) -> list[Table]:
    client = redis.Redis.from_url(ctx.redis_url)
    issuers: dict[str, Callable[[], object]] = {
        "memory": fencing.MemoryIssuer,
        "Redis": lambda: RedisIssuer(client),
        "SQLite": lambda: SqlIssuer(f"sqlite:///{ctx.workdir / 'rwlock.db'}"),
        "ZooKeeper": lambda: ZooKeeperIssuer(kazoo),
        "etcd": lambda: EtcdIssuer(etcd_url),
    }
    variants: list[Variant] = []
    floor_of: dict[str, str] = {}
    handoffs: list[Variant] = []
    handoff_floor_of: dict[str, str] = {}
    for engine, make in issuers.items():
        issuer = make()
        fence_floor = f"{engine}: Fence release -> waiter holds (floor)"
        waiters = {
            fence_floor: (
                fencing.Fence(issuer, f"bench-rw-hand-{engine}", ttl=30),  # type: ignore[arg-type]
                fencing.Fence(issuer, f"bench-rw-hand-{engine}", ttl=30),  # type: ignore[arg-type]
            ),
            f"{engine}: last reader's release -> waiting writer holds": (
                fencing.RWLock(issuer, f"bench-rw-hand-rw-{engine}", ttl=30).read,  # type: ignore[arg-type]
                fencing.RWLock(issuer, f"bench-rw-hand-rw-{engine}", ttl=30).write,  # type: ignore[arg-type]
            ),
        }
        for name, (holder, waiter) in waiters.items():
            handoffs.append(Variant(name, _handoff(holder, waiter)))
            handoff_floor_of[name] = fence_floor
        fence = fencing.Fence(issuer, f"bench-rw-fence-{engine}", ttl=30)  # type: ignore[arg-type]
        rw = fencing.RWLock(issuer, f"bench-rw-{engine}", ttl=30)  # type: ignore[arg-type]
        floor = f"{engine}: Fence acquire+release (floor)"
        cycles = {
            floor: lambda fence=fence: fence.release(fence.acquire()),
            f"{engine}: rw.read acquire+release": lambda side=rw.read: side.release(side.acquire()),
            f"{engine}: rw.write acquire+release": lambda side=rw.write: side.release(
                side.acquire()
            ),
        }
        for name, cycle in cycles.items():
            variants.append(Variant(name, timed(cycle)))
            floor_of[name] = floor
    read, write = (
        KazooSide(kazoo.ReadLock("/bench-kazoo-rw")),
        KazooSide(kazoo.WriteLock("/bench-kazoo-rw")),
    )
    zk_floor = "ZooKeeper: Fence acquire+release (floor)"
    for name, side in {"kazoo ReadLock": read, "kazoo WriteLock": write}.items():
        variants.append(
            Variant(
                f"ZooKeeper: {name} acquire+release",
                timed(partial(_cycle, side)),
            )
        )
        floor_of[f"ZooKeeper: {name} acquire+release"] = zk_floor
    waiting = KazooSide(kazoo.WriteLock("/bench-kazoo-hand"))
    kazoo_hand = "ZooKeeper: kazoo ReadLock release -> waiting WriteLock holds"
    handoffs.append(
        Variant(kazoo_hand, _handoff(KazooSide(kazoo.ReadLock("/bench-kazoo-hand")), waiting))
    )
    handoff_floor_of[kazoo_hand] = "ZooKeeper: Fence release -> waiter holds (floor)"
    try:
        stats = run_rounds(
            variants, rounds=ctx.scale(8, 30), per_round=ctx.scale(100, 200), warmup=100
        )
        handed = run_rounds(handoffs, rounds=ctx.scale(4, 10), per_round=ctx.scale(10, 20))
    finally:
        client.close()
    return [
        Table(
            "rwlock",
            "read-write lock: uncontended acquire + release, against the fence's on each engine",
            [stats[v.name] for v in variants],
            floor=None,
            floor_of=floor_of,
        ),
        Table(
            "rwlock-handoff",
            "read-write lock: the last reader's release -> the waiting writer holds, against "
            "the fence's release -> its waiter holds, on each engine",
            [handed[v.name] for v in handoffs],
            floor=None,
            floor_of=handoff_floor_of,
            notes=[f"the waiter waits {WAITING * 1000:.0f} ms before the release (not timed)"],
        ),
    ]


#: Seconds the waiter is given to be waiting (blocked in its acquire) before the release.
WAITING = 0.02


def _handoff(holder: Any, waiter: Any) -> Batch:
    """Each sample: ``holder`` acquires, ``waiter`` (another fence, or the write side)
    starts waiting in a thread, then the time from ``holder``'s release to ``waiter``'s
    acquire returning; the waiter then releases."""

    held: list[int] = []

    def wait() -> None:
        got = waiter.acquire(timeout=30)
        held.append(now_ns())
        waiter.release(got)

    def batch(n: int) -> list[int]:
        out = []
        for _ in range(n):
            token = holder.acquire(timeout=30)
            held.clear()
            thread = threading.Thread(target=wait)
            thread.start()
            time.sleep(WAITING)
            start = now_ns()
            holder.release(token)
            thread.join()
            out.append(held[0] - start)
        return out

    return batch
