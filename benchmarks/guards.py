"""Family ``guards``: what checking the token at the resource costs, next to the same
write without a check.

- SQL (SQLite file, PostgreSQL): one UPDATE of one row in its own transaction, plain vs
  fenced (``... AND fence_token <= :token``, rowcount verified): hand-written Core SQL,
  fencing's Core helper and ``FencedMixin`` through the ORM (each against the plain
  statement of the same layer). And what fencing costs statements on other tables: the
  plain UPDATE of an unfenced table in a child process that imported ``fencing.sql``,
  mapped a ``FencedMixin`` model and wrote it on the same engine, against the same
  UPDATE in child processes that never imported fencing (``sql_scope.py``).
- File: ``FileStore.write`` vs a plain write + fsync + rename of the same bytes (and the
  same plus an fsync of the directory, which a durable rename needs).
- Callable: ``guard(fn)(token, ...)`` vs calling ``fn`` directly.
- Claims (``guards-claim-*``): what closing the read-then-write window costs. A claim +
  the write against the write alone, for ``FileStore``, SQL rows (ORM and Core, SQLite
  and PostgreSQL) and a call guarded by a ``RedisMark``; and the fenced read
  (``fenced_get``: claim and load in one ``UPDATE ... RETURNING``) against a plain
  ``SELECT`` + the fenced UPDATE of the flush.

Every write uses a fresh, increasing token, so every guarded write is accepted.
Imports SQLAlchemy, redis-py, fencing and the harness.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from harness import Batch, Context, Table, Variant, now_ns, run_rounds, timed
from sql_scope import ScopeChild

DATA = os.urandom(4096)  # one 4 KiB record


def orm_update(
    engine: sa.Engine, tokens: Iterator[int], model: Any, fenced: bool
) -> Callable[[], None]:
    """One ORM transaction: load row 1, set its value (and its fence token if fenced)."""

    def update() -> None:
        token = next(tokens)
        with Session(engine) as session, session.begin():
            row = session.get_one(model, 1)
            row.value = token
            if fenced:
                row.fence_token = token

    return update


def run(ctx: Context) -> list[Table]:
    tables = [_sql(ctx, "sqlite", f"sqlite:///{ctx.workdir / 'bench.db'}")]
    pg_url = ctx.pg_url()
    if pg_url is not None:
        tables.append(_sql(ctx, "postgresql", pg_url))
    tables.append(_file(ctx))
    tables.append(_callable(ctx))
    tables += _claims(ctx, pg_url)
    return tables


def _rounds(ctx: Context, variants: list[Variant], quick: int, full: int) -> Any:
    return run_rounds(variants, rounds=ctx.scale(quick, full), per_round=20, warmup=10)


# -- SQL ---------------------------------------------------------------------------------

PLAIN_CORE = "plain UPDATE (Core)"
AA_CORE = "A/A: plain UPDATE (Core), 2nd copy"
PLAIN_CORE_LOADED = "plain UPDATE (Core), fencing.sql loaded"
FENCED_SQL = "fenced UPDATE, hand-written (Core)"
FENCED_HELPER = "fencing.sql.guarded_update (Core)"
PLAIN_ORM = "plain UPDATE (ORM flush)"
FENCED_ORM = "fencing.sql.FencedMixin (ORM flush)"
PROC_PLAIN = "plain UPDATE, process without fencing"
PROC_AA = "A/A: plain UPDATE, 2nd process without fencing"
PROC_LOADED = "plain UPDATE, process with fencing.sql"


class _Base(DeclarativeBase):
    pass


class _PlainRow(_Base):
    __tablename__ = "bench_plain_rows"
    id: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[int]
    fence_token: Mapped[int] = mapped_column(sa.BigInteger)


def _fenced_model() -> Any:
    """The ORM model with ``FencedMixin``, or None before fencing.sql exists."""
    try:
        from fencing.sql import FencedMixin
    except ImportError:
        return None

    class FencedRow(FencedMixin, _Base):
        __tablename__ = "bench_fenced_rows"
        id: Mapped[int] = mapped_column(primary_key=True)
        value: Mapped[int]

    return FencedRow


_FencedRow = _fenced_model()


@contextmanager
def _fencing_sql_unloaded() -> Iterator[None]:
    """Run the block as a process that never imported fencing.sql would (nearly).

    Once a ``FencedMixin`` model is mapped, fencing.sql has a cursor check on every
    dialect (``do_execute``, ``do_executemany``, ``do_execute_no_params``) and two
    ``Session`` listeners (``before_flush``, ``after_transaction_end``); the plain floors
    run with those removed and the dialects' event flag cleared (the benchmark reaches
    into private modules for exactly this). The ``sql_scope`` rows compare with real
    processes that never imported fencing instead.
    """
    try:
        from fencing.sql import _guard, _mixin
    except ImportError:
        yield
        return
    hooks: list[tuple[Any, str, Any]] = [(sa.Engine, n, fn) for n, fn in _guard._CURSOR_HOOKS]
    hooks += [(Session, name, fn) for name, fn in _mixin._SESSION_HOOKS]
    hooks = [hook for hook in hooks if sa.event.contains(*hook)]
    for hook in hooks:
        sa.event.remove(*hook)
    flag = Dialect._has_events
    Dialect._has_events = False  # nothing else listens on dialects in this process
    try:
        yield
    finally:
        for hook in hooks:
            sa.event.listen(*hook)
        Dialect._has_events = flag


def _unloaded(op: Callable[[], Any]) -> Batch:
    run = timed(op)

    def batch(n: int) -> list[int]:
        with _fencing_sql_unloaded():
            return run(n)

    return batch


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
    for metadata in (meta, _Base.metadata):
        metadata.drop_all(engine)
        metadata.create_all(engine)
    rows = [{"id": i, "value": 0, "fence_token": 0} for i in (1, 2, 3, 4, 5, 6, 7, 8)]
    with engine.begin() as conn:
        conn.execute(sa.insert(items), rows)
        conn.execute(sa.insert(_PlainRow), rows[:1])
        if _FencedRow is not None:
            conn.execute(sa.insert(_FencedRow), rows[:1])
    tokens = itertools.count(1)

    def plain_core(rid: int) -> Callable[[], None]:
        def update() -> None:
            with engine.begin() as conn:
                conn.execute(sa.update(items).where(items.c.id == rid).values(value=next(tokens)))

        return update

    def fenced_core() -> None:
        token = next(tokens)
        with engine.begin() as conn:
            result = conn.execute(
                sa.update(items)
                .where(items.c.id == 2, items.c.fence_token <= token)
                .values(value=token, fence_token=token)
            )
            if result.rowcount != 1:
                raise RuntimeError("fenced update rejected")

    def orm(model: Any, fenced: bool) -> Callable[[], None]:
        return orm_update(engine, tokens, model, fenced)

    variants = [
        Variant(PLAIN_CORE, _unloaded(plain_core(1))),
        Variant(AA_CORE, _unloaded(plain_core(5))),
        Variant(FENCED_SQL, _unloaded(fenced_core)),
    ]
    notes = [
        "each op: begin, one UPDATE of one row, commit (ORM: begin, get, flush, commit)",
        "plain and hand-written rows run with fencing.sql's cursor check and session"
        " listeners removed",
    ]
    children = [
        (PROC_PLAIN, ScopeChild("plain", url, 6)),
        (PROC_AA, ScopeChild("plain", url, 7)),
        (PROC_LOADED, ScopeChild("fenced", url, 8)),
    ]
    notes.append(
        "process rows: the same plain Core UPDATE of an unfenced table, timed in child"
        " processes; with fencing.sql: a FencedMixin model also mapped and written"
        " (flush, guarded_update) on the same engine"
    )
    try:
        from fencing.sql import guarded_update
    except ImportError:
        notes.append("not in this checkout yet: fencing.sql")
    else:

        def helper() -> None:
            token = next(tokens)
            with engine.begin() as conn:
                conn.execute(guarded_update(items, token, items.c.id == 4, values={"value": token}))

        variants += [
            Variant(PLAIN_CORE_LOADED, timed(plain_core(3))),
            Variant(FENCED_HELPER, timed(helper)),
            Variant(PLAIN_ORM, _unloaded(orm(_PlainRow, False))),
            Variant(FENCED_ORM, timed(orm(_FencedRow, True))),
        ]
    variants += [Variant(name, child.batch) for name, child in children]
    try:
        stats = _rounds(ctx, variants, 8, 30)
    finally:
        for _, child in children:
            child.close()
    engine.dispose()
    return Table(
        f"guards-sql-{dialect}",
        f"guard overhead, SQL on {dialect}: one UPDATE per transaction",
        [stats[v.name] for v in variants],
        floor=PLAIN_CORE,
        notes=notes,
        floor_of={FENCED_ORM: PLAIN_ORM, PROC_AA: PROC_PLAIN, PROC_LOADED: PROC_PLAIN},
    )


# -- file --------------------------------------------------------------------------------

PLAIN_FILE = "plain write + fsync + rename"
AA_FILE = "A/A: plain write + fsync + rename, 2nd copy"
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
        Variant(AA_FILE, timed(_plain_writer(base / "plain-2", False))),
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


# -- claims ------------------------------------------------------------------------------

LOAD_FLUSH = "get + fenced flush (SELECT, UPDATE)"
LOAD_CLAIM_FLUSH = "get + claim + fenced flush (SELECT, UPDATE RETURNING, UPDATE)"
FENCED_GET_FLUSH = "fenced_get + fenced flush (UPDATE RETURNING, UPDATE)"
CORE_WRITE = "guarded_update (Core)"
CORE_CLAIM_WRITE = "claim_rows + guarded_update (Core)"
STORE_WRITE = "FileStore.write"
STORE_CLAIM_WRITE = "FileStore.claim + FileStore.write"
STORE_CLAIM_READ_WRITE = "FileStore.claim + read + write"
MARK_CALL = "guard(fn, mark=RedisMark) call"
MARK_CLAIM_CALL = "RedisMark claim + guarded call"


def _claims(ctx: Context, pg_url: str | None) -> list[Table]:
    try:
        from fencing.sql import claim  # noqa: F401 (present from the claims on)
    except ImportError:
        return []
    tables = [_claims_sql(ctx, "sqlite", f"sqlite:///{ctx.workdir / 'claims.db'}")]
    if pg_url is not None:
        tables.append(_claims_sql(ctx, "postgresql", pg_url))
    tables += [_claims_file(ctx), _claims_redis(ctx)]
    return tables


def _claims_sql(ctx: Context, dialect: str, url: str) -> Table:
    from fencing.sql import claim, claim_rows, fenced_get, guarded_update

    assert _FencedRow is not None
    engine = sa.create_engine(url)
    table = _FencedRow.__table__
    _Base.metadata.drop_all(engine)
    _Base.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(table), [{"id": i, "value": 0, "fence_token": 0} for i in (1, 2)])
    tokens = itertools.count(1)

    def load_flush(claims: bool) -> Callable[[], None]:
        def change() -> None:
            token = next(tokens)
            with Session(engine) as session, session.begin():
                row = session.get_one(_FencedRow, 1)
                if claims:
                    claim(session, row, token)
                else:
                    row.fence_token = token
                row.value = row.value + 1

        return change

    def fenced_get_flush() -> None:
        token = next(tokens)
        with Session(engine) as session, session.begin():
            row = fenced_get(session, _FencedRow, 1, token)
            assert row is not None
            row.value = row.value + 1

    def core(claims: bool) -> Callable[[], None]:
        def write() -> None:
            token = next(tokens)
            with engine.begin() as conn:
                if claims:
                    claim_rows(conn, table, token, table.c.id == 2)
                conn.execute(guarded_update(table, token, table.c.id == 2, values={"value": 1}))

        return write

    variants = [
        Variant(LOAD_FLUSH, timed(load_flush(False))),
        Variant(LOAD_CLAIM_FLUSH, timed(load_flush(True))),
        Variant(FENCED_GET_FLUSH, timed(fenced_get_flush)),
        Variant(CORE_WRITE, timed(core(False))),
        Variant(CORE_CLAIM_WRITE, timed(core(True))),
    ]
    stats = _rounds(ctx, variants, 8, 30)
    returning = engine.dialect.update_returning  # known once a connection was made
    engine.dispose()
    return Table(
        f"guards-claim-sql-{dialect}",
        f"claims, SQL on {dialect}: load, change, commit one FencedMixin row",
        [stats[v.name] for v in variants],
        floor=LOAD_FLUSH,
        notes=[
            "each op: one transaction; ORM rows add 1 to the row's value under a new token",
            f"UPDATE ... RETURNING on this database: {returning}",
            "claim_rows: the claiming UPDATE and a SELECT of the newest matching token",
        ],
        floor_of={CORE_CLAIM_WRITE: CORE_WRITE},
    )


def _claims_file(ctx: Context) -> Table:
    from fencing import FileStore

    base = ctx.workdir / "claims"
    base.mkdir(exist_ok=True)
    store = FileStore(base / "store")
    tokens = itertools.count(1)

    def claim_write(reads: bool) -> Callable[[], None]:
        def change() -> None:
            token = next(tokens)
            store.claim(token)
            data = store.read() if reads else DATA
            store.write(data, token)

        return change

    variants = [
        Variant(STORE_WRITE, timed(lambda: store.write(DATA, next(tokens)))),
        Variant(STORE_CLAIM_WRITE, timed(claim_write(False))),
        Variant(STORE_CLAIM_READ_WRITE, timed(claim_write(True))),
    ]
    stats = _rounds(ctx, variants, 8, 30)
    return Table(
        "guards-claim-file",
        "claims, file: a 4 KiB FileStore written with a new token",
        [stats[v.name] for v in variants],
        floor=STORE_WRITE,
        notes=[f"4 KiB records in {base}; a claim rewrites the record (same data, new token)"],
    )


def _claims_redis(ctx: Context) -> Table:
    import redis

    from fencing import RedisMark, guard

    client = redis.Redis.from_url(ctx.redis_url)
    box = [0]

    def apply(value: int) -> None:
        box[0] = value

    guarded = guard(apply, mark=RedisMark(client, "bench:claims:mark"), name="bench")
    tokens = itertools.count(1)

    def claim_call() -> None:
        token = next(tokens)
        guarded.claim(token)
        guarded(token, token)

    variants = [
        Variant(MARK_CALL, timed(lambda: guarded(next(tokens), 1))),
        Variant(MARK_CLAIM_CALL, timed(claim_call)),
    ]
    stats = _rounds(ctx, variants, 8, 30)
    client.close()
    return Table(
        "guards-claim-redis",
        "claims, Redis mark: a guarded call with a new token",
        [stats[v.name] for v in variants],
        floor=MARK_CALL,
        notes=["fn stores one int; each op is one EVALSHA (two with the claim)"],
    )
