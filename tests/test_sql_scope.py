"""What fencing.sql installs, and that statements on other tables never enter the guard.

Importing ``fencing.sql`` installs nothing on SQLAlchemy (checked in a fresh process, so
other tests' imports cannot interfere); mapping a ``FencedMixin`` model installs a
cursor check and two ``Session`` listeners, never an ``Engine`` listener, and they reach
engines, connections and sessions made before it. Statements on unfenced tables are
observed through ``fencing.sql._guard.COUNTS``, which counts only statements on fenced
tables: they leave it unchanged and run exactly as written.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sql_models import make_models
from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    Integer,
    MetaData,
    Table,
    create_engine,
    delete,
    event,
    select,
    text,
    update,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import fencing
from fencing.sql import _guard as guard
from fencing.sql import _mixin as mixin
from fencing.sql import guarded_update

TESTS = Path(__file__).resolve().parent

# Run in a fresh interpreter: prints what is installed before and after mapping a model.
PROBE = textwrap.dedent(
    """
    import json
    import sqlalchemy as sa
    from sqlalchemy.engine import Dialect
    from sqlalchemy.orm import Session

    CONNECTION = ["before_execute", "after_execute", "before_cursor_execute",
                  "after_cursor_execute", "engine_connect", "begin", "commit", "rollback"]
    DIALECT = ["do_execute", "do_executemany", "do_execute_no_params", "handle_error"]
    SESSION = ["before_flush", "after_flush", "after_transaction_end", "after_begin",
               "do_orm_execute", "before_commit"]

    def installed():
        engine = sa.create_engine("sqlite://")
        session = Session(engine)
        return {
            "engine": {n: len(getattr(engine.dispatch, n)) for n in CONNECTION},
            "dialect": {n: len(getattr(engine.dialect.dispatch, n)) for n in DIALECT},
            "session": {n: len(getattr(session.dispatch, n)) for n in SESSION},
            "engine_flag": bool(sa.Engine._has_events),
            "dialect_flag": bool(Dialect._has_events),
        }

    out = {"bare": installed()}
    engine = sa.create_engine("sqlite://")  # made before fencing.sql is imported
    session = Session(engine)
    conn = engine.connect()

    import fencing.sql

    out["imported"] = installed()

    from sql_models import make_models

    Base, Invoice, _ = make_models("probe")
    out["mapped"] = installed()
    Base.metadata.create_all(conn)
    conn.commit()
    table = Invoice.__table__
    try:
        conn.execute(sa.update(table).values(total=1))
        out["old_connection"] = "written"
    except fencing.UnfencedWriteError:
        out["old_connection"] = "refused"
    conn.rollback()
    session.add(Invoice(id=1, total=0, fence_token=1))
    session.commit()
    statements = []
    sa.event.listen(engine, "before_cursor_execute",
                    lambda c, cur, sql, *a: statements.append(sql))
    session.get(Invoice, 1).total = 5
    try:
        session.flush()
        out["old_session_unstamped"] = "written"
    except fencing.UnfencedWriteError:
        out["old_session_unstamped"] = "refused"
    session.rollback()
    invoice = session.get(Invoice, 1)
    invoice.total, invoice.fence_token = 5, 2
    session.commit()
    out["old_session_update"] = [s for s in statements if s.startswith("UPDATE")]
    print(json.dumps(out))
    """
)


def _probe() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_import_installs_nothing_and_mapping_installs_no_engine_listener() -> None:
    out = _probe()
    bare = out["bare"]
    assert not any(bare["engine"].values()) and not any(bare["session"].values()), bare
    assert out["imported"] == bare  # importing fencing.sql added no listener anywhere
    mapped = out["mapped"]
    assert not any(mapped["engine"].values()) and not mapped["engine_flag"]
    assert mapped["dialect"] == {
        "do_execute": 1,
        "do_executemany": 1,
        "do_execute_no_params": 1,
        "handle_error": 0,
    }
    assert mapped["session"]["before_flush"] == mapped["session"]["after_transaction_end"] == 1
    assert mapped["session"]["do_orm_execute"] == 0
    # What existed before the first fenced model was mapped is guarded all the same.
    assert out["old_connection"] == "refused"
    assert out["old_session_unstamped"] == "refused"
    [written] = out["old_session_update"]
    assert "fence_token <=" in written


class Plain(DeclarativeBase):
    pass


class PlainRow(Plain):  # an unfenced model with a column that happens to be called fence_token
    __tablename__ = f"plain_rows_{uuid.uuid4().hex[:8]}"
    id: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[int]
    fence_token: Mapped[int] = mapped_column(BigInteger)


class DB:
    def __init__(self, url: str) -> None:
        self.url = url
        self.Base, self.Invoice, _ = make_models(uuid.uuid4().hex[:10])
        self.engine: Engine = create_engine(url)
        self.Base.metadata.create_all(self.engine)
        Plain.metadata.create_all(self.engine)
        self.items = Table(  # unfenced Core table, also with a fence_token column
            f"plain_items_{uuid.uuid4().hex[:8]}",
            MetaData(),
            Column("id", Integer, primary_key=True),
            Column("value", Integer, nullable=False),
            Column("fence_token", BigInteger, nullable=False),
        )
        self.items.create(self.engine)
        self.statements: list[str] = []
        event.listen(self.engine, "before_cursor_execute", self._capture)

    def _capture(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def writes(self) -> list[str]:
        return [s for s in self.statements if s.startswith(("UPDATE", "DELETE"))]


@pytest.fixture
def db(sql_url: str) -> Iterator[DB]:
    database = DB(sql_url)
    yield database
    database.items.drop(database.engine)
    Plain.metadata.drop_all(database.engine)
    database.Base.metadata.drop_all(database.engine)
    database.engine.dispose()


def counts() -> dict[str, int]:
    return dict(vars(guard.COUNTS))


def test_statements_on_unfenced_tables_never_enter_the_guard(db: DB) -> None:
    # The guard is installed (a fenced model is mapped): this is about what it looks at.
    assert all(event.contains(Engine, name, fn) for name, fn in guard._CURSOR_HOOKS)
    assert all(event.contains(Session, name, fn) for name, fn in mixin._SESSION_HOOKS)
    items = db.items
    with db.engine.begin() as conn:
        conn.execute(items.insert(), [{"id": i, "value": 0, "fence_token": 5} for i in (1, 2)])
    with Session(db.engine) as s:
        s.add(PlainRow(id=1, value=0, fence_token=5))
        s.commit()
    before = counts()
    db.statements.clear()
    with db.engine.begin() as conn:
        # Shaped like a flush of a fenced table (key and fence_token compared with binds):
        # on an unfenced table it runs exactly as written, `=` and all.
        done = conn.execute(
            update(items).where(items.c.id == 1, items.c.fence_token == 5).values(value=1)
        )
        assert done.rowcount == 1
        assert conn.execute(update(items).values(value=2)).rowcount == 2
        assert conn.execute(delete(items).where(items.c.id == 2)).rowcount == 1
        conn.execute(update(items).values(value=text("value + 1")))  # no parameters
    with Session(db.engine) as s:
        row = s.get(PlainRow, 1)
        assert row is not None
        row.value, row.fence_token = 3, 4  # a lower "token": nothing guards this table
        s.commit()
        s.execute(update(PlainRow), [{"id": 1, "value": 4, "fence_token": 3}])  # ORM bulk
        s.commit()
    assert counts() == before  # not one statement was examined, guarded or rewritten
    assert not any("<=" in sql for sql in db.writes())
    with db.engine.connect() as conn:
        assert conn.execute(select(items.c.value)).scalar_one() == 3
        assert conn.execute(select(PlainRow.value, PlainRow.fence_token)).one() == (4, 3)

    # The same kinds of statement on the fenced table do go through the guard.
    with Session(db.engine) as s:
        s.add(db.Invoice(id=1, total=0, fence_token=5))
        s.commit()
    with db.engine.begin() as conn:
        conn.execute(guarded_update(db.Invoice, 6, db.Invoice.id == 1, values={"total": 6}))
        with pytest.raises(fencing.UnfencedWriteError):
            conn.execute(update(db.Invoice.__table__).values(total=7))
    after = counts()
    assert after["guarded"] == before["guarded"] + 1
    assert after["refused"] == before["refused"] + 1
    assert after["examined"] >= before["examined"] + 2


def test_fenced_tables_build_guarded_statements_and_plain_ones_do_not(db: DB) -> None:
    table = db.Invoice.__table__
    assert isinstance(table.update(), guard.FencedUpdate)
    assert isinstance(table.delete(), guard.FencedDelete)
    assert isinstance(guarded_update(db.items, 1), guard.FencedUpdate)  # Core helper
    assert type(db.items.update()) is not guard.FencedUpdate
    assert type(Plain.metadata.tables[PlainRow.__tablename__].delete()) is not guard.FencedDelete


def test_unguarded_writes_are_refused_at_the_cursor_unless_opted_out(db: DB) -> None:
    table = db.Invoice.__table__
    with Session(db.engine) as s:
        s.add(db.Invoice(id=1, total=0, fence_token=5))
        s.commit()
    engine = create_engine(db.url)  # an engine that never wrote a fenced row
    try:
        with engine.begin() as conn:
            for statement in (
                update(table).values(total=1),
                update(table).values(total=text("total + 1")),  # no parameters
                delete(table),
            ):
                with pytest.raises(fencing.UnfencedWriteError):
                    conn.execute(statement)
            conn.execute(update(table).values(total=2).execution_options(fencing_unfenced=True))
            unfenced = conn.execution_options(fencing_unfenced=True)
            unfenced.execute(update(table).values(total=text("total + 1")))
        with engine.connect() as conn:
            assert conn.execute(select(table.c.total, table.c.fence_token)).one() == (3, 5)
    finally:
        engine.dispose()


def test_orm_bulk_update_by_key_runs_with_the_guard_at_the_cursor(db: DB) -> None:
    with Session(db.engine) as s:
        s.add_all(db.Invoice(id=i, total=0, fence_token=5) for i in (1, 2))
        s.commit()

    def comment(conn: Any, cursor: Any, sql: str, params: Any, *rest: Any) -> tuple[str, Any]:
        return f"/* traced */ {sql}", params  # as SQL commenters do

    event.listen(db.engine, "before_cursor_execute", comment, retval=True)
    before = counts()
    with Session(db.engine) as s:
        # Row 1 has token 5: `fence_token = 6` would match nothing, `<= 6` matches it.
        s.execute(update(db.Invoice), [{"id": 1, "total": 6, "fence_token": 6}])
        s.commit()
        with pytest.raises(fencing.StaleTokenError) as info:
            s.execute(update(db.Invoice), [{"id": 1, "total": 4, "fence_token": 4}])
        assert (info.value.token, info.value.current) == (4, 6)
    assert counts()["rewritten_at_cursor"] == before["rewritten_at_cursor"] + 2
    table = db.Invoice.__table__
    with db.engine.connect() as conn:
        rows = conn.execute(
            select(table.c.id, table.c.total, table.c.fence_token).order_by(table.c.id)
        )
        assert [tuple(r) for r in rows] == [(1, 6, 6), (2, 0, 5)]


def test_flush_and_helpers_are_guarded_by_the_statement_itself(db: DB) -> None:
    with Session(db.engine) as s:
        s.add(db.Invoice(id=1, total=0, fence_token=5))
        s.commit()
    before = counts()
    with Session(db.engine) as s:
        invoice = s.get(db.Invoice, 1)
        assert invoice is not None
        invoice.total, invoice.fence_token = 1, 6
        s.commit()
    with db.engine.begin() as conn:
        conn.execute(guarded_update(db.Invoice, 7, db.Invoice.id == 1, values={"total": 7}))
    after = counts()
    assert after["guarded"] == before["guarded"] + 2
    assert after["rewritten_at_cursor"] == before["rewritten_at_cursor"]  # nothing left to do
    assert all("fence_token <=" in sql for sql in db.writes())
