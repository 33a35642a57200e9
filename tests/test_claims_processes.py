"""The read-then-write window with real processes: the old holder really freezes
(SIGSTOP) between its read and its write, on a FileStore and on a SQL row (SQLite file,
PostgreSQL, MariaDB).

Holder A (token 4) reads, freezes; holder B (token 5) reads (claiming first, or not);
A is woken and writes what it computed; B writes what it computed. Without B's claim
both writes are accepted and A's change is lost; with it, A's write is refused and B
writes on data no older holder changed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import sqlalchemy as sa
from processes import CONTEXT, frozen

from fencing import FileStore, StaleTokenError
from fencing.sql import claim_rows, guarded_update

ROWS = sa.MetaData()
LEDGER = sa.Table(
    "claims_ledger",
    ROWS,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("fence_token", sa.BigInteger, nullable=False),
)


class Ledger:
    """One value, on a FileStore (``where`` is a path) or a SQL row (a database URL)."""

    def __init__(self, where: str) -> None:
        self.store = None if "://" in where else FileStore(where)
        self.engine = sa.create_engine(where) if self.store is None else None

    def create(self, value: str, token: int) -> None:
        if self.store is not None:
            self.store.write(value.encode(), token)
            return
        assert self.engine is not None
        ROWS.drop_all(self.engine)
        ROWS.create_all(self.engine)
        with self.engine.begin() as conn:
            conn.execute(LEDGER.insert().values(id=1, value=value, fence_token=token))

    def read(self) -> str:
        if self.store is not None:
            return self.store.read().decode()
        assert self.engine is not None
        with self.engine.connect() as conn:
            value: str = conn.execute(sa.select(LEDGER.c.value)).scalar_one()
        return value

    def claim(self, token: int) -> None:
        if self.store is not None:
            self.store.claim(token)
            return
        assert self.engine is not None
        with self.engine.begin() as conn:
            claim_rows(conn, LEDGER, token, LEDGER.c.id == 1)

    def write(self, value: str, token: int) -> None:
        if self.store is not None:
            self.store.write(value.encode(), token)
            return
        assert self.engine is not None
        with self.engine.begin() as conn:
            conn.execute(guarded_update(LEDGER, token, LEDGER.c.id == 1, values={"value": value}))


def _old_holder(where: str, log: str) -> None:
    """In a child: holder A (token 4) reads, freezes itself, then writes ``read + A;``."""
    ledger = Ledger(where)
    seen = ledger.read()
    os.kill(os.getpid(), signal.SIGSTOP)  # paused past its lease, between read and write
    try:
        ledger.write(seen + "A;", 4)
        outcome = "accepted"
    except StaleTokenError:
        outcome = "refused"
    Path(log).write_text(outcome)


@pytest.fixture(params=["file", "sqlite", "postgresql", "mariadb"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return str(tmp_path / "ledger")
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    url: str = request.getfixturevalue("mariadb_url" if request.param == "mariadb" else "pg_url")
    return url


@pytest.mark.parametrize("claims", [False, True], ids=["read-then-write", "claim-first"])
def test_frozen_old_holder_and_the_new_holders_read(
    where: str, claims: bool, tmp_path: Path
) -> None:
    ledger = Ledger(where)
    ledger.create("", 3)
    log = tmp_path / "a.log"
    holder = CONTEXT.Process(target=_old_holder, args=(where, str(log)))
    holder.start()
    pid = frozen(holder, "A has read and frozen")
    if claims:
        ledger.claim(5)  # B claims before it reads
    seen = ledger.read()
    os.kill(pid, signal.SIGCONT)  # A wakes up and writes between B's read and write
    holder.join(60)
    assert holder.exitcode == 0
    ledger.write(seen + "B;", 5)
    if claims:
        assert log.read_text() == "refused"
    else:
        assert log.read_text() == "accepted"  # A's write landed ...
    assert ledger.read() == "B;"  # ... and B's, computed from its read, dropped it
    if ledger.engine is not None:
        ROWS.drop_all(ledger.engine)
        ledger.engine.dispose()
