"""The SQL issuers' statements as SQLAlchemy constructs: the one source of their SQL.

``statements(dialect)`` maps every name of ``fencing._sql.flows.STATEMENTS`` to its
construct for SQLite, PostgreSQL, MySQL or MariaDB, built once per dialect with a bound
parameter per value the flow gives (the names listed there); the database's clock is in each
statement (``db_now``, ``db_micros``), never a parameter. ``SqlPort`` and
``AsyncSqlPort`` run them on a SQLAlchemy connection for the flows of
``fencing._sql.flows``, ``DriverPort`` their compiled text on a pooled DBAPI connection
(``_driver``); ``fencing.django`` runs their compiled text, generated from these
constructs by ``python -m fencing.sql._generate``.

Imports the core's SQL flows (their names and replies), the schema, ``_driver`` and
SQLAlchemy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import (
    BigInteger,
    Connection,
    CursorResult,
    Double,
    Engine,
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
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import ClauseElement

from .._sql.flows import LIKE_ESCAPE, STATEMENTS, Reply, StatementName
from . import _driver
from ._keys import KEYS_SQL
from ._schema import MYSQL, admissions, db_micros, db_now, leases, rw_leases

if TYPE_CHECKING:
    from sqlalchemy.dialects.mysql import Insert as MySQLInsert
    from sqlalchemy.ext.asyncio import AsyncConnection
    from sqlalchemy.sql.schema import Table

#: One statement of the flows: a construct, or (MySQL and MariaDB, which have no
#: ``RETURNING`` on an upsert) constructs run in order in the flow's transaction, whose
#: reply is the last one's.
Statement = Executable | tuple[Executable, ...]

#: The flows' parameters shared by several statements (``fencing._sql.flows.STATEMENTS``).
_FENCE = bindparam("fence", type_=String)
_HOLDER = bindparam("holder_id", type_=String)
_TOKEN = bindparam("lease_token", type_=BigInteger)
_TTL = bindparam("ttl", type_=Double)
_LIMITER = bindparam("limiter", type_=String)
_WINDOW = bindparam("window", type_=String)


def _mysql_insert(table: Table) -> MySQLInsert:
    """MySQL's ``INSERT`` (its ``ON DUPLICATE KEY UPDATE``), its dialect imported when a
    MySQL or MariaDB statement is first built: a SQLite or PostgreSQL issuer never loads
    it (a tenth of a second of CPU)."""
    from sqlalchemy.dialects import mysql

    return mysql.insert(table)


def _upsert(dialect: str) -> Callable[[Any], Any]:
    """The ``insert`` of ``dialect`` that has its upsert clause."""
    if dialect in MYSQL:
        return _mysql_insert
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def _mysql_take(new: Any, now: Any, clock: Any) -> Statement:
    """MySQL's and MariaDB's take of ``new``'s row (see ``_leases``): ``ON DUPLICATE KEY
    UPDATE`` whose assignments run left to right, each seeing the ones before. So the
    token and the holder are set on the old row's test of a free lease, and the expiry on
    whether the holder is now ours (holder ids are fresh per acquisition: no live lease
    has ours). No ``RETURNING``: the token is read back in the same transaction, under
    the row lock the upsert took, by our holder id (no row: the lease is held)."""
    free = or_(leases.c.holder.is_(None), leases.c.expires_at <= now)
    upserted: Executable = new.on_duplicate_key_update(
        [
            ("token", func.if_(free, func.greatest(leases.c.token + 1, clock), leases.c.token)),
            ("holder", func.if_(free, _HOLDER, leases.c.holder)),
            ("expires_at", func.if_(leases.c.holder == _HOLDER, now + _TTL, leases.c.expires_at)),
        ]
    )
    taken = select(leases.c.token).where(leases.c.name == _FENCE, leases.c.holder == _HOLDER)
    return (upserted, taken)


def _leases(dialect: str) -> dict[str, Statement]:
    now, clock = db_now(dialect), db_micros(dialect)
    upsert = _upsert(dialect)
    greatest = func.greatest if dialect == "postgresql" else func.max  # SQLite's scalar max

    def take(new: Any) -> Statement:
        """The upsert of ``new``'s row: a new lease, or the free lease's next token."""
        if dialect in MYSQL:
            return _mysql_take(new, now, clock)
        upserted: Executable = new.on_conflict_do_update(
            index_elements=[leases.c.name],
            set_={
                "token": greatest(leases.c.token + 1, clock),
                "holder": new.excluded.holder,
                "expires_at": new.excluded.expires_at,
            },
            where=or_(leases.c.holder.is_(None), leases.c.expires_at <= now),
        ).returning(leases.c.token)
        return upserted

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
    new = upsert(leases).values(name=_FENCE, token=clock, holder=_HOLDER, expires_at=now + _TTL)
    return {
        "acquire": take(new),
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
        **_slots(dialect, live, take),
    }


def _slots(dialect: str, live: Any, take: Callable[[Any], Statement]) -> dict[str, Statement]:
    """The semaphores' takes (``TakesSlots``): ``acquire``'s upsert from a row that exists
    only while fewer than ``:permits`` other slots ``:group<k>`` are ``live``.

    The slots are a range of names in byte order (``:group0`` up to ``:group:``, ``:``
    being the character after ``9``): on SQLite the primary key's, and ``BEGIN
    IMMEDIATE`` serializes the takes already. PostgreSQL's text order depends on the
    collation, so there the range is of the pattern operators (``~>=~``, ``~<~``), which
    the index ``name_pattern`` serves (without it, on a database not yet migrated, the
    count scans the table), and ``slot_lock`` takes the semaphore's transaction-level
    advisory lock, on the keys of ``advisory_keys(group)`` derived by the server
    (``KEYS_SQL``). MySQL and MariaDB compare the names byte for byte (the tables'
    binary collation, ``_schema.table_options``), and ``slot_lock`` locks the row
    ``(group, 'slots', 0)`` of ``fencing_admissions``, upserted, to the transaction's end
    (their ``GET_LOCK`` lasts as long as the session, not the transaction)."""
    now, clock = db_now(dialect), db_micros(dialect)
    upsert = _upsert(dialect)
    group = bindparam("group", type_=String)
    length = func.char_length if dialect in MYSQL else func.length  # MySQL's: bytes
    number = func.substr(leases.c.name, length(group) + 1)
    first, after = bindparam("first", type_=String), bindparam("after", type_=String)
    if dialect == "postgresql":
        keys = KEYS_SQL.replace(":name", ":group")
        lock: Executable = text(f"SELECT pg_advisory_xact_lock(k1, k2) FROM ({keys}) AS keys")
        slots = and_(
            leases.c.name.op("~>=~")(first),
            leases.c.name.op("~<~")(after),
            number.op("~")("^[0-9]+$"),
        )
    elif dialect in MYSQL:
        lock = (
            _mysql_insert(admissions)
            .values(name=group, kind=literal_column("'slots'"), seq=0, at=0)
            .on_duplicate_key_update(at=admissions.c.at)  # changes nothing; locks the row
        )
        slots = and_(
            leases.c.name >= first,
            leases.c.name < after,
            number.regexp_match("^[0-9]+$"),
        )
    else:
        lock = select(literal_column("1", Integer))
        slots = and_(
            leases.c.name >= first,
            leases.c.name < after,
            number.op("NOT GLOB")("*[^0-9]*"),
        )
    others = select(func.count()).where(slots, leases.c.name != _FENCE, live).scalar_subquery()
    row = select(_FENCE, clock, _HOLDER, now + _TTL).where(
        others < bindparam("permits", type_=Integer)
    )
    new = upsert(leases).from_select(["name", "token", "holder", "expires_at"], row)
    return {
        "slot_lock": lock,
        "slot_acquire": take(new),
        "slot_left": select(leases.c.expires_at - now).where(leases.c.name == _FENCE, live),
    }


def _admit_lock(dialect: str) -> Statement:
    """The upsert of a limiter's lock row, returning the clock read once it is locked
    (MySQL and MariaDB: read back in the same transaction, under the lock)."""
    table, clock = admissions, db_micros(dialect)
    new = _upsert(dialect)(table).values(name=_LIMITER, kind=_WINDOW, seq=0, at=clock)
    if dialect in MYSQL:
        lock_row = and_(table.c.name == _LIMITER, table.c.kind == _WINDOW, table.c.seq == 0)
        return (new.on_duplicate_key_update(at=clock), select(table.c.at).where(lock_row))
    upserted: Executable = new.on_conflict_do_update(
        index_elements=[table.c.name, table.c.kind, table.c.seq],
        set_={"at": clock},  # evaluated once the row is locked
    ).returning(table.c.at)
    return upserted


def _admissions(dialect: str) -> dict[str, Statement]:
    table, clock = admissions, db_micros(dialect)
    ours = and_(table.c.name == _LIMITER, table.c.kind == _WINDOW)
    counted = and_(ours, table.c.seq > 0)
    return {
        "admit_lock": _admit_lock(dialect),
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


def _rw_leases(dialect: str) -> dict[str, Statement]:
    """The read-write locks' statements (``fencing_rw_leases``); the decisions are the
    flow's (``SqlFlows.rw_acquire``), in one transaction serialized on the name's row of
    ``fencing_leases`` (``rw_lock``: PostgreSQL's and MySQL's row lock; SQLite's ``BEGIN
    IMMEDIATE`` serializes every write already), whose counter gives the tokens
    (``rw_next``; on MySQL and MariaDB, without ``RETURNING``, read back after the
    UPDATE under its row lock)."""
    rw, now, clock = rw_leases, db_now(dialect), db_micros(dialect)
    mysql_family = dialect in MYSQL
    greatest = func.max if dialect == "sqlite" else func.greatest  # SQLite's scalar max
    mode = bindparam("rw_mode", type_=String)
    ours = and_(rw.c.name == _FENCE, rw.c.holder == _HOLDER)
    held = and_(ours, rw.c.mode == mode, rw.c.token == _TOKEN, rw.c.expires_at > now)
    if mysql_family:  # not INSERT IGNORE: it share-locks an existing row, and two touches
        # then both waiting for rw_lock's exclusive lock deadlock (error 1213, measured)
        touch: Executable = (
            _mysql_insert(leases).values(name=_FENCE).on_duplicate_key_update(token=leases.c.token)
        )
    else:
        touch = _upsert(dialect)(leases).values(name=_FENCE).on_conflict_do_nothing()
    bump = (
        update(leases)
        .where(leases.c.name == _FENCE)
        .values(token=greatest(leases.c.token + 1, clock))
    )
    bumped = select(leases.c.token).where(leases.c.name == _FENCE)
    return {
        "rw_touch": touch,
        "rw_lock": select(leases.c.token).where(leases.c.name == _FENCE).with_for_update(),
        "rw_expire": delete(rw).where(rw.c.name == _FENCE, rw.c.expires_at <= now),
        "rw_rows": select(rw.c.holder, rw.c.mode, rw.c.token, rw.c.expires_at - now).where(
            rw.c.name == _FENCE
        ),
        "rw_next": (bump, bumped) if mysql_family else bump.returning(leases.c.token),
        "rw_insert": insert(rw).values(
            name=_FENCE, holder=_HOLDER, mode=mode, token=_TOKEN, expires_at=now + _TTL
        ),
        "rw_drop": delete(rw).where(ours),
        "rw_renew": update(rw).where(held).values(expires_at=now + _TTL),
        "rw_release": delete(rw).where(held),
    }


@functools.cache
def statements(dialect: str) -> Mapping[str, Statement]:
    """Every statement of the SQL flows (``STATEMENTS``, in that order) for ``dialect``
    (``sqlite``, ``postgresql``, ``mysql`` or ``mariadb``), built on the first call."""
    built = {**_leases(dialect), **_admissions(dialect), **_rw_leases(dialect)}
    return {name: built[name] for name in STATEMENTS}


def read(result: CursorResult[Any]) -> Reply:
    rows = [tuple(row) for row in result] if result.returns_rows else []
    return Reply(result.rowcount, rows)


class BaseSqlPort:
    """What both ports share: the statements, and the constructs one of them runs in
    order in the flow's transaction (the reply is the last one's)."""

    __slots__ = ("statements",)

    def __init__(self, statements: Mapping[str, Statement]) -> None:
        self.statements = statements

    def steps(self, statement: StatementName) -> tuple[Executable, ...]:
        one = self.statements[statement]
        return one if isinstance(one, tuple) else (one,)


class SqlPort(BaseSqlPort):
    """Runs the flows' statements (those of ``statements(dialect)``) on ``conn``, in its
    transaction (``Executes``)."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection, statements: Mapping[str, Statement]) -> None:
        super().__init__(statements)
        self.conn = conn

    def execute(self, statement: StatementName, params: Mapping[str, Any], /) -> Reply:
        return read([self.conn.execute(one, params) for one in self.steps(statement)][-1])


