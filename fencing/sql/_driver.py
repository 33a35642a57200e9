"""Statements on a pooled DBAPI connection, without SQLAlchemy's ``Connection``.

The advisory issuer runs one small statement per acquire and release on a
connection it keeps checked out for the lease's life. Through ``Engine.connect()`` and
``Connection.execute`` each of them pays for a ``Connection`` object, an execution
context and a result object: measured (``benchmarks/advisory_family.py``) that was most
of an acquire + release, more than the two round trips themselves. Here a statement is
compiled once per dialect (a ``TextClause`` to the driver's SQL and parameter style) and
sent with the driver's own cursor on the pool's connection (``Engine.raw_connection()``),
which keeps what the pool gives: checkout, return, ``info``, invalidation.

What ``Connection`` would have done on an error is done here, in one place:

- a driver error becomes SQLAlchemy's ``DBAPIError`` (``raise ... from``), so that the
  callers' ``sql_errors`` and SQLSTATE checks see what they would have seen;
- a lost connection (``Dialect.is_disconnect``) is invalidated, and the pool's idle
  connections are closed (a server restart killed them too: SQLAlchemy invalidates the
  pool on a disconnect the same way), with ``connection_invalidated`` set on the error.

Autocommit: a statement here is one transaction. The issuer's own engine opens its
connections in autocommit; a user's engine is switched at checkout and back at return
(``checkout(engine, switch=True)``/``checkin``), as ``Connection`` would.

Each function takes the engine first: the advisory flows' one step (``_advisory_flows.
Call``) runs it on the blocking engine, or in SQLAlchemy's greenlet (``greenlet_spawn``)
on an async engine's ``sync_engine`` and the adapted DBAPI connections of its pool.

Imports SQLAlchemy only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, cast

from sqlalchemy import Engine, TextClause
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler


@functools.lru_cache(maxsize=256)
def _prepared(
    statement: ClauseElement, dialect: Dialect
) -> tuple[str, tuple[str, ...], bool, Mapping[str, Any]]:
    """``compiled``'s three, and the values written in ``statement`` itself by the name
    of their parameter (the ``1`` of ``token + 1``; the caller gives the others)."""
    sql = cast(SQLCompiler, statement.compile(dialect=dialect))
    names = tuple(sql.positiontup or ()) if sql.positional else tuple(sql.binds)
    constants = {name: sql.binds[name].value for name in names if not sql.binds[name].required}
    return sql.string, names, bool(sql.positional), constants


def compiled(statement: ClauseElement, dialect: Dialect) -> tuple[str, tuple[str, ...], bool]:
    """``statement`` in ``dialect``'s SQL: (text, names of its parameters, whether the
    driver takes them by position, in that order, rather than by name). Only those are
    sent: a driver that quotes parameters itself (PyMySQL) quotes every one it is given.
    Compiled once per statement and dialect."""
    sql, names, positional, _ = _prepared(statement, dialect)
    return sql, names, positional


def bound(statement: ClauseElement, dialect: Dialect, params: Mapping[str, Any]) -> tuple[str, Any]:
    """``statement``'s SQL and its parameters as ``dialect``'s driver takes them, from
    ``params`` and the values written in the statement."""
    sql, names, positional, constants = _prepared(statement, dialect)
    args = [constants[name] if name in constants else params[name] for name in names]
    return sql, (args if positional else dict(zip(names, args, strict=True)))


def driver_error(
    engine: Engine,
    exc: Any,
    conn: PoolProxiedConnection | None,
    sql: str = "",
    args: Any = None,
) -> StatementError:
    """The driver's error ``exc`` as SQLAlchemy's ``DBAPIError``, to raise ``from exc``;
    a lost connection is invalidated first (see the module docstring)."""
    dialect = engine.dialect
    dbapi = None if conn is None else conn.dbapi_connection
    lost = bool(dialect.is_disconnect(exc, dbapi, None))
    if lost:
        if conn is not None and dbapi is not None:
            conn.invalidate(exc)
        engine.pool.dispose()  # its idle connections died with this one
    error = dialect.loaded_dbapi.Error
    wrapped: StatementError = DBAPIError.instance(
        sql, args, exc, error, connection_invalidated=lost, dialect=dialect
    )
    return wrapped


def checkout(engine: Engine, switch: bool = False) -> PoolProxiedConnection:
    """A connection of ``engine``'s pool, in autocommit (``switch``: set it now)."""
    try:
        conn = engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as exc:
        raise driver_error(engine, exc, None) from exc
    if switch and conn.dbapi_connection is not None:
        try:
            engine.dialect.set_isolation_level(conn.dbapi_connection, "AUTOCOMMIT")
        except engine.dialect.loaded_dbapi.Error as exc:
            error = driver_error(engine, exc, conn)
            discard(conn)
            raise error from exc
    return conn


