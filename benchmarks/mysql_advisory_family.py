"""``lease=advisory`` on MariaDB (``GET_LOCK``) against the bare lock it is made of.

``python benchmarks/mysql_advisory_family.py``: not part of ``run.py`` (as
``mysql_family.py``). A throwaway MariaDB (``fencing.testing.servers.MariaDBServer``),
one process, one uncontended acquire + release at a time:

- floor: ``SELECT GET_LOCK(name, 0)`` then ``SELECT RELEASE_LOCK(name)`` on one PyMySQL
  connection in autocommit, kept open (what a hand-written ``GET_LOCK`` costs); ``A/A``
  is the same on a second connection (noise);
- statements: the issuer's own acquire (``GET_LOCK`` and the token's upsert in one
  statement) and its ``RELEASE_LOCK``, sent the same way: what the token costs in SQL;
- ``lease=advisory``: ``AdvisoryFence.acquire(timeout=0)`` + ``release``.

Rounds alternate between the variants; the medians of each are printed, with their
ratio to the floor.

``--instructions``: instead of time, the instructions the client executes per operation,
counted by callgrind as ``mysql_family.py --instructions`` counts them (load-proof).

Imports PyMySQL, SQLAlchemy, fencing.sql, ``mysql_family``'s counting and the harness.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql
import sqlalchemy as sa

from fencing.sql import AdvisoryFence, AdvisoryIssuer, create_tables
from fencing.sql._advisory_statements import MYSQL_STATEMENTS, lock_params
from fencing.sql._driver import compiled
from fencing.testing.servers import MariaDBServer
from harness import timed
from mysql_family import per_operation, run_child

ROUNDS, PER_ROUND = 9, 300
FLOOR = "floor: GET_LOCK + RELEASE_LOCK"


def _bare(url: str, name: str, acquire: sa.TextClause, release: sa.TextClause) -> Callable[[], Any]:
    """``acquire`` then ``release`` on one PyMySQL connection, with the parameters each
    statement names (as the issuer's driver sends them)."""
    parsed = sa.make_url(url)
    conn = pymysql.connect(
        host=parsed.host,
        port=parsed.port or 3306,
        user=parsed.username,
        database=parsed.database,
        autocommit=True,
    )
    cursor = conn.cursor()
    dialect = sa.create_engine(url).dialect
    (take, take_names, _), (give, give_names, _) = (
        compiled(statement, dialect) for statement in (acquire, release)
    )
    params = lock_params(name)
    take_args = {key: params[key] for key in take_names}
    give_args = {key: params[key] for key in give_names}

    def op() -> None:
        cursor.execute(take, take_args)
        assert cursor.rowcount > 0 or cursor.fetchone() == (1,)
        cursor.execute(give, give_args)
        cursor.fetchone()

    return op


def variants(url: str, issuer: AdvisoryIssuer) -> dict[str, Callable[[], Any]]:
    get_lock = sa.text("SELECT GET_LOCK(:lock, 0)")
    release_lock = sa.text("SELECT RELEASE_LOCK(:lock)")
    issued = MYSQL_STATEMENTS.acquire, MYSQL_STATEMENTS.release
    fence = AdvisoryFence(url, "bench:advisory", ttl=30, issuer=issuer)
    return {
        FLOOR: _bare(url, "bench:floor", get_lock, release_lock),
        "A/A: floor, 2nd copy": _bare(url, "bench:aa", get_lock, release_lock),
        "the issuer's two statements, bare PyMySQL": _bare(url, "bench:sql", *issued),
        "fencing lease=advisory (AdvisoryFence)": lambda: fence.release(fence.acquire(timeout=0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, variant, n = args.child
        run_child(variants(url, AdvisoryIssuer(url))[variant], int(n))
        return
    with MariaDBServer() as server, tempfile.TemporaryDirectory() as scratch:
        create_tables(sa.create_engine(server.url))
        issuer = AdvisoryIssuer(server.url)
        ops = variants(server.url, issuer)
        if args.instructions:
            counts = {
                name: per_operation(__file__, [server.url, name], Path(scratch)) for name in ops
            }
            unit = "k instructions"
        else:
            counts, unit = _medians(ops), "µs"
        for name, count in counts.items():
            print(f"{name:45} {count:7.0f} {unit}  {count / counts[FLOOR]:.2f}x")
        issuer.close()  # before the server stops


def _medians(ops: dict[str, Callable[[], Any]]) -> dict[str, float]:
    samples: dict[str, list[int]] = {name: [] for name in ops}
    for _ in range(ROUNDS):
        for name, op in ops.items():
            samples[name] += timed(op)(PER_ROUND)
    return {name: statistics.median(times) / 1000 for name, times in samples.items()}


if __name__ == "__main__":
    main()
