"""Claims on fenced SQL rows: ``claim``, ``claim_rows`` and ``fenced_get`` (blocking and
asyncio), on SQLite and PostgreSQL.

The read-then-write window they close, as Hypothesis generates it, is in
test_statemachine_claims.py; here each promise is checked on its own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sql_models import make_models
from sqlalchemy import Engine, create_engine, event, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import fencing
import fencing.sql.aio
from fencing.sql import FencedMixin, StaleRowError, claim, claim_rows, fenced_get


class DB:
    """Fresh fenced tables on one database, with every statement sent captured."""

    def __init__(self, url: str) -> None:
        self.Base, self.Invoice, _ = make_models(uuid.uuid4().hex[:10])
        self.table = self.Invoice.__table__
        self.engine: Engine = create_engine(url)
        self.Base.metadata.create_all(self.engine)
        self.statements: list[str] = []
        event.listen(self.engine, "before_cursor_execute", self._capture)

    def _capture(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(" ".join(statement.split()))

    def add(self, *ids: int, token: int = 1, total: int = 0) -> None:
        with Session(self.engine) as s:
            s.add_all(self.Invoice(id=i, total=total, fence_token=token) for i in ids)
            s.commit()

    def row(self, id: int) -> tuple[int, int] | None:
        query = select(self.table.c.total, self.table.c.fence_token).where(self.table.c.id == id)
        with self.engine.connect() as conn:
            found = conn.execute(query).one_or_none()
        return None if found is None else (found.total, found.fence_token)

    def sent(self) -> list[str]:
        """The statements sent since the last call (and forget them)."""
        sent, self.statements[:] = list(self.statements), []
        return sent


@pytest.fixture
def db(sql_url: str) -> Iterator[DB]:
    database = DB(sql_url)
    yield database
    database.Base.metadata.drop_all(database.engine)
    database.engine.dispose()


def one_claim(db: DB) -> str:
    """The claim just sent: one ``UPDATE ... RETURNING`` that refreshes the row, or, where
    the database has no ``UPDATE ... RETURNING`` (MySQL, MariaDB), the UPDATE then a
    SELECT of the row."""
    if db.engine.dialect.update_returning:
        [sent] = db.sent()
        assert "RETURNING" in sent
    else:
        sent, load = db.sent()
        assert load.startswith("SELECT") and "fence_token <=" not in load
    assert sent.startswith("UPDATE") and "fence_token <=" in sent
    return sent


def test_claim_raises_the_token_in_one_statement_and_keeps_the_data(db: DB) -> None:
    db.add(1, token=3, total=10)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        db.sent()
        claim(s, invoice, 5)
        sent = one_claim(db)
        assert "total" not in sent.split(" WHERE ")[0], "a claim must set the token only"
        assert invoice.fence_token == 5 and not s.dirty
        s.commit()
    assert db.row(1) == (10, 5)


def test_claim_refreshes_a_row_loaded_before_it(db: DB) -> None:
    """What the holder computes from after the claim is the row as it is now, not as it
    was loaded: an older holder's write that landed in between is seen, not dropped."""
    db.add(1, token=3, total=10)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        with db.engine.begin() as conn:  # an older holder (token 4) writes meanwhile
            conn.execute(fencing.sql.guarded_update(db.table, 4, values={"total": 11}))
        claim(s, invoice, 5)
        assert (invoice.total, invoice.fence_token) == (11, 5)
        invoice.total += 10
        s.commit()
    assert db.row(1) == (21, 5)


def test_claimed_row_flushes_guarded_by_the_claim(db: DB) -> None:
    """No need to set ``fence_token`` again after a claim: the row is stamped."""
    db.add(1, token=3)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        claim(s, invoice, 5)
        invoice.total = 7
        db.sent()
        s.commit()
    [update] = [sql for sql in db.sent() if sql.startswith("UPDATE")]
    assert "fence_token <=" in update
    assert db.row(1) == (7, 5)


def test_claim_closes_the_read_then_write_window(db: DB) -> None:
    """A (token 4) loads; B (token 5) loads; A writes first; B writes from its old read.
    Without a claim both writes are accepted and A's change is lost; with B's claim
    before its read, A's write is refused and nothing is lost."""
    for id, claims in ((1, False), (2, True)):
        db.add(id, token=3, total=100)
        with Session(db.engine, expire_on_commit=False) as a, Session(db.engine) as b:
            row_a = a.get_one(db.Invoice, id)
            if claims:
                found = fenced_get(b, db.Invoice, id, 5)
                assert found is not None
                row_b = found
                b.commit()  # (uncommitted, the claim's row lock would make A wait for B)
            else:
                row_b = b.get_one(db.Invoice, id)
            row_a.total, row_a.fence_token = row_a.total + 1, 4  # A: +1
            if claims:
                with pytest.raises(StaleRowError):
                    a.commit()
            else:
                a.commit()  # accepted: nothing above 4 was written yet
            assert db.row(id) == ((100, 5) if claims else (101, 4))
            row_b.fence_token = 5
            row_b.total = 110  # B: +10 on what it read (100)
            b.commit()
        # Without the claim A's accepted +1 is gone; with it, A was told (StaleRowError).
        assert db.row(id) == (110, 5)


