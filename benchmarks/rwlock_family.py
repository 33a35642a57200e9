"""Family ``rwlock``: the read-write lock of issue 33 against the fence, on each engine.

One uncontended acquire + release of ``rw.read`` and of ``rw.write``, against the
fence's own acquire + release on the same issuer (the floor of each engine): the issue's
budget is a read at most 1.15x the fence. Engines: the in-memory issuer, the run's
Redis, and a SQLite file in the run's scratch directory.

Imports fencing, redis-py and the harness.
"""

from __future__ import annotations

from collections.abc import Callable

import redis

import fencing
from fencing.redis import RedisIssuer
from fencing.sql import SqlIssuer
from harness import Context, Table, Variant, run_rounds, timed


def run(ctx: Context) -> list[Table]:
    client = redis.Redis.from_url(ctx.redis_url)
    issuers: dict[str, Callable[[], object]] = {
        "memory": fencing.MemoryIssuer,
        "Redis": lambda: RedisIssuer(client),
        "SQLite": lambda: SqlIssuer(f"sqlite:///{ctx.workdir / 'rwlock.db'}"),
    }
    variants: list[Variant] = []
    floor_of: dict[str, str] = {}
    for engine, make in issuers.items():
        issuer = make()
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
    finally:
        client.close()
    return [
        Table(
            "rwlock",
            "read-write lock: uncontended acquire + release, against the fence's on each engine",
            [stats[v.name] for v in variants],
            floor=None,
            floor_of=floor_of,
        )
    ]
