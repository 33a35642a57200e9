"""Family ``handoff``: from the holder's release to the waiter (another process) holding.

One hand-off: this process holds the lease and tells the waiter process to acquire;
the waiter says it is about to, and blocks; the holder keeps the lease a little longer
(5 ms plus a uniform random part as long as the waiter's polling period, so polling
peers are caught at a random phase of their sleep), notes the time and releases; the
waiter notes the time it holds. Both clocks are CLOCK_MONOTONIC, shared by processes.
The floor is ``DirectHandoff`` (release hands the lease to the first queued waiter,
whose BLPOP returns its token); asyncio variants are compared with the same floor on
``redis.asyncio`` (``AsyncDirectHandoff``), and both of their times are noted inside the
event loop, as a sync variant's are next to its calls.

Imports redis-py, the harness and the lock registry (the waiter process too).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
from multiprocessing.connection import Connection
from typing import Any

import redis
import redis.asyncio

import locks
from handoff_rig import MIN_HOLD, receive
from harness import Batch, Context, Table, Variant, now_ns, run_rounds

ORDER = [
    locks.FLOOR_HANDOFF,
    locks.AA_HANDOFF,
    locks.REDIS_FENCE,
    locks.FENCED_LOCK,
    "redis-py Lock",
    "python-redis-lock",
    "pottery Redlock (1 master)",
    locks.FLOOR_HANDOFF_ASYNC,
    locks.ASYNC_FENCE,
    locks.ASYNC_FENCED_LOCK,
]


def run(ctx: Context) -> list[Table]:
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    waiter = spawn.Process(target=waiter_main, args=(theirs, ctx.redis_url), daemon=True)
    waiter.start()  # inherits this process's CPU affinity
    client = redis.Redis.from_url(ctx.redis_url)
    aclient = redis.asyncio.Redis.from_url(ctx.redis_url)
    loop = asyncio.new_event_loop()
    variants = [
        Variant(name, _batch(ctx, locks.KINDS[name], client, aclient, loop, ours)) for name in ORDER
    ]
    try:
        rounds, per_round = ctx.scale(4, 20), ctx.scale(8, 10)
        stats = run_rounds(variants, rounds=rounds, per_round=per_round, warmup=2)
    finally:
        ours.send(("stop",))
        waiter.join(10)
        loop.run_until_complete(aclient.aclose())
        loop.close()
        client.close()
    notes = [
        "holder releases -> waiter in another process holds; "
        f"hold {MIN_HOLD * 1e3:.0f} ms + U(0, poll period); ops/s = 1 / mean latency",
    ]
    notes += [f"{k}: {locks.KINDS[k].note}" for k in ORDER if locks.KINDS[k].note]
    for v in variants:  # the raw distribution, for re-plotting
        stats[v.name].extra["samples_us"] = [round(x / 1e3, 1) for x in stats[v.name].samples]
    table = Table(
        "handoff",
        "hand-off latency (release -> waiter in another process holds)",
        [stats[v.name] for v in variants],
        floor=locks.FLOOR_HANDOFF,
        notes=notes,
        floor_of={
            name: locks.FLOOR_HANDOFF_ASYNC for name in (locks.ASYNC_FENCE, locks.ASYNC_FENCED_LOCK)
        },
    )
    return [table]


def _batch(
    ctx: Context,
    kind: locks.LockKind,
    client: redis.Redis,
    aclient: redis.asyncio.Redis,
    loop: asyncio.AbstractEventLoop,
    waiter: Connection,
) -> Batch:
    fence = f"handoff-{kind.name}"
    if kind.is_async:
        ah = kind.make(aclient, fence)

        async def timed_release() -> int:
            start = now_ns()  # inside the loop: the event loop's own start-up is not timed
            await ah.release()
            return start

        def acquire() -> None:
            loop.run_until_complete(ah.acquire())

        def release() -> int:
            return loop.run_until_complete(timed_release())

    else:
        h = kind.make(client, fence)
        acquire = h.acquire

        def release() -> int:
            start = now_ns()
            h.release()
            return start

    def batch(n: int) -> list[int]:
        if ctx.quick and kind.poll:
            n = max(2, n // 4)  # polling peers cost ~100 ms a hand-off
        out = []
        for _ in range(n):
            acquire()
            waiter.send(("go", kind.name, fence))
            receive(waiter, kind.name)  # the waiter is about to block
            time.sleep(MIN_HOLD + random.uniform(0, kind.poll))
            start = release()
            held_at = receive(waiter, kind.name)
            out.append(held_at - start)
        return out

    return batch


async def _held_at(holder: Any) -> int:
    """Acquire, and note the time inside the event loop, as soon as the lease is held."""
    await holder.acquire()
    return now_ns()


def waiter_main(conn: Connection, redis_url: str) -> None:
    """The waiter process: on ("go", kind, fence) acquire, note the time, release, report."""
    client = redis.Redis.from_url(redis_url)
    aclient = redis.asyncio.Redis.from_url(redis_url)
    loop = asyncio.new_event_loop()
    holders: dict[str, Any] = {}
    while True:
        message = conn.recv()
        if message[0] == "stop":
            break
        _, name, fence = message
        kind = locks.KINDS[name]
        holder = holders.get(name)
        if holder is None:
            holder = holders[name] = kind.make(aclient if kind.is_async else client, fence)
        conn.send("ready")
        if kind.is_async:
            held_at = loop.run_until_complete(_held_at(holder))
            loop.run_until_complete(holder.release())
        else:
            holder.acquire()
            held_at = now_ns()
            holder.release()
        conn.send(held_at)
    loop.run_until_complete(aclient.aclose())
    loop.close()
    client.close()