def test_claim_below_the_row_token_is_refused_and_equal_is_a_no_op(db: DB) -> None:
    db.add(1, token=6, total=10)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        with pytest.raises(StaleRowError) as info:
            claim(s, invoice, 5)
        assert isinstance(info.value, fencing.StaleTokenError)
        assert (info.value.token, info.value.current) == (5, 6)
        assert invoice.fence_token == 6
        claim(s, invoice, fencing.FenceToken(6, "f"))
        s.commit()
    assert db.row(1) == (10, 6)


def test_claim_of_a_deleted_row_is_refused(db: DB) -> None:
    db.add(1, token=1)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        with db.engine.begin() as conn:
            conn.execute(fencing.sql.guarded_delete(db.table, 2, db.table.c.id == 1))
        with pytest.raises(StaleRowError) as info:
            claim(s, invoice, 3)
        assert info.value.current is None and "no longer exists" in str(info.value)


@pytest.mark.parametrize(
    ("token", "error"),
    [(True, TypeError), ("5", TypeError), (5.0, TypeError), (None, TypeError),
     (-1, ValueError), (2**63, ValueError)],
)  # fmt: skip
def test_bad_tokens_claim_nothing_and_send_nothing(db: DB, token: Any, error: type) -> None:
    db.add(1, token=3)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        db.sent()
        with pytest.raises(error):
            claim(s, invoice, token)
        with pytest.raises(error):
            fenced_get(s, db.Invoice, 1, token)
        with db.engine.begin() as conn, pytest.raises(error):
            claim_rows(conn, db.table, token)
        assert db.sent() == []
    assert db.row(1) == (0, 3)


def test_bad_rows_and_sessions_are_refused_before_any_sql(db: DB) -> None:
    db.add(1)
    with Session(db.engine) as s, Session(db.engine) as other:
        invoice = s.get_one(db.Invoice, 1)
        db.sent()
        with pytest.raises(TypeError, match="FencedMixin"):
            claim(s, object(), 2)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="not persistent"):
            claim(s, db.Invoice(id=2, total=0), 2)
        with pytest.raises(ValueError, match="not persistent"):
            claim(other, invoice, 2)
        with pytest.raises(TypeError, match="Session"):
            claim(db.engine, invoice, 2)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="FencedMixin model"):
            fenced_get(s, object, 1, 2)  # type: ignore[type-var]
        with pytest.raises(ValueError, match="primary key"):
            fenced_get(s, db.Invoice, (1, 2), 2)
        assert db.sent() == []


def test_claim_rows_claims_every_matching_row(db: DB) -> None:
    db.add(1, 2, 3, token=2)
    db.add(4, token=9)
    with db.engine.begin() as conn:
        assert claim_rows(conn, db.table, 5, db.table.c.id <= 3) == 3
    assert [db.row(i) for i in (1, 2, 3, 4)] == [(0, 5), (0, 5), (0, 5), (0, 9)]
    with Session(db.engine) as s:  # a session works too, and the model as the target
        assert claim_rows(s, db.Invoice, 6, db.table.c.id == 1) == 1
        s.commit()
    assert db.row(1) == (0, 6)


def test_claim_rows_refused_by_a_newer_row_is_rolled_back_whole(db: DB) -> None:
    db.add(1, 2, token=2)
    db.add(3, token=9)
    with pytest.raises(StaleRowError) as info, db.engine.begin() as conn:
        claim_rows(conn, db.table, 5)
    assert (info.value.token, info.value.current) == (5, 9)
    assert [db.row(i) for i in (1, 2, 3)] == [(0, 2), (0, 2), (0, 9)]


def test_fenced_get_claims_and_loads_in_one_statement(db: DB) -> None:
    db.add(1, token=3, total=10)
    with Session(db.engine) as s:
        db.sent()
        invoice = fenced_get(s, db.Invoice, 1, 5)
        one_claim(db)
        assert invoice is not None and (invoice.total, invoice.fence_token) == (10, 5)
        invoice.total = 11  # no need to set fence_token: the row is stamped
        s.commit()
    updates = [sql for sql in db.sent() if sql.startswith("UPDATE")]
    assert len(updates) == 1 and "fence_token <=" in updates[0]
    assert db.row(1) == (11, 5)


def test_fenced_get_refreshes_a_row_already_in_the_session(db: DB) -> None:
    db.add(1, token=3, total=10)
    with Session(db.engine) as s:
        invoice = s.get_one(db.Invoice, 1)
        with db.engine.begin() as conn:  # another holder (token 4) writes meanwhile
            conn.execute(fencing.sql.guarded_update(db.table, 4, values={"total": 20}))
        refreshed = fenced_get(s, db.Invoice, 1, 5)
        assert refreshed is not None and refreshed is invoice
        assert (refreshed.total, refreshed.fence_token) == (20, 5)  # what the database holds


