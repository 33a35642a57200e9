"""Setup errors of the SQL issuer: a missing table, an unopenable SQLite file, tables
that are not InnoDB (the guard's errors are ``_stale``'s).

Imports the core errors and SQLAlchemy's Core (never its ORM).
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from .._base.errors import FenceSetupError
from ._schema import not_innodb

#: SQLSTATE of PostgreSQL's "relation does not exist".
_UNDEFINED_TABLE = "42P01"
#: MySQL's and MariaDB's error number of "table doesn't exist" (SQLSTATE 42S02).
_NO_SUCH_TABLE = 1146
#: The drivers ``fencing migrate`` runs on (an asyncio engine names another).
_SYNC_PG = "postgresql+psycopg"
_SYNC_MYSQL = "pymysql"


def _sqlite_cannot_open(database: str) -> FenceSetupError:
    folder = os.path.dirname(os.path.abspath(database))
    if not os.path.isdir(folder):
        fix = f"its directory {folder} does not exist: create it"
    else:
        fix = f"check that this user may read and write it and its directory {folder}"
    return FenceSetupError(f"cannot open the SQLite file {database}: {fix}")


def _without_password(url: URL) -> URL:
    return url._replace(password=None)  # URL.set(password=None) would keep it


def migrate_command(url: URL) -> str:
    """``fencing migrate --url <url>`` for the database of ``url``, without its password
    (the password is left to ``PGPASSWORD`` or ``~/.pgpass``) and with a sync driver."""
    url = _without_password(url)
    if url.get_backend_name() == "postgresql" and url.get_driver_name() not in (
        "psycopg",
        "psycopg2",
        "pg8000",
    ):
        url = url.set(drivername=_SYNC_PG)
    if url.get_backend_name() in ("mysql", "mariadb") and url.get_driver_name() not in (
        _SYNC_MYSQL,
        "mysqldb",
        "mariadbconnector",
    ):
        url = url.set(drivername=f"{url.get_backend_name()}+{_SYNC_MYSQL}")
    return f"fencing migrate --url {url.render_as_string(hide_password=False)}"


def innodb_error(tables: list[tuple[str, str]]) -> FenceSetupError:
    """The ``FenceSetupError`` for the SDK's tables on MySQL or MariaDB that are not InnoDB
    (``_schema.not_innodb``): without its row locks two acquires could take one lease."""
    found = ", ".join(f"{table} is {engine}" for table, engine in tables)
    return FenceSetupError(
        f"the fencing tables must be InnoDB tables (row locks, transactions), but {found}: "
        "convert them (ALTER TABLE <table> ENGINE=InnoDB) or drop them and run `fencing migrate`"
    )


def check_innodb(conn: Any) -> None:
    """Raise ``innodb_error`` when some of the SDK's tables in ``conn``'s MySQL or MariaDB
    database are not InnoDB (missing tables are left to the first statement's error)."""
    others = not_innodb(conn)
    if others:
        raise innodb_error(others)


def setup_error(exc: SQLAlchemyError, url: URL) -> FenceSetupError | None:
    """The ``FenceSetupError`` for a driver error that means "not set up", else ``None``.

    A missing ``fencing_leases`` or ``fencing_admissions`` table (PostgreSQL, MySQL or
    MariaDB before ``fencing migrate``; SQLite creates its tables itself) is recognised
    by its SQLSTATE or MySQL's error number, whichever driver raised it; a SQLite file
    that cannot be opened by SQLite's message (its directory is missing or not writable).
    """
    if url.get_backend_name() == "sqlite" and "unable to open database file" in str(exc):
        return _sqlite_cannot_open(str(url.database))
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    number = orig.args[0] if isinstance(orig, Exception) and orig.args else None
    missing = state == _UNDEFINED_TABLE or (
        number == _NO_SUCH_TABLE and url.get_backend_name() in ("mysql", "mariadb")
    )
    if not missing and "no such table: fencing_" not in str(exc):
        return None
    table = "fencing_admissions" if "fencing_admissions" in str(exc) else "fencing_leases"
    return FenceSetupError(
        f"the table {table} is missing from {_without_password(url).render_as_string()}: "
        f"run `{migrate_command(url)}` (or fencing.sql.create_tables(engine) from Python)"
    )
