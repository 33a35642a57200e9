"""The SQL issuer and guard on MariaDB against the bare statements they run.

``python benchmarks/mysql_family.py``: not part of ``run.py``. A throwaway MariaDB
(``fencing.testing.servers.MariaDBServer``), one process, one connection at a time:

- acquire + release: ``SqlFence`` against the same statements (the upsert, the read of
  the token, the release's UPDATE) sent by hand on one SQLAlchemy connection, each in
  its own transaction as the issuer does;
- a guarded UPDATE (``guarded_update``) against the plain UPDATE of the same row.

Rounds alternate between the variants; the medians of each are printed, and their ratio.

Imports SQLAlchemy, fencing and the benchmark harness.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from fencing.sql import SqlFence, create_tables, guarded_update
from fencing.sql._issuer_statements import statements
from fencing.testing.servers import MariaDBServer
from harness import timed

ROUNDS, PER_ROUND = 7, 300


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


def main() -> None:
    with MariaDBServer() as server:
        create_tables(sa.create_engine(server.url))
        for title, variants in (("acquire + release", _issuer), ("UPDATE", _guard)):
            medians = _medians(variants(server.url))
            (base, base_us), (ours, ours_us) = medians.items()
            print(f"{title}: {base} {base_us:.0f} µs, {ours} {ours_us:.0f} µs", end="")
            print(f" ({ours_us / base_us:.2f}x)")


if __name__ == "__main__":
    main()
