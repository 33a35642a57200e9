"""FencedMixin and the Core helpers: the guard is in the flush's own UPDATE/DELETE."""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from processes import CONTEXT
from sql_models import make_models
from sqlalchemy import BigInteger, Engine, create_engine, event, select, update
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.orm.exc import StaleDataError

import fencing
from fencing.sql import (
    FencedMixin,
    SqlFence,
    allow_unfenced,
    create_tables,
    guarded_delete,
    guarded_update,
)


class DB:
    def __init__(self, url: str) -> None:
        self.url = url
        self.suffix = uuid.uuid4().hex[:10]
        self.Base, self.Invoice, self.Audit = make_models(self.suffix)
        self.engine: Engine = create_engine(url)
        self.Base.metadata.create_all(self.engine)
        self.statements: list[str] = []
        event.listen(self.engine, "before_cursor_execute", self._capture)

    def _capture(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def add(self, *ids: int, token: int = 1) -> None:
        with Session(self.engine) as s:
            s.add_all(self.Invoice(id=i, total=0, fence_token=token) for i in ids)
            s.commit()

    def row(self, id: int) -> tuple[int, int] | None:
        table = self.Invoice.__table__
        with self.engine.connect() as conn:
            found = conn.execute(select(table.c.total, table.c.fence_token).where(table.c.id == id))
            row = found.one_or_none()
        return None if row is None else (row.total, row.fence_token)


@pytest.fixture
def db(sql_url: str) -> Iterator[DB]:
    database = DB(sql_url)
    yield database
    database.Base.metadata.drop_all(database.engine)
    database.engine.dispose()


def test_column_is_bigint_not_null_with_server_default_zero(db: DB) -> None:
    column = db.Invoice.__table__.c.fence_token
    assert isinstance(column.type, BigInteger) and not column.nullable
    assert str(column.server_default.arg) == "0"
    with Session(db.engine) as s:
        s.add(db.Invoice(id=1, total=5))  # inserting needs no token
        s.commit()
    assert db.row(1) == (5, 0)


def test_flush_update_carries_the_guard_in_one_statement(db: DB) -> None:
    db.add(42)
    db.statements.clear()
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 42)
        invoice.total = 100
        invoice.fence_token = 7
        s.commit()
    updates = [sql for sql in db.statements if sql.lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 1
    assert "fence_token <=" in updates[0] and "WHERE" in updates[0]
    after = db.statements[db.statements.index(updates[0]) + 1 :]
    assert not [sql for sql in after if "SELECT" in sql.upper()]  # no read around the write
    assert db.row(42) == (100, 7)


def test_stale_token_is_rejected_by_the_database(db: DB) -> None:
    db.add(1)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        invoice.total, invoice.fence_token = 10, 5
        s.commit()
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        invoice.total, invoice.fence_token = 99, 4
        with pytest.raises(fencing.StaleTokenError) as info:
            s.commit()
        assert isinstance(info.value, StaleDataError)
        assert (info.value.token, info.value.current) == (4, 5)
        assert not s.is_active  # rolled back, like any StaleDataError in a flush
    assert db.row(1) == (10, 5)


def test_writer_with_newest_token_wins_even_after_an_older_wrote(db: DB) -> None:
    """Fencing, not optimistic locking: what was loaded does not matter, the token does."""
    db.add(1)
    with Session(db.engine) as newest, Session(db.engine) as older:
        a = newest.get_one(db.Invoice, 1)
        b = older.get_one(db.Invoice, 1)
        b.total, b.fence_token = 3, 3
        older.commit()
        a.total, a.fence_token = 4, 4
        newest.commit()
    assert db.row(1) == (4, 4)


def test_update_without_a_stamp_is_refused_and_the_opt_out_is_explicit(db: DB) -> None:
    db.add(1, token=3)
    with Session(db.engine) as s:
        s.get_one(db.Invoice, 1).total = 50
        with pytest.raises(fencing.UnfencedWriteError):
            s.commit()
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        invoice.fence_token = 3
        s.commit()  # a stamp is good for one transaction only
        invoice.total = 60
        with pytest.raises(fencing.UnfencedWriteError):
            s.flush()
    with Session(db.engine) as s, allow_unfenced(s):
        s.get_one(db.Invoice, 1).total = 70
        s.commit()
    assert db.row(1) == (70, 3)


def test_opt_out_still_refuses_a_row_rewritten_by_a_newer_token(db: DB) -> None:
    db.add(1, token=3)
    with Session(db.engine) as s, allow_unfenced(s):
        invoice = s.get_one(db.Invoice, 1)
        with db.engine.begin() as conn:
            conn.execute(guarded_update(db.Invoice, 9, db.Invoice.id == 1).values(total=9))
        invoice.total = 1
        with pytest.raises(StaleDataError):
            s.commit()
    assert db.row(1) == (9, 9)


def test_restamping_the_same_token_in_a_new_transaction_is_guarded(db: DB) -> None:
    db.add(1, token=5)
    db.statements.clear()
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        invoice.total, invoice.fence_token = 8, 5
        s.commit()
    assert any("fence_token <=" in sql for sql in db.statements if sql.startswith("UPDATE"))
    assert db.row(1) == (8, 5)


def test_bad_tokens_are_refused_when_stamped(db: DB) -> None:
    invoice = db.Invoice(id=1, total=0)
    with pytest.raises(TypeError):
        invoice.fence_token = True
    with pytest.raises(TypeError):
        invoice.fence_token = "5"
    with pytest.raises(ValueError):
        invoice.fence_token = -1
    with pytest.raises(ValueError, match="2\\*\\*63-1"):  # BIGINT: refused here, not by the driver
        invoice.fence_token = 2**63
    invoice.fence_token = fencing.FenceToken(3, "x")
    assert invoice.fence_token == 3


def test_orm_delete_is_guarded_and_needs_a_stamp(db: DB) -> None:
    db.add(1, 2, token=5)
    with Session(db.engine) as s:
        s.delete(s.get_one(db.Invoice, 1))
        with pytest.raises(fencing.UnfencedWriteError):
            s.flush()
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        invoice.fence_token = 4
        s.delete(invoice)
        with pytest.raises(fencing.StaleTokenError) as info:
            s.commit()
        assert info.value.current == 5
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 2)
        invoice.fence_token = 6
        s.delete(invoice)
        s.commit()
    assert db.row(1) == (0, 5) and db.row(2) is None