def checkin(engine: Engine, conn: PoolProxiedConnection, switch: bool = False) -> None:
    """Return ``conn`` to the pool (``switch``: to the engine's isolation level first, or
    close it for good if that fails)."""
    if switch and conn.dbapi_connection is not None:
        try:
            engine.dialect.reset_isolation_level(conn.dbapi_connection)
        except Exception:
            discard(conn)
            return
    conn.close()


def run(
    engine: Engine,
    conn: PoolProxiedConnection,
    statement: TextClause,
    params: Mapping[str, Any],
    every: bool = False,
) -> Any:
    """Execute ``statement`` with ``params`` on ``conn``: its first row, or ``None``
    (``every``: all its rows). A statement that returns no rows replies ``(last insert
    id,)`` when it changed a row (MySQL's ``LAST_INSERT_ID(expr)``), else ``None``."""
    sql, args = bound(statement, engine.dialect, params)
    cursor = None
    try:
        cursor = conn.cursor()
        cursor.execute(sql, args)
        if cursor.description is None:
            return (cursor.lastrowid,) if cursor.rowcount > 0 else None
        return cursor.fetchall() if every else cursor.fetchone()
    except engine.dialect.loaded_dbapi.Error as exc:
        raise driver_error(engine, exc, conn, sql, args) from exc
    finally:
        if cursor is not None:
            cursor.close()


def run_all(
    engine: Engine,
    conn: PoolProxiedConnection,
    statements: tuple[ClauseElement, ...],
    params: Mapping[str, Any],
) -> tuple[int, list[tuple[Any, ...]]]:
    """Execute ``statements`` in order on ``conn``, each with the ``params`` it names: the
    last one's count of rows changed, and the rows it returned."""
    cursor = sql = args = None
    try:
        cursor = conn.cursor()
        for statement in statements:
            sql, args = bound(statement, engine.dialect, params)
            cursor.execute(sql, args)
        rows = [] if cursor.description is None else [tuple(row) for row in cursor.fetchall()]
        return cursor.rowcount, rows
    except engine.dialect.loaded_dbapi.Error as exc:
        raise driver_error(engine, exc, conn, sql or "", args) from exc
    finally:
        if cursor is not None:
            cursor.close()


@contextmanager
def transaction(engine: Engine) -> Iterator[PoolProxiedConnection]:
    """A connection of ``engine``'s pool for one transaction (the driver's own, begun by
    the first statement), committed when the block ends and back to the pool.

    When the block raises, the transaction is rolled back; the connection is closed for
    good instead when that fails too, or when the block was interrupted (an interrupt
    may have left a reply half read on it), and its server session ends with it: never
    a transaction left open, whatever the block had written."""
    conn = checkout(engine)
    try:
        yield conn
        try:
            conn.commit()
        except engine.dialect.loaded_dbapi.Error as exc:
            raise driver_error(engine, exc, conn, "COMMIT") from exc
    except Exception:
        if not is_closed(conn):
            try:
                conn.rollback()
            except Exception:
                discard(conn)
        raise
    except BaseException:
        discard(conn)
        raise
    finally:
        if not is_closed(conn):
            conn.close()


def is_closed(conn: PoolProxiedConnection) -> bool:
    """Whether ``conn`` went back to its pool or was invalidated."""
    return conn.dbapi_connection is None


def discard(conn: PoolProxiedConnection) -> None:
    """Close ``conn`` for good, never back to the pool: its server session ends with it."""
    if conn.dbapi_connection is not None:
        with suppress(Exception):
            conn.invalidate()


def drop(engine: Engine, conn: PoolProxiedConnection) -> None:
    """``discard`` with the engine first, as every other function here."""
    discard(conn)


def forget_pool(engine: Engine) -> None:
    """Forget the pool's connections without closing them (in a forked child: they are
    the parent's; SQLAlchemy's ``dispose(close=False)`` recipe)."""
    engine.dispose(close=False)


def dispose(engine: Engine) -> None:
    """Close the pool's idle connections (``Engine.dispose``)."""
    engine.dispose()
