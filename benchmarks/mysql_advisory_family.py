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

Imports PyMySQL, SQLAlchemy, fencing.sql and the benchmark harness.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import pymysql
import sqlalchemy as sa

from fencing.sql import AdvisoryFence, AdvisoryIssuer, create_tables
from fencing.sql._advisory_statements import MYSQL_STATEMENTS, lock_params
from fencing.sql._driver import compiled
from fencing.testing.servers import MariaDBServer
from harness import timed

ROUNDS, PER_ROUND = 9, 300
FLOOR = "floor: GET_LOCK + RELEASE_LOCK"


def _bare(
    server: MariaDBServer, name: str, acquire: sa.TextClause, release: sa.TextClause
) -> Callable[[], Any]:
    """``acquire`` then ``release`` on one PyMySQL connection, with the parameters each
    statement names (as the issuer's driver sends them)."""
    conn = pymysql.connect(
        host="127.0.0.1", port=server.port, user="fencing", database="fencing", autocommit=True
    )
    cursor = conn.cursor()
    dialect = sa.create_engine(server.url).dialect
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


def variants(server: MariaDBServer, issuer: AdvisoryIssuer) -> dict[str, Callable[[], Any]]:
    get_lock = sa.text("SELECT GET_LOCK(:lock, 0)")
    release_lock = sa.text("SELECT RELEASE_LOCK(:lock)")
    issued = MYSQL_STATEMENTS.acquire, MYSQL_STATEMENTS.release
    fence = AdvisoryFence(server.url, "bench:advisory", ttl=30, issuer=issuer)
    return {
        FLOOR: _bare(server, "bench:floor", get_lock, release_lock),
        "A/A: floor, 2nd copy": _bare(server, "bench:aa", get_lock, release_lock),
        "the issuer's two statements, bare PyMySQL": _bare(server, "bench:sql", *issued),
        "fencing lease=advisory (AdvisoryFence)": lambda: fence.release(fence.acquire(timeout=0)),
    }


def main() -> None:
    with MariaDBServer() as server:
        create_tables(sa.create_engine(server.url))
        issuer = AdvisoryIssuer(server.url)
        ops = variants(server, issuer)
        samples: dict[str, list[int]] = {name: [] for name in ops}
        for _ in range(ROUNDS):
            for name, op in ops.items():
                samples[name] += timed(op)(PER_ROUND)
        medians = {name: statistics.median(times) / 1000 for name, times in samples.items()}
        for name, us in medians.items():
            print(f"{name:45} {us:7.0f} µs  {us / medians[FLOOR]:.2f}x")
        issuer.close()  # before the server stops


if __name__ == "__main__":
    main()