def test_core_guarded_update_and_delete(db: DB) -> None:
    db.add(1, 2, 3, token=5)
    table = db.Invoice.__table__
    with db.engine.begin() as conn:
        conn.execute(guarded_update(db.Invoice, 6, table.c.id == 1).values(total=6))
        with pytest.raises(fencing.StaleTokenError) as info:
            conn.execute(guarded_update(table, 5, table.c.id == 1).values(total=-1))
        assert (info.value.token, info.value.current) == (5, 6)
        bulk = conn.execute(guarded_update(table, 5, expect_rows=None).values(total=5))
        assert bulk.rowcount == 2  # row 1 keeps its newer write
        with pytest.raises(fencing.StaleTokenError):
            conn.execute(guarded_delete(table, 5, table.c.id == 1))
        conn.execute(guarded_delete(table, 5, table.c.id == 2))
    assert db.row(1) == (6, 6) and db.row(2) is None and db.row(3) == (5, 5)


def test_the_highest_64_bit_token_is_written_and_guards(db: DB) -> None:
    db.add(1)
    table = db.Invoice.__table__
    top = 2**63 - 1
    with db.engine.begin() as conn:
        conn.execute(guarded_update(table, top, table.c.id == 1, values={"total": 9}))
        with pytest.raises(fencing.StaleTokenError):
            conn.execute(guarded_update(table, top - 1, table.c.id == 1, values={"total": 0}))
    assert db.row(1) == (9, top)


def test_core_guarded_update_with_values_in_the_call(db: DB) -> None:
    db.add(1, 2, token=5)
    table = db.Invoice.__table__
    with db.engine.begin() as conn:
        conn.execute(guarded_update(db.Invoice, 6, table.c.id == 1, values={"total": 6}))
        conn.execute(guarded_update(table, 7, table.c.id == 2, values={table.c.total: 7}))
        with pytest.raises(fencing.StaleTokenError) as info:
            conn.execute(guarded_update(table, 5, table.c.id == 1, values={"total": -1}))
        assert (info.value.token, info.value.current) == (5, 6)
        # A condition chained after the helper still narrows the diagnostic read.
        stale = guarded_update(table, 5, values={"total": -1})
        with pytest.raises(fencing.StaleTokenError) as info:
            conn.execute(stale.where(table.c.id == 1))
        assert (info.value.token, info.value.current) == (5, 6)  # row 1's, not the max 7
        bulk = conn.execute(guarded_update(table, 6, values={"total": 60}, expect_rows=None))
        assert bulk.rowcount == 1  # row 2 keeps its newer write
    assert db.row(1) == (60, 6) and db.row(2) == (7, 7)
    updates = [sql for sql in db.statements if sql.startswith("UPDATE")]
    assert updates and all(sql.count("fence_token <=") == 1 for sql in updates)


