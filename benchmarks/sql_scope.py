"""A plain UPDATE on an unfenced table, timed in child processes that differ in one thing:
whether ``fencing.sql`` was imported (and a ``FencedMixin`` model mapped) or not.

Import state is process-wide: SQLAlchemy keeps class-level listeners on ``Engine`` and
``Session`` and sets ``Engine._has_events`` for good, so removing fencing's listeners
inside one process is not the same as never importing it. The honest floor is another
process, so each variant here is a child:

- ``plain``: never imports fencing (checked in the child);
- ``fenced``: imports ``fencing.sql``, maps a ``FencedMixin`` model and writes a row of it
  through the same engine (a guarded flush and a ``guarded_update``), so everything
  fencing installs is installed (checked in the child), then runs the same UPDATE on
  the same kind of unfenced table.

The parent drives the children with ``ScopeChild.batch(n)`` (a ``harness.Batch``):
one line ``n`` on the child's stdin, one line of ``n`` latencies in ns back, each
timed in the child around one transaction (the pipe is not in them), so the harness
interleaves the children's batches with the other variants' in rounds.

``python benchmarks/sql_scope.py``: the micro-benchmark (not part of ``run.py``), in-memory
SQLite in each child (no I/O: only Python is timed), two ``plain`` children (A/A) and
one ``fenced``; prints medians, ratios and the difference per statement.
``python benchmarks/sql_scope.py child MODE URL ROW``: one child (used by the above and
by the ``guards`` family).

The parent side imports only the standard library (and the harness for the micro run);
a child imports SQLAlchemy and, in mode ``fenced``, fencing.sql.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

MODES = ("plain", "fenced")


class ScopeChild:
    """A child process running plain UPDATEs of row ``row`` of ``bench_items`` at ``url``."""

    def __init__(self, mode: str, url: str, row: int) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "child", mode, url, str(row)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.describe = self._line()  # the child's setup report, once it is ready

    def _line(self) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            raise RuntimeError(f"sql_scope child ({self.mode}) exited with {code}")
        return line.strip()

    def batch(self, n: int) -> list[int]:
        assert self._proc.stdin is not None
        self._proc.stdin.write(f"{n}\n")
        self._proc.stdin.flush()
        return [int(x) for x in self._line().split()]

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


# -- child ---------------------------------------------------------------------------------


def _child(mode: str, url: str, row: int) -> None:
    import itertools

    import sqlalchemy as sa

    meta = sa.MetaData()
    items = sa.Table(  # an unfenced table: no fence column, never mapped by FencedMixin
        "bench_items",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
    )
    engine = sa.create_engine(url)
    if url in ("sqlite://", "sqlite:///:memory:"):  # the micro run: a private database
        meta.create_all(engine)
        with engine.begin() as conn:
            conn.execute(sa.insert(items), [{"id": row, "value": 0}])
    if mode == "fenced":
        describe = _load_fencing(sa, engine, row)
    else:
        loaded = sorted(name for name in sys.modules if name.split(".")[0] == "fencing")
        if loaded:
            raise RuntimeError(f"the plain child imported {loaded}")
        describe = "fencing never imported"
    values = itertools.count(1)
    statement = sa.update(items).where(items.c.id == row)
    now = time.perf_counter_ns

    def update() -> None:
        with engine.begin() as conn:
            conn.execute(statement.values(value=next(values)))

    print(describe, flush=True)
    for line in sys.stdin:
        n = int(line)
        out = []
        for _ in range(n):
            start = now()
            update()
            out.append(now() - start)
        print(" ".join(map(str, out)), flush=True)
    engine.dispose()


def _load_fencing(sa: Any, engine: Any, row: int) -> str:
    """Import fencing.sql, map a fenced model and write it through ``engine``; check hooks."""
    from sqlalchemy.orm import DeclarativeBase, Session, mapped_column

    from fencing.sql import FencedMixin, _guard, _mixin, guarded_update

    class Base(DeclarativeBase):
        pass

    class FencedRow(FencedMixin, Base):
        __tablename__ = "bench_scope_fenced"
        id = mapped_column(sa.Integer, primary_key=True)
        value = mapped_column(sa.Integer, nullable=False)

    Base.metadata.create_all(engine)  # the same engine then writes fenced rows, guarded
    with engine.begin() as conn:
        clear = sa.delete(FencedRow).where(FencedRow.id == row)
        conn.execute(clear.execution_options(fencing_unfenced=True))
        conn.execute(sa.insert(FencedRow), [{"id": row, "value": 0}])
    with Session(engine) as session, session.begin():
        fenced = session.get(FencedRow, row)
        assert fenced is not None
        fenced.value, fenced.fence_token = 1, 1
    with engine.begin() as conn:
        conn.execute(guarded_update(FencedRow, 2, FencedRow.id == row, values={"value": 2}))
    hooks: list[tuple[Any, str, Any]] = [(sa.Engine, n, fn) for n, fn in _guard._CURSOR_HOOKS]
    hooks += [(Session, name, fn) for name, fn in _mixin._SESSION_HOOKS]
    missing = [name for target, name, fn in hooks if not sa.event.contains(target, name, fn)]
    if missing or _guard.COUNTS.guarded != 2:
        raise RuntimeError(f"fencing.sql loaded and used, yet missing {missing}")
    return (
        "fencing.sql imported, a FencedMixin model mapped and written on this engine;"
        f" Engine events: {sa.Engine._has_events}"
    )


# -- the micro run -------------------------------------------------------------------------

PLAIN = "plain UPDATE, process without fencing"
AA = "A/A: plain UPDATE, 2nd process without fencing"
FENCED = "plain UPDATE, process with fencing.sql + fenced model"


def main(argv: list[str] | None = None) -> None:
    import argparse
    import statistics
    import tempfile
    from contextlib import ExitStack

    from harness import Variant, run_rounds

    parser = argparse.ArgumentParser(description="plain UPDATE with and without fencing.sql")
    parser.add_argument("--db", choices=["memory", "file", "postgresql"], default="memory")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        if args.db == "memory":
            url = "sqlite://"  # each child its own in-memory database: no I/O at all
        elif args.db == "file":
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="sql-scope-"))
            url = f"sqlite:///{tmp}/scope.db"
        else:
            from fencing.testing.servers import PostgresServer

            url = stack.enter_context(PostgresServer()).url
        if args.db != "memory":
            create_rows(url, (1, 2, 3))
        children = [
            (PLAIN, ScopeChild("plain", url, 1)),
            (AA, ScopeChild("plain", url, 2)),
            (FENCED, ScopeChild("fenced", url, 3)),
        ]
        for _, child in children:
            stack.callback(child.close)
        variants = [Variant(name, child.batch) for name, child in children]
        per_round = 250 if args.db == "memory" else 20
        stats = run_rounds(variants, rounds=args.rounds, per_round=per_round, warmup=per_round)
    floor = statistics.median(stats[PLAIN].samples)
    print(f"{args.db}: one UPDATE per transaction, each variant in its own process")
    for name, child in children:
        median = statistics.median(stats[name].samples)
        print(
            f"{name:<54} {median / 1e3:7.2f} us  {median / floor:5.3f}x"
            f"  {(median - floor) / 1e3:+6.2f} us   ({child.describe})"
        )


def create_rows(url: str, rows: tuple[int, ...]) -> None:
    """Create ``bench_items`` at ``url`` if missing and the given rows (value 0) in it."""
    import sqlalchemy as sa

    meta = sa.MetaData()
    items = sa.Table(
        "bench_items",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
    )
    engine = sa.create_engine(url)
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.delete(items).where(items.c.id.in_(rows)))
        conn.execute(sa.insert(items), [{"id": row, "value": 0} for row in rows])
    engine.dispose()


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