class DriverPort(BaseSqlPort):
    """Runs the flows' statements with the driver's own cursor on ``conn``, a pooled DBAPI
    connection of ``engine`` in its transaction (``_driver.transaction``): each compiled
    once per dialect, sent without a ``Connection``'s execution context and result
    objects, its errors those ``Connection`` would raise (``_driver``)."""

    __slots__ = ("conn", "engine")

    def __init__(
        self, engine: Engine, conn: PoolProxiedConnection, statements: Mapping[str, Statement]
    ) -> None:
        super().__init__(statements)
        self.engine = engine
        self.conn = conn

    def execute(self, statement: StatementName, params: Mapping[str, Any], /) -> Reply:
        steps = cast("tuple[ClauseElement, ...]", self.steps(statement))
        return Reply(*_driver.run_all(self.engine, self.conn, steps, params))


class AsyncSqlPort(BaseSqlPort):
    """The asyncio ``SqlPort`` on an ``AsyncConnection`` (``AsyncExecutes``)."""

    __slots__ = ("conn",)

    def __init__(self, conn: AsyncConnection, statements: Mapping[str, Statement]) -> None:
        super().__init__(statements)
        self.conn = conn

    async def execute(self, statement: StatementName, params: Mapping[str, Any], /) -> Reply:
        return read([await self.conn.execute(one, params) for one in self.steps(statement)][-1])
