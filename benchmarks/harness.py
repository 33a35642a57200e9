"""The measuring machinery every benchmark family shares: pinning, rounds, statistics.

A *variant* is one thing being measured (the floor, a peer library, a fencing class). A
family runs its variants interleaved in rounds (round-robin, the starting variant
rotated each round) so that drift on a shared 2-core VM (other processes, CPU frequency,
the page cache) hits every variant alike instead of whichever ran last.

Imports only the standard library.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: One batch of a variant: run ``n`` operations, return each one's latency in ns.
Batch = Callable[[int], list[int]]

now_ns = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: comparable across processes


def pin(cpu: int | None) -> str:
    """Pin this process (and so every child started after it) to ``cpu``; describe it.

    Children inherit the affinity: the redis-server and PostgreSQL the run starts, and
    the hand-off waiter processes, all land on the same CPU as the client. A loopback
    round trip then costs a context switch instead of a cross-CPU wake-up, whose latency
    swings between 80 and 300 us on a small VM and makes ratios unstable.
    """
    if cpu is None:
        cpus = sorted(os.sched_getaffinity(0))
        return f"not pinned (client and servers may run on CPUs {cpus})"
    os.sched_setaffinity(0, {cpu})
    return f"client, redis-server, PostgreSQL and waiter processes pinned to CPU {cpu}"


def timed(op: Callable[[], Any]) -> Batch:
    """A batch that times each call of ``op`` on its own."""

    def batch(n: int) -> list[int]:
        out = []
        for _ in range(n):
            start = now_ns()
            op()
            out.append(now_ns() - start)
        return out

    return batch


def atimed(loop: asyncio.AbstractEventLoop, op: Callable[[], Awaitable[Any]]) -> Batch:
    """The asyncio ``timed``: each ``await op()`` timed on its own, on ``loop``."""

    async def many(n: int) -> list[int]:
        out = []
        for _ in range(n):
            start = now_ns()
            await op()
            out.append(now_ns() - start)
        return out

    def batch(n: int) -> list[int]:
        return loop.run_until_complete(many(n))

    return batch


@dataclass
class Context:
    """What every family needs: the servers the run started, a scratch directory, scale."""

    quick: bool
    redis_url: str
    #: Starts PostgreSQL on first call (None: not started for this run).
    pg_url: Callable[[], str | None]
    workdir: Path
    cpu: int | None

    def scale(self, quick: int, full: int) -> int:
        return quick if self.quick else full


@dataclass
class Stats:
    """Latencies of one variant (ns), and what the table shows of them."""

    name: str
    samples: list[int] = field(default_factory=list)
    #: Set by families that count completed operations over a wall-clock span instead.
    ops_per_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def quantile(self, q: float) -> float:
        """Nearest-rank quantile in ns (q=0.5: median, q=0.99: p99)."""
        ordered = sorted(self.samples)
        if not ordered:
            return math.nan
        index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
        return float(ordered[index])

    @property
    def median(self) -> float:
        return self.quantile(0.5)

    @property
    def p99(self) -> float:
        return self.quantile(0.99)

    @property
    def rate(self) -> float:
        """Operations per second: counted if the family counted, else 1 / mean latency."""
        if self.ops_per_s is not None:
            return self.ops_per_s
        if not self.samples:
            return math.nan
        return 1e9 * len(self.samples) / sum(self.samples)


@dataclass
class Variant:
    """A named thing to measure, with the batch that measures it."""

    name: str
    batch: Batch
    is_floor: bool = False
    note: str = ""


def run_rounds(
    variants: Sequence[Variant], rounds: int, per_round: int, warmup: int = 0
) -> dict[str, Stats]:
    """Run every variant ``per_round`` times per round, round-robin, ``rounds`` rounds.

    The variant that goes first moves by one each round. ``warmup`` operations of each
    variant run first and are discarded (connections, script cache, code paths).
    """
    stats = {v.name: Stats(v.name) for v in variants}
    if warmup:
        for variant in variants:
            variant.batch(warmup)
    for r in range(rounds):
        shift = r % len(variants)
        for variant in [*variants[shift:], *variants[:shift]]:
            stats[variant.name].samples.extend(variant.batch(per_round))
    return stats


W = 50  # width of the variant column


@dataclass
class Table:
    """One family's results: rows of ``Stats`` and the floor they are compared with."""

    family: str
    title: str
    rows: list[Stats]
    floor: str | None
    notes: list[str] = field(default_factory=list)
    #: Rows compared with another floor than the family's (e.g. asyncio with asyncio).
    floor_of: dict[str, str] = field(default_factory=dict)
    #: An extra column: (header, value of a row).
    column: tuple[str, Callable[[Stats], str]] | None = None

    def floor_stats(self, row: str) -> Stats | None:
        own = row in self.floor_of.values()  # a floor row is its own floor
        name = row if own else self.floor_of.get(row, self.floor)
        return next((s for s in self.rows if s.name == name), None)

    def ratios(self, stats: Stats) -> tuple[float, float]:
        """(median, p99) of ``stats`` over its floor's: time ratios, 1.00 = the floor."""
        floor = self.floor_stats(stats.name)
        if floor is None or not stats.samples or not floor.samples:
            return math.nan, math.nan
        return stats.median / floor.median, stats.p99 / floor.p99

    def render(self) -> str:
        head = f"{'variant':<{W}} {'n':>6} {'median':>10} {'p99':>10} {'ops/s':>9}"
        head += f" {'x floor':>8} {'p99 x fl':>8}"
        if self.column:
            head += f" {self.column[0]:>12}"
        lines = [f"== {self.title}", head, "-" * len(head)]
        for s in self.rows:
            r50, r99 = self.ratios(s)
            mark = " (floor)" if s.name == self.floor or s.name in self.floor_of.values() else ""
            line = (
                f"{(s.name + mark)[:W]:<{W}} {len(s.samples):>6} {fmt_ns(s.median):>10}"
                f" {fmt_ns(s.p99):>10} {s.rate:>9.0f} {fmt_ratio(r50):>8} {fmt_ratio(r99):>8}"
            )
            if self.column:
                line += f" {self.column[1](s):>12}"
            lines.append(line)
        lines.extend(f"   {note}" for note in self.notes)
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The table as GitHub markdown (for docs/performance.md)."""
        head = ["variant", "n", "median", "p99", "ops/s", "x floor", "p99 x floor"]
        if self.column:
            head.append(self.column[0])
        lines = [f"**{self.title}**", "", "| " + " | ".join(head) + " |"]
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
        for s in self.rows:
            r50, r99 = self.ratios(s)
            own = s.name == self.floor or s.name in self.floor_of.values()
            name = f"{s.name} *(floor)*" if own else s.name
            cells = [name, str(len(s.samples)), fmt_ns(s.median), fmt_ns(s.p99)]
            cells += [f"{s.rate:.0f}", fmt_ratio(r50), fmt_ratio(r99)]
            if self.column:
                cells.append(self.column[1](s))
            lines.append("| " + " | ".join(cells) + " |")
        lines += [""] + [f"- {note}" for note in self.notes if "/tmp/" not in note]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        rows = []
        for s in self.rows:
            r50, r99 = self.ratios(s)
            rows.append(
                {
                    "variant": s.name,
                    "n": len(s.samples),
                    "median_us": s.median / 1e3,
                    "p99_us": s.p99 / 1e3,
                    "ops_per_s": s.rate,
                    "median_x_floor": r50,
                    "p99_x_floor": r99,
                    "floor": self.floor_of.get(s.name, self.floor),
                    **s.extra,
                }
            )
        return {
            "family": self.family,
            "title": self.title,
            "floor": self.floor,
            "rows": rows,
            "notes": self.notes,
        }


def fmt_ns(ns: float) -> str:
    if math.isnan(ns):
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.0f} us"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def fmt_ratio(r: float) -> str:
    return "-" if math.isnan(r) else f"{r:.2f}x"
