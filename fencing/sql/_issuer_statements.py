"""The SQL issuers' statements as SQLAlchemy constructs: the one source of their SQL.

``statements(dialect)`` maps every name of ``fencing._sql_flows.STATEMENTS`` to its
construct for SQLite or PostgreSQL, built once per dialect with a bound parameter per
value the flow gives (the names listed there); the database's clock is in each
statement (``db_now``, ``db_micros``), never a parameter. ``SqlPort`` and
``AsyncSqlPort`` run them on a SQLAlchemy connection for the flows of
``fencing._sql_flows``; ``fencing.django`` runs their compiled text, generated from
these constructs by ``python -m fencing.sql._generate``.

Imports the core's SQL flows (their names and replies), the schema and SQLAlchemy.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Connection,
    CursorResult,
    Double,
    Executable,
    Integer,
    String,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from .._sql_flows import LIKE_ESCAPE, STATEMENTS, Reply, StatementName
from ._schema import admissions, db_micros, db_now, leases

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

#: The flows' parameters shared by several statements (``fencing._sql_flows.STATEMENTS``).
_FENCE = bindparam("fence", type_=String)
_HOLDER = bindparam("holder_id", type_=String)
_TOKEN = bindparam("lease_token", type_=BigInteger)
_TTL = bindparam("ttl", type_=Double)
_LIMITER = bindparam("limiter", type_=String)
_WINDOW = bindparam("window", type_=String)


def _leases(dialect: str) -> dict[str, Executable]:
    now, clock = db_now(dialect), db_micros(dialect)
    upsert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    greatest = func.greatest if dialect == "postgresql" else func.max  # SQLite's scalar max
    new = upsert(leases).values(name=_FENCE, token=clock, holder=_HOLDER, expires_at=now + _TTL)
    held = and_(
        leases.c.name == _FENCE,
        leases.c.token == _TOKEN,
        leases.c.holder == _HOLDER,
        leases.c.expires_at > now,
    )
    live = and_(leases.c.holder.is_not(None), leases.c.expires_at > now)
    status = select(leases.c.token, leases.c.holder, leases.c.expires_at - now, live).where(
        leases.c.name == _FENCE
    )
    return {
        "acquire": new.on_conflict_do_update(
            index_elements=[leases.c.name],
            set_={
                "token": greatest(leases.c.token + 1, clock),
                "holder": new.excluded.holder,
                "expires_at": new.excluded.expires_at,
            },
            where=or_(leases.c.holder.is_(None), leases.c.expires_at <= now),
        ).returning(leases.c.token),
        "lease_left": select(leases.c.expires_at - now).where(leases.c.name == _FENCE),
        "renew": update(leases).where(held).values(expires_at=now + _TTL),
        "release": update(leases).where(held).values(holder=None, expires_at=None),
        "status": status,
        "status_locked": status.with_for_update(),
        "names": select(leases.c.name)
        .where(leases.c.name.startswith(bindparam("prefix", type_=String), escape=LIKE_ESCAPE))
        .order_by(leases.c.name),
        "clear": update(leases)
        .where(leases.c.name == _FENCE, leases.c.token == _TOKEN, leases.c.holder == _HOLDER)
        .values(holder=None, expires_at=None),
    }


def _admissions(dialect: str) -> dict[str, Executable]:
    table, clock = admissions, db_micros(dialect)
    upsert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    ours = and_(table.c.name == _LIMITER, table.c.kind == _WINDOW)
    counted = and_(ours, table.c.seq > 0)
    return {
        "admit_lock": upsert(table)
        .values(name=_LIMITER, kind=_WINDOW, seq=0, at=clock)
        .on_conflict_do_update(
            index_elements=[table.c.name, table.c.kind, table.c.seq],
            set_={"at": clock},  # evaluated once the row is locked
        )
        .returning(table.c.at),
        "admit_expire": delete(table).where(
            counted, table.c.at <= bindparam("before", type_=BigInteger)
        ),
        "admit_window": select(func.min(table.c.at), func.count(), func.max(table.c.seq)).where(
            counted
        ),
        "admit_reset": delete(table).where(counted),
        "admit_insert": insert(table).values(
            name=_LIMITER,
            kind=_WINDOW,
            seq=bindparam("seq_no", type_=BigInteger),
            at=bindparam("admitted_at", type_=BigInteger),
        ),
        "admit_oldest": select(table.c.at)
        .where(counted)
        .order_by(table.c.at, table.c.seq)
        .offset(bindparam("skip", type_=Integer))
        .limit(literal_column("1", Integer)),
        "clock": select(clock),
        "limit_use": select(func.count(), func.min(table.c.at)).where(
            counted, table.c.at > bindparam("after", type_=BigInteger)
        ),
    }


@functools.cache
def statements(dialect: str) -> Mapping[str, Executable]:
    """Every statement of the SQL flows (``STATEMENTS``, in that order) for ``dialect``
    (``sqlite`` or ``postgresql``), built on the first call."""
    built = {**_leases(dialect), **_admissions(dialect)}
    return {name: built[name] for name in STATEMENTS}


def read(result: CursorResult[Any]) -> Reply:
    rows = [tuple(row) for row in result] if result.returns_rows else []
    return Reply(result.rowcount, rows)


class SqlPort:
    """Runs the flows' statements (those of ``statements(dialect)``) on ``conn``, in its
    transaction (``Executes``)."""

    __slots__ = ("conn", "statements")

    def __init__(self, conn: Connection, statements: Mapping[str, Executable]) -> None:
        self.conn = conn
        self.statements = statements

    def execute(self, statement: StatementName, params: Mapping[str, Any], /) -> Reply:
        return read(self.conn.execute(self.statements[statement], params))


class AsyncSqlPort:
    """The asyncio ``SqlPort`` on an ``AsyncConnection`` (``AsyncExecutes``)."""

    __slots__ = ("conn", "statements")

    def __init__(self, conn: AsyncConnection, statements: Mapping[str, Executable]) -> None:
        self.conn = conn
        self.statements = statements

    async def execute(self, statement: StatementName, params: Mapping[str, Any], /) -> Reply:
        return read(await self.conn.execute(self.statements[statement], params))