def test_fenced_get_of_a_missing_row_is_none_and_stale_is_refused(db: DB) -> None:
    db.add(1, token=6, total=10)
    with Session(db.engine) as s:
        assert fenced_get(s, db.Invoice, 2, 5) is None
        with pytest.raises(StaleRowError) as info:
            fenced_get(s, db.Invoice, 1, 5)
        assert (info.value.token, info.value.current) == (5, 6)
        s.commit()
    assert db.row(1) == (10, 6) and db.row(2) is None


def test_fenced_get_with_a_composite_primary_key(sql_url: str) -> None:
    class Base(DeclarativeBase):
        pass

    class Line(FencedMixin, Base):
        __tablename__ = f"lines_{uuid.uuid4().hex[:10]}"
        invoice: Mapped[int] = mapped_column(primary_key=True)
        number: Mapped[int] = mapped_column(primary_key=True)
        amount: Mapped[int]

    engine = create_engine(sql_url)
    Base.metadata.create_all(engine)
    try:
        with Session(engine) as s:
            s.add_all([Line(invoice=1, number=1, amount=5), Line(invoice=1, number=2, amount=7)])
            s.commit()
        with Session(engine) as s:
            line = fenced_get(s, Line, (1, 2), 4)
            assert line is not None and (line.amount, line.fence_token) == (7, 4)
            line.amount = 8
            s.commit()
            other = s.get_one(Line, (1, 1))
            assert other.fence_token == 0  # only the row with that key was claimed
            with pytest.raises(ValueError, match="primary key of 2"):
                fenced_get(s, Line, 1, 4)
    finally:
        Base.metadata.drop_all(engine)
        engine.dispose()


def test_fenced_get_without_update_returning_claims_then_selects(db: DB) -> None:
    """A database without ``UPDATE ... RETURNING`` (SQLite before 3.35): the dialect's
    flag is turned off on a real engine, so the two-statement path runs for real."""
    db.engine.dialect.update_returning = False
    db.add(1, token=3, total=10)
    with Session(db.engine) as s:
        db.sent()
        found = fenced_get(s, db.Invoice, 1, 5)
        sent = db.sent()
        assert [sql.split()[0] for sql in sent] == ["UPDATE", "SELECT"]
        assert not any("RETURNING" in sql for sql in sent)
        assert found is not None and (found.total, found.fence_token) == (10, 5)
        assert fenced_get(s, db.Invoice, 2, 5) is None
        with pytest.raises(StaleRowError):
            fenced_get(s, db.Invoice, 1, 4)
        with pytest.raises(StaleRowError):
            claim(s, found, 4)
        claim(s, found, 6)
        assert found.fence_token == 6
        found.total = 12
        s.commit()
    assert db.row(1) == (12, 6)


# -- asyncio ---------------------------------------------------------------------------------


@pytest.fixture
async def adb(async_sql_url: str) -> AsyncIterator[tuple[AsyncEngine, Any]]:
    Base, Invoice, _ = make_models(uuid.uuid4().hex[:10])
    engine = create_async_engine(async_sql_url)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    yield engine, Invoice
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.drop_all)
    await engine.dispose()


async def test_async_claims(adb: tuple[AsyncEngine, Any]) -> None:
    engine, Invoice = adb
    table = Invoice.__table__
    async with AsyncSession(engine) as s:
        s.add_all([Invoice(id=1, total=10, fence_token=3), Invoice(id=2, total=0, fence_token=3)])
        await s.commit()
    async with AsyncSession(engine, expire_on_commit=False) as s:
        invoice = await fencing.sql.aio.fenced_get(s, Invoice, 1, 5)
        assert invoice is not None and (invoice.total, invoice.fence_token) == (10, 5)
        with pytest.raises(StaleRowError):
            await fencing.sql.aio.fenced_get(s, Invoice, 1, 4)
        invoice.total = 11
        await s.commit()
        other = await s.get_one(Invoice, 2)
        await fencing.sql.aio.claim(s, other, 6)
        with pytest.raises(StaleRowError):
            await fencing.sql.aio.claim(s, other, 5)
        await s.commit()
    async with engine.begin() as conn:
        assert await fencing.sql.aio.claim_rows(conn, table, 7) == 2
        with pytest.raises(TypeError):
            await fencing.sql.aio.claim_rows(engine, table, 8)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await fencing.sql.aio.claim(Session(), other, 8)  # type: ignore[arg-type]
    async with engine.connect() as conn:
        rows = (await conn.execute(select(table.c.total, table.c.fence_token))).all()
    assert sorted(tuple(r) for r in rows) == [(0, 7), (11, 7)]
