"""Family ``acquire``: one uncontended acquire + release, per lease implementation.

Every holder works on its own fence name, so nothing ever waits: this is the cost of
the calls themselves (round trips, Lua, Python). The floor is the raw fenced script
(one EVALSHA INCR+SET, one EVALSHA compare-and-delete); asyncio rows are compared with
the same script driven by ``redis.asyncio``.

Imports redis-py, the harness and the lock registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import redis
import redis.asyncio

import locks
from harness import Batch, Context, Table, Variant, atimed, run_rounds, timed

ORDER = [
    locks.FLOOR_LOCK,
    locks.FLOOR_FENCED,
    locks.AA_FENCED,
    locks.FLOOR_HANDOFF,
    locks.RAW_SCRIPTS,
    locks.REDIS_FENCE,
    locks.FENCED_LOCK,
    "redis-py Lock",
    "python-redis-lock",
    "pottery Redlock (1 master)",
    locks.FLOOR_ASYNC,
    locks.ASYNC_FENCE,
    locks.ASYNC_FENCED_LOCK,
    locks.ASYNC_REDIS_PY,
]


def run(ctx: Context) -> list[Table]:
    client = redis.Redis.from_url(ctx.redis_url)
    aclient = redis.asyncio.Redis.from_url(ctx.redis_url)
    loop = asyncio.new_event_loop()
    variants = []
    for name in ORDER:
        kind = locks.KINDS[name]
        if kind.is_async:
            holder = kind.make(aclient, f"uncontended:{name}")
            variants.append(Variant(name, _async_batch(loop, holder)))
        else:
            holder = kind.make(client, f"uncontended:{name}")
            variants.append(Variant(name, timed(_cycle(holder))))
    try:
        stats = run_rounds(
            variants,
            rounds=ctx.scale(10, 40),
            per_round=ctx.scale(60, 100),
            warmup=50,
        )
    finally:
        loop.run_until_complete(aclient.aclose())
        loop.close()
        client.close()
    table = Table(
        "acquire",
        "uncontended acquire + release (one holder, own fence name)",
        [stats[v.name] for v in variants],
        floor=locks.FLOOR_FENCED,
        floor_of={
            name: locks.FLOOR_ASYNC
            for name in (locks.ASYNC_FENCE, locks.ASYNC_FENCED_LOCK, locks.ASYNC_REDIS_PY)
        },
    )
    return [table]


def _cycle(holder: locks.Holder) -> Callable[[], None]:
    acquire, release = holder.acquire, holder.release

    def cycle() -> None:
        acquire()
        release()

    return cycle


def _async_batch(loop: asyncio.AbstractEventLoop, holder: locks.AsyncHolder) -> Batch:
    async def cycle() -> None:
        await holder.acquire()
        await holder.release()

    return atimed(loop, cycle)