def test_values_may_not_set_the_token_and_must_be_a_mapping(db: DB) -> None:
    table = db.Invoice.__table__
    with pytest.raises(ValueError, match="fence_token"):
        guarded_update(table, 1, values={"fence_token": 9})
    with pytest.raises(ValueError, match="fence_token"):
        guarded_update(db.Invoice, 1, values={table.c.fence_token: 9})
    with pytest.raises(TypeError, match="mapping"):
        guarded_update(table, 1, values=[("total", 1)])  # type: ignore[arg-type]


def test_unguarded_core_writes_to_a_fenced_table_are_refused(db: DB) -> None:
    db.add(1)
    table = db.Invoice.__table__
    with db.engine.begin() as conn:
        with pytest.raises(fencing.UnfencedWriteError):
            conn.execute(update(table).values(total=1))
        conn.execute(update(table).values(total=2).execution_options(fencing_unfenced=True))
    with Session(db.engine) as s, pytest.raises(fencing.UnfencedWriteError):
        s.execute(update(db.Invoice).where(db.Invoice.id == 1).values(total=3))
    assert db.row(1) == (2, 1)


def test_unguarded_writes_inside_other_statements_are_refused(db: DB) -> None:
    """An UPDATE wrapped in an ORM ``select(...).from_statement()`` or in a CTE is a write
    too: refused unless guarded (``guarded_update`` inside) or unfenced on purpose."""
    db.add(1, token=5)
    table = db.Invoice.__table__
    stale = update(table).where(table.c.id == 1).values(total=9, fence_token=1)
    wrapped = select(db.Invoice).from_statement(stale.returning(*table.c))
    in_cte = stale.returning(table.c.id).cte("claimed")
    with Session(db.engine) as s:
        with pytest.raises(fencing.UnfencedWriteError):
            s.scalars(wrapped).all()
        with pytest.raises(fencing.UnfencedWriteError):
            s.execute(select(in_cte.c.id)).all()
        with pytest.raises(fencing.UnfencedWriteError):  # a CTE beside a guarded statement
            s.execute(guarded_update(table, 6, table.c.id == 1).add_cte(in_cte))
    assert db.row(1) == (0, 5)
    if not db.engine.dialect.update_returning:
        return  # MySQL, MariaDB: no UPDATE ... RETURNING to run (refused above all the same)
    guarded = guarded_update(table, 6, table.c.id == 1, values={"total": 6}, expect_rows=None)
    with Session(db.engine) as s:
        [row] = s.scalars(select(db.Invoice).from_statement(guarded.returning(*table.c))).all()
        assert (row.total, row.fence_token) == (6, 6)
        s.commit()
    on_purpose = wrapped.execution_options(fencing_unfenced=True)
    with Session(db.engine) as s:
        [row] = s.scalars(on_purpose).all()
        s.commit()
    assert db.row(1) == (9, 1)


def test_an_upsert_of_a_fenced_table_is_refused_unless_unfenced_on_purpose(db: DB) -> None:
    """``INSERT ... ON CONFLICT DO UPDATE`` (MySQL's ``ON DUPLICATE KEY UPDATE``) rewrites
    an existing row with no guard: it could lower the row's token. Refused; ``DO
    NOTHING`` (``INSERT IGNORE``) and the opt-out pass."""
    db.add(1, token=5)
    table = db.Invoice.__table__
    values = {"total": 7, "fence_token": 1}
    if db.engine.dialect.name in ("mysql", "mariadb"):  # ON DUPLICATE KEY UPDATE
        row: Any = mysql.insert(table).values(id=1, **values)
        upsert, clause = row.on_duplicate_key_update(values), "ON DUPLICATE KEY UPDATE"
        no_update = row.prefix_with("IGNORE")
    else:
        pg = db.engine.dialect.name == "postgresql"
        row = (postgresql.insert if pg else sqlite.insert)(table).values(id=1, **values)
        upsert, clause = (
            row.on_conflict_do_update(index_elements=["id"], set_=values),
            "ON CONFLICT",
        )
        no_update = row.on_conflict_do_nothing(index_elements=["id"])
    with db.engine.begin() as conn, pytest.raises(fencing.UnfencedWriteError, match=clause):
        conn.execute(upsert)
    assert db.row(1) == (0, 5)
    with db.engine.begin() as conn:
        conn.execute(no_update)
        conn.execute(upsert.execution_options(fencing_unfenced=True))
    assert db.row(1) == (7, 1)


