"""The SQL issuer and guard on MariaDB against the bare statements they run.

``python benchmarks/mysql_family.py``: not part of ``run.py``. A throwaway MariaDB
(``fencing.testing.servers.MariaDBServer``), one process, one connection at a time:

- acquire + release: ``SqlFence`` against the same statements (the upsert, the read of
  the token, the release's UPDATE) sent by hand on one SQLAlchemy connection, each in
  its own transaction as the issuer does;
- a guarded UPDATE (``guarded_update``) against the plain UPDATE of the same row.

Rounds alternate between the variants; the medians of each are printed, and their ratio.

``--instructions``: instead of time, the instructions the client process executes per
operation, counted by callgrind (``valgrind`` on ``PATH``) over ``LOW`` and ``HIGH``
operations after the same warm-up (``benchmarks/instructions.py``'s method): what
fencing adds on the client, which the machine's load does not move (the server's work
and the round trips' wait are not in it).

Imports SQLAlchemy, fencing and the benchmark harness.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from fencing.sql import SqlFence, create_tables, guarded_update
from fencing.sql._issuer_statements import statements
from fencing.testing.servers import MariaDBServer
from harness import timed

ROUNDS, PER_ROUND = 7, 300
#: Operations counted by ``--instructions``, after ``PER_ROUND`` of warm-up.
LOW, HIGH = 300, 1300


def _medians(variants: dict[str, Callable[[], Any]]) -> dict[str, float]:
    samples: dict[str, list[int]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, op in variants.items():
            samples[name] += timed(op)(PER_ROUND)
    return {name: statistics.median(times) / 1000 for name, times in samples.items()}


def _issuer(url: str) -> dict[str, Callable[[], Any]]:
    fence = SqlFence(url, "bench:fence", ttl=30)
    engine = sa.create_engine(url, isolation_level="READ COMMITTED")
    take, read_back = statements("mysql")["acquire"]  # type: ignore[misc]
    release = statements("mysql")["release"]
    assert not isinstance(release, tuple)
    conn = engine.connect()

    def bare() -> None:
        params = {"fence": "bench:bare", "holder_id": "h", "ttl": 30.0}
        with conn.begin():
            conn.execute(take, params)
            token = conn.execute(read_back, params).scalar()
        with conn.begin():
            conn.execute(release, {**params, "lease_token": token})

    return {"bare statements": bare, "SqlFence": lambda: fence.release(fence.acquire())}


def _guard(url: str) -> dict[str, Callable[[], Any]]:
    rows = sa.MetaData()
    table = sa.Table(
        "bench_rows",
        rows,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("value", sa.Integer),
        sa.Column("fence_token", sa.BigInteger, nullable=False),
    )
    engine = sa.create_engine(url)
    rows.drop_all(engine)  # a fresh row per run (--instructions runs it once per count)
    rows.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert().values(id=1, value=0, fence_token=1))
    conn = engine.connect()

    def guarded() -> None:
        with conn.begin():
            conn.execute(guarded_update(table, 1, table.c.id == 1, values={"value": 1}))

    def unguarded() -> None:
        with conn.begin():  # built per call too, as the guarded one
            conn.execute(sa.update(table).where(table.c.id == 1).values(value=1))

    return {"plain UPDATE": unguarded, "guarded_update": guarded}


FAMILIES = {"acquire + release": _issuer, "UPDATE": _guard}


def instructions(script: str, child: list[str], n: int, out: Path) -> int:
    """Instructions of ``script --child *child n`` (its client running ``n`` operations
    after the warm-up, ``run_child``), counted by callgrind into ``out``."""
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    command += [script, "--child", *child, str(n)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(command, env=env, check=True, capture_output=True)
    match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(match.group(1))


def per_operation(script: str, child: list[str], scratch: Path) -> float:
    """Thousands of instructions of one operation of ``script``'s ``child``: the counts
    of ``HIGH`` and ``LOW`` operations apart, start-up and warm-up cancelled out."""
    out = scratch / "out"
    high, low = (instructions(script, child, n, out) for n in (HIGH, LOW))
    return (high - low) / (HIGH - LOW) / 1000


def run_child(op: Callable[[], Any], n: int) -> None:
    """``op`` ``PER_ROUND`` times (the warm-up), then ``n`` times with the garbage
    collector off: what ``instructions`` counts."""
    for _ in range(PER_ROUND):
        op()
    gc.disable()
    for _ in range(n):
        op()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, family, variant, n = args.child
        run_child(FAMILIES[family](url)[variant], int(n))
        return
    with MariaDBServer() as server, tempfile.TemporaryDirectory() as scratch:
        create_tables(sa.create_engine(server.url))
        for title, variants in FAMILIES.items():
            if args.instructions:
                count = {
                    name: per_operation(__file__, [server.url, title, name], Path(scratch))
                    for name in variants(server.url)
                }
                unit = "k instructions"
            else:
                count, unit = _medians(variants(server.url)), "µs"
            (base, base_n), (ours, ours_n) = count.items()
            print(f"{title}: {base} {base_n:.0f} {unit}, {ours} {ours_n:.0f} {unit}", end="")
            print(f" ({ours_n / base_n:.2f}x)")


if __name__ == "__main__":
    main()
