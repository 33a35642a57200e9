"""Family ``rwlock``: the read-write lock of issue 33 against the fence, on each engine.

One uncontended acquire + release of ``rw.read`` and of ``rw.write``, against the
fence's own acquire + release on the same issuer (the floor of each engine): the issue's
budget is a read at most 1.15x the fence. Then the hand-off: from the last reader's
release to the acquire of a writer waiting for it (a thread of its own), against the
fence's from its holder's release to a waiter's acquire: at most 1.2x. Engines: the
in-memory issuer, the run's Redis, and a SQLite file in the run's scratch directory.

Imports fencing, redis-py and the harness.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis

import fencing
from fencing.redis import RedisIssuer
from fencing.sql import SqlIssuer
from harness import Batch, Context, Table, Variant, now_ns, run_rounds, timed


def run(ctx: Context) -> list[Table]:
    client = redis.Redis.from_url(ctx.redis_url)
    issuers: dict[str, Callable[[], object]] = {
        "memory": fencing.MemoryIssuer,
        "Redis": lambda: RedisIssuer(client),
        "SQLite": lambda: SqlIssuer(f"sqlite:///{ctx.workdir / 'rwlock.db'}"),
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
