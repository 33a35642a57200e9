"""Engines for the SQL issuer: URL parsing, the SQLite setup, driver-error translation.

SQLite needs care to be a correct issuer across processes: every issuer transaction
must take the database's write lock up front (``BEGIN IMMEDIATE``), otherwise two
processes can both read a free lease before either writes. pysqlite and aiosqlite
begin transactions lazily, so the issuer uses a private engine on the same file with
the driver's own transaction handling turned off and ``BEGIN IMMEDIATE`` emitted on
every begin (the recipe from SQLAlchemy's SQLite dialect docs), plus a busy timeout so
a blocked writer waits instead of failing. A user's engine is never reconfigured.

Imports the core's error helpers and SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from .._base.errors import issuer_error
from .._base.lazy import needs_extra
from ._errors import setup_error
from ._pool import OPTIONS as LEAN_OPTIONS
from ._pool import lean
from ._schema import MYSQL

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

_E = TypeVar("_E", "Engine", "AsyncEngine")

#: Seconds a SQLite writer waits for another process's write lock before failing.
SQLITE_BUSY_TIMEOUT = 30.0

_SYNC_DRIVERS = {
    "sqlite": "sqlite",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}
_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+aiomysql",
    "mariadb": "mariadb+aiomysql",
}
#: The drivers kept as given (any other is replaced by the default of its side).
_SYNC_KEPT = ("pysqlite", "psycopg", "psycopg2", "pg8000", "pymysql", "mysqldb", "mariadbconnector")
_ASYNC_KEPT = ("aiosqlite", "asyncpg", "psycopg", "psycopg_async", "aiomysql", "asyncmy")


def parse_sql_url(url: object) -> URL:
    """A SQLAlchemy URL for SQLite, PostgreSQL, MySQL or MariaDB; TypeError/ValueError
    otherwise."""
    if isinstance(url, URL):
        parsed = url
    elif isinstance(url, str):
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise ValueError(f"not a database URL: {url!r}") from exc
    else:
        raise TypeError(f"database URL must be a str or sqlalchemy URL, not {type(url).__name__}")
    backend = parsed.get_backend_name()
    if backend not in _SYNC_DRIVERS:
        raise ValueError(
            f"the SQL issuer supports sqlite, postgresql, mysql and mariadb URLs, not {backend!r}"
        )
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ValueError("the SQL issuer needs a SQLite *file* (sqlite:///path), not :memory:")
    return parsed


def _with_driver(url: URL, drivers: dict[str, str], keep: tuple[str, ...]) -> URL:
    """``url`` with the driver it names if that one is kept, else its side's default (a
    bare ``mysql://`` gets PyMySQL, which ``fencing[mysql]`` installs, not SQLAlchemy's
    default mysqlclient, which needs a C build)."""
    if "+" in url.drivername and url.get_driver_name() in keep:
        return url
    return url.set(drivername=drivers[url.get_backend_name()])


def sync_url(url: str) -> URL:
    """``url`` with the driver the blocking issuer would use (``fencing migrate``'s)."""
    return _with_driver(parse_sql_url(url), _SYNC_DRIVERS, _SYNC_KEPT)


def _sqlite_immediate(sync_engine: Engine) -> None:
    """Make every transaction on ``sync_engine`` start with ``BEGIN IMMEDIATE``."""

    @event.listens_for(sync_engine, "connect")
    def _autocommit_driver(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves

    @event.listens_for(sync_engine, "begin")
    def _begin_immediate(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


#: MySQL's and MariaDB's isolation for the issuer's transactions. At their default,
#: REPEATABLE READ, an ``INSERT ... SELECT`` (a semaphore's take) locks every row and gap
#: it reads, and a release racing it deadlocks (error 1213, measured); READ COMMITTED
#: reads without locks, as PostgreSQL does, and the flows take the locks they need.
MYSQL_ISOLATION = "READ COMMITTED"


def _isolated(engine: _E) -> _E:
    """``engine``, or on MySQL and MariaDB a copy of it sharing its pool whose transactions
    are ``MYSQL_ISOLATION`` (the caller's engine itself is never reconfigured)."""
    if engine.dialect.name in MYSQL:
        return engine.execution_options(isolation_level=MYSQL_ISOLATION)
    return engine


def _options(url: URL) -> dict[str, Any]:
    options: dict[str, Any] = {"pool_pre_ping": True}
    if url.get_backend_name() in MYSQL:
        options["isolation_level"] = MYSQL_ISOLATION
    return options


def issuer_engine(source: object) -> Engine:
    """The engine the sync issuer runs on: the user's (PostgreSQL, MySQL or MariaDB: see
    ``_isolated``), a private SQLite one, or for a MySQL or MariaDB URL one whose pool
    neither pings nor rolls back a connection that does not need it (``_pool``)."""
    if isinstance(source, Engine):
        if source.dialect.name != "sqlite":
            parse_sql_url(source.url)  # refuses other databases
            return _isolated(source)
        url = parse_sql_url(source.url)
    else:
        url = parse_sql_url(source)
    url = _with_driver(url, _SYNC_DRIVERS, _SYNC_KEPT)
    with needs_extra("the SQL issuer"):  # the driver is imported here
        if url.get_backend_name() in MYSQL:  # no round trip per checkout and return
            return lean(create_engine(url, **{**_options(url), **LEAN_OPTIONS}))
        if url.get_backend_name() != "sqlite":
            return create_engine(url, **_options(url))
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})
    _sqlite_immediate(engine)
    return engine


def async_issuer_engine(source: object) -> AsyncEngine:
    """The engine the asyncio issuer runs on (see ``issuer_engine``)."""
    from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

    if isinstance(source, AsyncEngine):
        if source.dialect.name != "sqlite":
            parse_sql_url(source.url)
            return _isolated(source)
        url = parse_sql_url(source.url)
    else:
        url = parse_sql_url(source.url if isinstance(source, Engine) else source)
    url = _with_driver(url, _ASYNC_DRIVERS, _ASYNC_KEPT)
    with needs_extra("the asyncio SQL issuer"):  # the driver is imported here
        if url.get_backend_name() in MYSQL:  # no round trip per checkout and return
            engine = create_async_engine(url, **{**_options(url), **LEAN_OPTIONS})
            lean(engine.sync_engine)
            return engine
        if url.get_backend_name() != "sqlite":
            return create_async_engine(url, **_options(url))
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})
    _sqlite_immediate(engine.sync_engine)
    return engine


@contextmanager
def sql_errors(what: str = "SQL issuer", url: URL | None = None) -> Iterator[None]:
    """Re-raise driver and SQLAlchemy errors as ``FenceUnavailable`` (``from`` the original),
    or as ``FenceSetupError`` saying what to run when the database of ``url`` is not set up.

    One place for the sync and the asyncio issuer. ``OSError`` covers async drivers
    whose connection errors are not wrapped by SQLAlchemy.
    """
    try:
        yield
    except (SQLAlchemyError, OSError) as exc:
        raise fencing_error(exc, what, url) from exc


#: What ``sql_errors`` translates (for a caller that catches them itself, on a hot path).
DRIVER_ERRORS = (SQLAlchemyError, OSError)


def fencing_error(exc: Exception, what: str = "SQL issuer", url: URL | None = None) -> Exception:
    """The fencing error ``sql_errors`` raises (``from exc``) for one of ``DRIVER_ERRORS``."""
    setup = setup_error(exc, url) if url is not None and isinstance(exc, SQLAlchemyError) else None
    return setup or issuer_error(what, exc)