def test_orm_bulk_update_by_primary_key_is_guarded(db: DB) -> None:
    db.add(1, 2, token=5)
    with Session(db.engine) as s:
        rows = [{"id": 1, "total": 1, "fence_token": 6}, {"id": 2, "total": 1, "fence_token": 6}]
        s.execute(update(db.Invoice), rows)
        s.commit()
        with pytest.raises(fencing.StaleTokenError):
            s.execute(update(db.Invoice), [{"id": 2, "total": 9, "fence_token": 5}])
    assert db.row(2) == (1, 6)


def test_bad_arguments_to_the_core_helpers(db: DB) -> None:
    with pytest.raises(TypeError):
        guarded_update(db.Invoice, "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2\\*\\*63-1"):  # refused before the driver sees it
        guarded_update(db.Invoice, 2**63, values={"total": 1})
    with pytest.raises(ValueError, match="2\\*\\*63-1"):
        guarded_delete(db.Invoice, 2**63)
    with pytest.raises(ValueError):
        guarded_delete(db.Invoice, -1)
    with pytest.raises(ValueError):
        guarded_update(db.Invoice, 1, expect_rows=-2)
    with pytest.raises(TypeError):
        guarded_update(object(), 1)


def test_own_mapper_args_without_the_guard_are_refused() -> None:
    class Base(DeclarativeBase):
        pass

    with pytest.raises(TypeError, match="fenced_mapper_args"):

        class Bad(FencedMixin, Base):
            __tablename__ = "bad_mapper_args"
            __mapper_args__ = {"eager_defaults": True}  # noqa: RUF012
            id: Mapped[int] = mapped_column(primary_key=True)


#: The rows the processes write (not 0: MySQL's auto-increment key takes 0 for "next").
ROW_IDS = [1, 2, 3]


def _writer(url: str, suffix: str, fence_name: str, rounds: int, seed: int) -> None:
    """Take a token, maybe dawdle (so newer tokens overtake it), then write every row."""
    _, Invoice, Audit = make_models(suffix)
    engine = create_engine(url)
    fence = SqlFence(url, fence_name, ttl=5)
    rng = random.Random(seed)
    for _ in range(rounds):
        token = fence.acquire(timeout=60)
        fence.release(token)  # others may now take newer tokens: ours may turn stale
        time.sleep(rng.random() * 0.02)
        for row_id in rng.sample(ROW_IDS, 3):
            with Session(engine) as s:
                invoice = s.get_one(Invoice, row_id)
                invoice.total, invoice.fence_token = token * 10 + row_id, token
                with contextlib.suppress(fencing.StaleTokenError):
                    s.flush()  # the guarded UPDATE first: it holds the row until commit,
                    # int(): PyMySQL writes an int subclass as its str()
                    s.add(Audit(invoice_id=row_id, token=int(token)))  # audit order = write order
                    s.commit()
    engine.dispose()


def test_processes_interleaving_stale_and_fresh_writes(db: DB) -> None:
    if not db.url.startswith("sqlite"):
        create_tables(db.engine)
    db.add(*ROW_IDS, token=0)
    name = f"rows:{db.suffix}"
    workers = [
        CONTEXT.Process(target=_writer, args=(db.url, db.suffix, name, 12, seed))
        for seed in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(180)
        assert worker.exitcode == 0
    audit = db.Audit.__table__
    with db.engine.connect() as conn:
        accepted = conn.execute(select(audit.c.invoice_id, audit.c.token).order_by(audit.c.seq))
        history: dict[int, list[int]] = {}
        for row_id, token in accepted:
            history.setdefault(row_id, []).append(token)
    for row_id in ROW_IDS:
        tokens = history[row_id]
        assert tokens == sorted(tokens)  # no write below the high-water mark ever landed
        assert db.row(row_id) == (tokens[-1] * 10 + row_id, tokens[-1])
    assert sum(len(tokens) for tokens in history.values()) < 4 * 12 * 3  # some were refused
