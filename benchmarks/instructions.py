"""Instructions per uncontended acquire+release, counted by callgrind: a load-proof measure.

``python benchmarks/instructions.py [--variants NAME ...] [--cycles LOW HIGH]``: an
isolated benchmark, not part of ``run.py``. Wall-clock ratios move with the machine's
load; the number of instructions a process executes does not. For each variant it runs
this script under ``valgrind --tool=callgrind`` twice, with ``LOW`` and ``HIGH``
acquire+release cycles after the same warm-up, against one loopback redis-server that
it starts itself (not under valgrind), and prints ``(count(HIGH) - count(LOW)) / (HIGH
- LOW)``: the instructions of one cycle in the client process alone (Python, redis-py,
fencing, the socket calls' user-space side), start-up and warm-up cancelled out.
``PYTHONHASHSEED=0`` and the garbage collector off during the cycles make the blocking
variants' counts repeat to within about 1k instructions a cycle (800 cycles apart). The
asyncio variants' counts move more: how many turns the event loop takes per reply
depends on when the server's reply arrives, which the load decides.

The variants are ``locks.KINDS``'s (the same objects as ``run.py``'s ``acquire`` family),
plus ``fencing.connect(url).fence``/``aio_fence``. ``--rwlock`` counts the read-write
lock's instead (issue 33's budget: a read at most 1.15x the fence on the same engine):
a ``Fence``, ``rw.read`` and ``rw.write`` of ``fencing.RWLock`` on the in-memory issuer,
on that Redis and on a SQLite file in a scratch directory, each printed with its ratio
to the fence of its engine.

Imports redis-py, fencing and the benchmark modules; needs ``valgrind`` on ``PATH``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

import fencing
import locks
from fencing import connect
from fencing.redis import RedisIssuer
from fencing.sql import SqlIssuer
from fencing.testing.servers import RedisServer

CONNECT_FENCE = "fencing.connect(url).fence"
CONNECT_AIO_FENCE = "fencing.connect(url).aio_fence (asyncio)"
DEFAULT = [
    locks.FLOOR_FENCED,
    locks.RAW_SCRIPTS,
    locks.REDIS_FENCE,
    CONNECT_FENCE,
    locks.FENCED_LOCK,
    "redis-py Lock",
    locks.FLOOR_ASYNC,
    locks.ASYNC_FENCE,
    CONNECT_AIO_FENCE,
    locks.ASYNC_REDIS_PY,
]
#: ``--rwlock``'s engines: how a child makes each one's issuer from the Redis url
ENGINES: dict[str, Callable[[str], object]] = {
    "memory": lambda url: fencing.MemoryIssuer(),
    "Redis": lambda url: RedisIssuer(redis.Redis.from_url(url)),
    "SQLite": lambda url: SqlIssuer(f"sqlite:///{tempfile.mkdtemp()}/rwlock.db"),
}
#: ``--rwlock``'s sides, each on every engine: the fence (the floor) and the lock's two
SIDES = ("Fence", "rw.read", "rw.write")
RWLOCK = [f"{engine}: {side}" for engine in ENGINES for side in SIDES]
WARMUP = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", choices=DEFAULT + RWLOCK)
    parser.add_argument("--rwlock", action="store_true", help="the read-write lock's variants")
    parser.add_argument("--cycles", nargs=2, type=int, default=(500, 2500))
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a variant, run under valgrind
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    low, high = args.cycles
    variants = args.variants or (RWLOCK if args.rwlock else DEFAULT)
    if args.child:
        cycles(args.child, args.url, low)
        return
    with RedisServer() as server, tempfile.TemporaryDirectory() as scratch:
        width = max(map(len, variants))
        floors: dict[str, float] = {}
        for name in variants:
            low_count, high_count = (
                count(name, server.url, n, Path(scratch) / "out") for n in (low, high)
            )
            per = (high_count - low_count) / (high - low)
            line = f"{name:<{width}} {per / 1000:8.1f}k instructions per acquire+release"
            engine, _, side = name.partition(": ")
            if name in RWLOCK and side == SIDES[0]:
                floors[engine] = per
            elif name in RWLOCK and engine in floors:
                line += f"  {per / floors[engine]:.2f}x the fence"
            print(line, flush=True)


def count(name: str, url: str, n: int, out: Path) -> int:
    """Instructions of one run of ``name`` with ``n`` cycles, by callgrind."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--child",
        name,
        "--url",
        url,
        "--cycles",
        str(n),
        "0",
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(command, env=env, check=True, capture_output=True)
    match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(match.group(1))


def cycles(name: str, url: str, n: int) -> None:
    """``WARMUP`` then ``n`` acquire+release cycles of ``name`` (the garbage collector
    off for the counted ones)."""
    if name in (CONNECT_AIO_FENCE, *(k for k, v in locks.KINDS.items() if v.is_async)):
        asyncio.run(_async_cycles(name, url, n))
        return
    if name in RWLOCK:
        engine, _, side = name.partition(": ")
        issuer: Any = ENGINES[engine](url)
        rw = fencing.RWLock(issuer, "instructions-rw", locks.TTL)
        sides = {"rw.read": rw.read, "rw.write": rw.write}
        fence = sides.get(side) or fencing.Fence(issuer, "instructions", locks.TTL)

        def cycle() -> None:
            fence.release(fence.acquire())

    elif name == CONNECT_FENCE:
        fence = connect(url).fence("instructions", locks.TTL)

        def cycle() -> None:
            fence.release(fence.acquire())

    else:
        holder = locks.KINDS[name].make(redis.Redis.from_url(url), "instructions")

        def cycle() -> None:
            holder.acquire()
            holder.release()

    for _ in range(WARMUP):
        cycle()
    gc.disable()
    for _ in range(n):
        cycle()


async def _async_cycles(name: str, url: str, n: int) -> None:
    if name == CONNECT_AIO_FENCE:
        fence = connect(url).aio_fence("ainstructions", locks.TTL)

        async def cycle() -> None:
            await fence.release(await fence.acquire())

    else:
        holder = locks.KINDS[name].make(redis.asyncio.Redis.from_url(url), "ainstructions")

        async def cycle() -> None:
            await holder.acquire()
            await holder.release()

    for _ in range(WARMUP):
        await cycle()
    gc.disable()
    for _ in range(n):
        await cycle()


if __name__ == "__main__":
    main()
