"""Family ``throughput``: acquire+release cycles per second with 1, 4 and 16 clients.

Each client is a thread (asyncio: a task) with its own holder and connection, looping
acquire -> release for a fixed span; ops/s counts the cycles completed within the span.
"Distinct names": each client has its own fence, so nobody waits (the cost of the calls
under concurrency). "One name": all clients share one fence, so every cycle but the
first is a hand-off (the cost of waiting, and whether waiters are served fairly: the
JSON has each cell's fewest and most cycles per client). Pinned to one CPU, clients and
server share it: this is about overheads and waiting, not parallel speed-up.
The floor is the direct hand-off script with the same number of clients.

Imports redis-py, the harness and the lock registry.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis
import redis.asyncio

import locks
from harness import Context, Stats, Table, Variant, now_ns, run_rounds

ORDER = [
    locks.FLOOR_HANDOFF,
    locks.REDIS_FENCE,
    locks.FENCED_LOCK,
    "redis-py Lock",
    "python-redis-lock",
    "pottery Redlock (1 master)",
    locks.ASYNC_FENCE,
]
CLIENTS = (1, 4, 16)
MODES = ("distinct names", "one name")


def run(ctx: Context) -> list[Table]:
    span = 0.15 if ctx.quick else 0.8
    rounds = ctx.scale(1, 3)
    client = redis.Redis.from_url(ctx.redis_url)
    aclient = redis.asyncio.Redis.from_url(ctx.redis_url, max_connections=64)
    loop = asyncio.new_event_loop()
    kinds = [locks.KINDS[k] for k in ORDER]
    cells: list[tuple[str, int, locks.LockKind, Stats]] = []
    variants = []
    for mode in MODES:
        for n in CLIENTS:
            for kind in kinds:
                stats = Stats(_row_name(kind.name, n), ops_per_s=0.0)
                stats.extra.update(clients=n, mode=mode, ops=0, seconds=0.0)
                cell = _Cell(ctx, kind, mode, n, client, aclient, loop, stats, span)
                cells.append((mode, n, kind, stats))
                variants.append(Variant(f"{mode}/{stats.name}", cell.run))
    try:
        run_rounds(variants, rounds=rounds, per_round=1)  # each cell keeps its own stats
    finally:
        loop.run_until_complete(aclient.aclose())
        loop.close()
        client.close()
    tables = []
    for mode in MODES:
        rows = [s for m, _, _, s in cells if m == mode]
        floor_of = {s.name: _row_name(locks.FLOOR_HANDOFF, n) for m, n, _, s in cells if m == mode}
        notes = [
            f"{rounds} x {span:.2f} s per cell, cells interleaved; ops/s = cycles / span;"
            " client min-max: cycles of the slowest and fastest client",
        ]
        tables.append(
            Table(
                f"throughput-{mode.replace(' ', '-')}",
                f"throughput, {mode}: acquire+release cycles/s with 1, 4, 16 clients",
                rows,
                floor=None,
                notes=notes,
                floor_of=floor_of,
                column=("client min-max", _spread),
            )
        )
    return tables


def _spread(stats: Stats) -> str:
    """Fewest and most cycles one client completed: unfair waiting shows here."""
    return f"{stats.extra.get('min_client_ops', 0)}-{stats.extra.get('max_client_ops', 0)}"


def _row_name(kind: str, clients: int) -> str:
    return f"{kind} x{clients}"


class _Cell:
    """One (kind, mode, clients) cell: its holders persist across rounds."""

    def __init__(
        self,
        ctx: Context,
        kind: locks.LockKind,
        mode: str,
        clients: int,
        client: redis.Redis,
        aclient: redis.asyncio.Redis,
        loop: asyncio.AbstractEventLoop,
        stats: Stats,
        span: float,
    ) -> None:
        self.kind, self.loop, self.stats, self.span = kind, loop, stats, span
        base = f"tp-{mode[:3]}-{clients}-{kind.name}"
        names = [base if mode == "one name" else f"{base}-{i}" for i in range(clients)]
        conn: Any = aclient if kind.is_async else client
        self.holders = [kind.make(conn, name) for name in names]
        self.per_client = [0] * clients

    def run(self, _n: int) -> list[int]:
        deadline = now_ns() + int(self.span * 1e9)
        if self.kind.is_async:

            async def clients() -> list[list[int]]:
                tasks = [self._async_client(h, deadline) for h in self.holders]
                return await asyncio.gather(*tasks)

            results = self.loop.run_until_complete(clients())
        else:
            results = [[] for _ in self.holders]
            threads = [
                threading.Thread(target=self._client, args=(h, deadline, out))
                for h, out in zip(self.holders, results, strict=True)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        stats = self.stats
        for i, latencies in enumerate(results):
            stats.samples.extend(latencies)
            self.per_client[i] += len(latencies)
        stats.extra["ops"] += sum(len(r) for r in results)
        stats.extra["seconds"] += self.span
        stats.ops_per_s = stats.extra["ops"] / stats.extra["seconds"]
        stats.extra["min_client_ops"] = min(self.per_client)
        stats.extra["max_client_ops"] = max(self.per_client)
        return []

    @staticmethod
    def _client(holder: locks.Holder, deadline: int, out: list[int]) -> None:
        acquire, release = holder.acquire, holder.release
        while True:
            start = now_ns()
            acquire()
            release()
            end = now_ns()
            if end > deadline:
                return
            out.append(end - start)

    @staticmethod
    async def _async_client(holder: locks.AsyncHolder, deadline: int) -> list[int]:
        out: list[int] = []
        while True:
            start = now_ns()
            await holder.acquire()
            await holder.release()
            end = now_ns()
            if end > deadline:
                return out
            out.append(end - start)
