"""Family ``guards``: what checking the token at the resource costs, next to the same
write without a check.

- SQL (SQLite file, PostgreSQL): one UPDATE of one row in its own transaction, plain vs
  fenced (``... AND fence_token <= :token``, rowcount verified): hand-written Core SQL,
  fencing's Core helper and ``FencedMixin`` through the ORM (each against the plain
  statement of the same layer).
- File: ``FileStore.write`` vs a plain write + fsync + rename of the same bytes (and the
  same plus an fsync of the directory, which a durable rename needs).
- Callable: ``guard(fn)(token, ...)`` vs calling ``fn`` directly.

Every write uses a fresh, increasing token, so every guarded write is accepted.
Imports SQLAlchemy, redis-py, fencing and the harness.
"""

from __future__ import annotations

import importlib
import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from harness import Batch, Context, Table, Variant, now_ns, run_rounds, timed

DATA = os.urandom(4096)  # one 4 KiB record


def run(ctx: Context) -> list[Table]:
    tables = [_sql(ctx, "sqlite", f"sqlite:///{ctx.workdir / 'bench.db'}")]
    pg_url = ctx.pg_url()
    if pg_url is not None:
        tables.append(_sql(ctx, "postgresql", pg_url))
    tables.append(_file(ctx))
    tables.append(_callable(ctx))
    return tables


def _rounds(ctx: Context, variants: list[Variant], quick: int, full: int) -> Any:
    return run_rounds(variants, rounds=ctx.scale(quick, full), per_round=20, warmup=10)


# -- SQL ---------------------------------------------------------------------------------

PLAIN_CORE = "plain UPDATE (Core)"
FENCED_SQL = "fenced UPDATE, hand-written (Core)"
FENCED_HELPER = "fencing.sql guarded update (Core)"
PLAIN_ORM = "plain UPDATE (ORM flush)"
FENCED_ORM = "fencing.sql.FencedMixin (ORM flush)"


def _sql(ctx: Context, dialect: str, url: str) -> Table:
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    items = sa.Table(
        "bench_items",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
        sa.Column("fence_token", sa.BigInteger, nullable=False),
    )
    meta.drop_all(engine)
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(items), [{"id": i, "value": 0, "fence_token": 0} for i in (1, 2)])
    tokens = itertools.count(1)

    plain = (
        sa.update(items).where(items.c.id == sa.bindparam("rid")).values(value=sa.bindparam("v"))
    )
    fenced = (
        sa.update(items)
        .where(items.c.id == sa.bindparam("rid"), items.c.fence_token <= sa.bindparam("tok"))
        .values(value=sa.bindparam("v"), fence_token=sa.bindparam("tok"))
    )

    def plain_update() -> None:
        with engine.begin() as conn:
            conn.execute(plain, {"rid": 1, "v": next(tokens)})

    def fenced_update() -> None:
        token = next(tokens)
        with engine.begin() as conn:
            result = conn.execute(fenced, {"rid": 2, "tok": token, "v": token})
            if result.rowcount != 1:
                raise RuntimeError("fenced update rejected")

    variants = [
        Variant(PLAIN_CORE, timed(plain_update)),
        Variant(FENCED_SQL, timed(fenced_update)),
    ]
    notes = []
    extra, missing = _sql_fencing_variants(engine, tokens)
    variants += extra
    if missing:
        notes.append(f"not in this checkout yet: {missing}")
    stats = _rounds(ctx, variants, 8, 30)
    engine.dispose()
    return Table(
        f"guards-sql-{dialect}",
        f"guard overhead, SQL on {dialect}: one UPDATE per transaction",
        [stats[v.name] for v in variants],
        floor=PLAIN_CORE,
        notes=notes,
        floor_of={FENCED_ORM: PLAIN_ORM},
    )


def _sql_fencing_variants(
    engine: sa.Engine, tokens: itertools.count[int]
) -> tuple[list[Variant], str]:
    """fencing.sql's helpers, once they exist in this checkout."""
    try:
        importlib.import_module("fencing.sql")
    except ImportError:
        return [], "fencing.sql"
    return [], "fencing.sql (API not wired into the benchmark yet)"


# -- file --------------------------------------------------------------------------------

PLAIN_FILE = "plain write + fsync + rename"
PLAIN_FILE_DIR = "plain write + fsync + rename + fsync(dir)"
FILESTORE = "fencing.FileStore.write"


def _plain_writer(path: Path, sync_dir: bool) -> Callable[[], None]:
    tmp = path.with_name(path.name + ".tmp")

    def write() -> None:
        with open(tmp, "wb") as file:
            file.write(DATA)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
        if sync_dir:
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    return write


def _file(ctx: Context) -> Table:
    # On the real disk (not a tmpfs), so fsync costs what it costs.
    base = ctx.workdir / "files"
    base.mkdir(exist_ok=True)
    variants = [
        Variant(PLAIN_FILE, timed(_plain_writer(base / "plain", False))),
        Variant(PLAIN_FILE_DIR, timed(_plain_writer(base / "plain-dir", True))),
    ]
    notes = [f"4 KiB records in {base}"]
    try:
        from fencing import FileStore
    except ImportError:
        notes.append(f"not in this checkout yet: {FILESTORE}")
    else:
        store = FileStore(base / "store")
        tokens = itertools.count(1)
        variants.append(Variant(FILESTORE, timed(lambda: store.write(DATA, next(tokens)))))
    stats = _rounds(ctx, variants, 8, 30)
    return Table(
        "guards-file",
        "guard overhead, file: replace a 4 KiB file durably",
        [stats[v.name] for v in variants],
        floor=PLAIN_FILE,
        notes=notes,
    )


# -- callable ----------------------------------------------------------------------------

DIRECT = "direct call fn(x)"
CALLS = 100


def _per_call(op: Callable[[], Any]) -> Batch:
    """A batch whose samples are the mean of ``CALLS`` calls (the clock costs ~50 ns)."""

    def batch(n: int) -> list[int]:
        out = []
        for _ in range(n):
            start = now_ns()
            for _ in range(CALLS):
                op()
            out.append((now_ns() - start) // CALLS)
        return out

    return batch


def _callable(ctx: Context) -> Table:
    box = [0]

    def apply(value: int) -> None:
        box[0] = value

    tokens = itertools.count(1)
    variants = [Variant(DIRECT, _per_call(lambda: apply(next(tokens))))]
    notes = [
        "fn stores one int: the rows show the guard's own cost per call",
        f"each sample times {CALLS} calls and is divided by {CALLS}",
    ]
    try:
        from fencing import guard
    except ImportError:
        notes.append("not in this checkout yet: fencing.guard")
    else:
        guarded = guard(apply)
        variants.append(
            Variant("fencing.guard(fn) (MemoryMark)", _per_call(lambda: guarded(next(tokens), 1)))
        )
    stats = run_rounds(variants, rounds=ctx.scale(10, 40), per_round=50, warmup=10)
    return Table(
        "guards-callable",
        "guard overhead, callable: guard(fn)(token, x) vs fn(x)",
        [stats[v.name] for v in variants],
        floor=DIRECT,
        notes=notes,
    )
