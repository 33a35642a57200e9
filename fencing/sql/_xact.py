"""``advisory_xact``: a fence token under a transaction-level advisory lock
(``pg_advisory_xact_lock``), taken in the caller's own open transaction.

The lock and the token's bump are one statement of the caller's transaction, so both end
with it: at commit the lock goes and the token stays issued; at rollback the lock goes
and the bump is undone, as if the call never happened. Nothing is kept on a connection
between transactions, so it is safe behind a transaction pooler (pgbouncer's
``pool_mode = transaction``), where a session lock is not.

The statement is PostgreSQL's advisory ``acquire`` (``_advisory_statements``) with the
transaction-level lock functions::

    WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock(k1, k2))
    INSERT INTO fencing_leases AS l (name, token) SELECT :name, <clock µs> FROM lock
    ON CONFLICT (name) DO UPDATE SET token = greatest(l.token + 1, <clock µs>)
    RETURNING l.token

At READ COMMITTED (PostgreSQL's default) the ``ON CONFLICT DO UPDATE`` bumps the latest
committed token even though the statement's snapshot was taken before it waited for the
lock. The keys are ``advisory_keys(name)``: the same lock as ``lease=advisory``'s and
psql's ``pg_advisory_lock(k1, k2)`` (session- and transaction-level advisory locks of one
key exclude each other).

Written once as a flow (``xact_flow``) that ``advisory_xact`` drives blocking and
``fencing.sql.aio.advisory_xact`` asyncio, on the caller's own objects.

Imports the core token, errors and flows, ``_advisory_statements``' clock and keys, SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from .._base.errors import AcquireTimeout
from .._base.flow import Flow, run_sync
from .._base.token import FenceToken
from ._advisory_statements import CLOCK
from ._engines import sql_errors
from ._keys import advisory_keys

_XACT = (
    "WITH lock AS MATERIALIZED "
    "(SELECT {function}(CAST(:k1 AS int4), CAST(:k2 AS int4)){test} AS got) "
    "INSERT INTO fencing_leases AS l (name, token) "
    f"SELECT :name, {CLOCK} FROM lock {{where}}"
    "ON CONFLICT (name) DO UPDATE "
    f"SET token = greatest(l.token + 1, {CLOCK}) "
    "RETURNING l.token"
)
#: Waits for the lock (``pg_advisory_xact_lock`` returns void: ``IS NULL`` is true).
XACT_WAIT = text(_XACT.format(function="pg_advisory_xact_lock", test=" IS NULL", where=""))
#: Tries once; no row back: someone else holds the lock.
XACT_TRY = text(_XACT.format(function="pg_try_advisory_xact_lock", test="", where="WHERE got "))


class Call:
    """The flow's step: ``function(*args)``, awaited when driven asyncio (where the
    SQLAlchemy asyncio method returns an awaitable)."""

    __slots__ = ("args", "function", "result")
    result: Any

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self.function = function
        self.args = args

    def perform(self, port: object) -> None:
        self.result = self.function(*self.args)

    async def aperform(self, port: object) -> None:
        self.result = await self.function(*self.args)


class RawConnection:
    """The step that gives a connection's pooled DBAPI connection and its execution
    options (``Connection.connection``; ``await AsyncConnection.get_raw_connection()``
    and its blocking facade's options)."""

    __slots__ = ("conn", "result")
    result: Any

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def perform(self, port: object) -> None:
        self.result = self.conn.connection, self.conn.get_execution_options()

    async def aperform(self, port: object) -> None:
        raw = await self.conn.get_raw_connection()
        self.result = raw, self.conn.sync_connection.get_execution_options()


def xact_flow(
    session: Any, conn: Any, name: str, wait: bool, what: str
) -> Flow[Call | RawConnection, FenceToken]:
    """``advisory_xact`` on a ``session`` (a ``Session`` or ``AsyncSession``) or ``conn``
    (a ``Connection`` or ``AsyncConnection``), written once for both (``what``: the types
    the caller takes, for the ``TypeError``)."""
    if not isinstance(wait, bool):
        raise TypeError(f"wait must be a bool, not {type(wait).__name__}")
    keys = advisory_keys(name)  # TypeError/ValueError for a bad name, before any SQL
    if session is None and conn is None:
        raise TypeError(what)
    if session is not None:
        begun = Call(session.connection)  # begins the session's transaction
        yield begun
        conn = begun.result
    if conn.dialect.name != "postgresql":
        raise ValueError(f"advisory_xact needs PostgreSQL, not {conn.dialect.name!r}")
    raw = RawConnection(conn)
    yield raw
    dbapi, options = raw.result
    autocommit = options.get("isolation_level") == "AUTOCOMMIT"
    if autocommit or getattr(dbapi.dbapi_connection, "autocommit", False):
        raise ValueError(
            "advisory_xact needs a connection in a transaction, not in autocommit: "
            "its lock would end with the statement"
        )
    params = {"name": name, "k1": keys[0], "k2": keys[1]}
    take = Call(conn.execute, XACT_WAIT if wait else XACT_TRY, params)
    with sql_errors("advisory_xact", conn.engine.url):
        yield take
    token = take.result.scalar()
    if token is None:
        raise AcquireTimeout(name, 0)
    return FenceToken(int(token), name)


def advisory_xact(
    connection_or_session: Connection | Session, name: str, *, wait: bool = True
) -> FenceToken:
    """Take the transaction-level advisory lock of fence ``name`` and the next token, in
    the open transaction of ``connection_or_session`` (a SQLAlchemy ``Connection`` or
    ``Session`` on PostgreSQL; one is begun if none is open, as SQLAlchemy does for any
    statement).

    Both last as long as that transaction: commit it, and the lock goes and the token
    stays issued; roll it back, and the lock goes and the token's bump is undone.
    ``wait=False`` tries once and raises ``fencing.AcquireTimeout`` if the lock is held
    elsewhere; by default it waits for the lock (the connection's ``lock_timeout``
    applies). Wrong types: ``TypeError``; a connection in autocommit (whose lock would
    go with the statement), a non-PostgreSQL database or a bad name: ``ValueError``,
    nothing sent. Driver errors: ``FenceUnavailable`` (``FenceSetupError`` when the
    ``fencing_leases`` table is missing), and the caller's transaction must be rolled
    back as after any failed statement.
    """
    given = connection_or_session
    session = given if isinstance(given, Session) else None
    conn = given if isinstance(given, Connection) else None
    what = f"advisory_xact needs a sqlalchemy Connection or Session, not {type(given).__name__}"
    return run_sync(xact_flow(session, conn, name, wait, what), None)
