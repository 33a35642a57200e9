"""The issuer on Django's own database: ``fencing.django.fence(name, ttl)``.

Its leases live in ``fencing_leases``, the table the app's migration creates
(``manage.py migrate fencing``), the same table and the same statements as
``fencing.sql``'s issuer: ``fencing.sql``'s flows (``SqlFlows``: the clock-floored
upsert of acquire, renew, release, status, names, force-release) are compiled for the
database's dialect and run through a Django cursor. So a Django project needs no Redis
and no engine or URL of its own; SQLAlchemy is only the library that writes the SQL.

Why connections of its own (a pool per database alias, each connection used by one
thread at a time, never the caller's): a lease must be committed before the work it
guards starts, whatever transaction the caller is in. On the caller's connection, a
lease taken inside ``atomic()`` (or a view under ``ATOMIC_REQUESTS``) would be invisible
to other holders until that commit, and undone by its rollback. The connections stay
in autocommit; each operation is one transaction between ``BEGIN`` and ``COMMIT``, on
SQLite ``BEGIN IMMEDIATE`` (the write lock up front, as ``fencing.sql`` takes it, so two
processes cannot both see a free lease). A connection that fails is closed, never used
again, and the error raised as ``FenceUnavailable`` (``FenceSetupError`` when the table
is missing). A forked child (a prefork Celery worker, Gunicorn with ``--preload``) never
uses its parent's connections: it opens its own.

Imports the core, ``fencing.sql``'s flows and schema (the one copy of the issuer's SQL;
an allowed exception to the backends' independence, see pyproject.toml) and Django.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, Error, connections
from sqlalchemy import ClauseElement, Executable
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine import Dialect

from .._core import DEFAULT_TTL
from .._errors import FenceSetupError, issuer_error
from .._fence import Fence
from .._flow import Flow, run_sync
from ..sql._issuer import Execute, FlowsIssuer, SqlFlows
from ..sql._schema import db_now

T = TypeVar("T")

#: The SQLAlchemy dialect that writes each Django vendor's SQL, with Django's ``%s``
#: placeholders (Django turns them into SQLite's ``?``). (Their constructors are untyped.)
_DIALECTS: dict[str, Dialect] = {
    "sqlite": SQLiteDialect(paramstyle="format"),
    "postgresql": PGDialect(paramstyle="format"),  # type: ignore[no-untyped-call]
}


def clock_sql(vendor: str) -> str:
    """The database's clock in seconds since the epoch as SQL (``fencing.sql``'s
    ``db_now``, the clock the leases' expiries are on), for a Django ``RawSQL``."""
    return str(db_now(vendor).compile(dialect=_DIALECTS[vendor]))


class DjangoRows:
    """What ``fencing.sql``'s flows read of a statement's result (see ``_issuer.read``),
    taken from a Django cursor."""

    def __init__(self, cursor: Any) -> None:
        self.returns_rows = cursor.description is not None
        self.rows: list[Sequence[Any]] = list(cursor.fetchall()) if self.returns_rows else []
        self.rowcount: int = cursor.rowcount

    def __iter__(self) -> Iterator[Sequence[Any]]:
        return iter(self.rows)


class DjangoPort:
    """Where a flow's statements run: compiled for ``dialect``, executed on ``cursor``."""

    def __init__(self, cursor: Any, dialect: Dialect) -> None:
        self.cursor = cursor
        self.dialect = dialect

    def execute(self, statement: Executable, values: dict[str, Any] | None = None) -> DjangoRows:
        # every statement of SqlFlows is a ClauseElement (an insert, update or select)
        compiled = self.dialect.statement_compiler(self.dialect, cast(ClauseElement, statement))
        params = compiled.construct_params(values)
        positions = compiled.positiontup or []
        self.cursor.execute(compiled.string, [params[name] for name in positions])
        return DjangoRows(self.cursor)


#: Connections a forked child found in its pools: its parent's (the same sockets). Kept,
#: never closed nor collected in the child: closing one (or freeing it, which closes it)
#: would end the parent's session on PostgreSQL.
_inherited: list[Any] = []


def _missing_table(exc: Error, using: str) -> FenceSetupError | None:
    text = str(exc)
    if "fencing_leases" not in text:
        return None
    if "no such table" not in text and "does not exist" not in text:
        return None
    return FenceSetupError(
        f"the table fencing_leases is missing from Django's database {using!r}: "
        f"run `manage.py migrate fencing --database {using}` "
        f"(INSTALLED_APPS must include 'fencing.django')"
    )


class DjangoIssuer(FlowsIssuer):
    """The issuer on the Django database ``using`` (see the module docstring): fences,
    ``status``, ``names`` and ``force_release`` (``fencing.issuer.Inspects``,
    ``ForceReleases``, written once in ``FlowsIssuer``) on its ``fencing_leases`` table,
    each flow run here on a Django cursor. One per alias is enough (``issuer``)."""

    def __init__(self, using: str = DEFAULT_DB_ALIAS) -> None:
        if not isinstance(using, str):
            raise TypeError(f"using must be a database alias (str), not {type(using).__name__}")
        vendor = connections[using].vendor  # ConnectionDoesNotExist for an unknown alias
        if vendor not in _DIALECTS:
            raise ValueError(
                f"fencing.django's issuer runs on SQLite and PostgreSQL, not {vendor!r} "
                f"(database {using!r})"
            )
        self.using = using
        self.flows = SqlFlows(vendor)
        self._dialect = _DIALECTS[vendor]
        self._begin = "BEGIN IMMEDIATE" if vendor == "sqlite" else "BEGIN"
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"DjangoIssuer(using={self.using!r})"

    def _take(self) -> Any:
        """An idle connection of the pool, or a new one."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's are not ours
                _inherited.extend(self._idle)
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        conn = connections.create_connection(self.using)
        conn.inc_thread_sharing()  # handed between threads, used by one at a time
        return conn

    def close(self) -> None:
        """Close the idle connections (a later call opens new ones)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _run(self, flow: Flow[Execute, T]) -> T:
        conn = self._take()
        try:
            with conn.cursor() as cursor:
                cursor.execute(self._begin)
                try:
                    value = run_sync(flow, DjangoPort(cursor, self._dialect))
                except BaseException:
                    cursor.execute("ROLLBACK")
                    raise
                cursor.execute("COMMIT")
        except Error as exc:
            with contextlib.suppress(Error):  # its state is unknown: never used again
                conn.close()
            raise (_missing_table(exc, self.using) or issuer_error(repr(self), exc)) from exc
        except BaseException:
            conn.close()  # interrupted between statements: never used again
            raise
        with self._lock:
            self._idle.append(conn)
        return value


_issuers: dict[str, DjangoIssuer] = {}
_issuers_lock = threading.Lock()


def issuer(using: str = DEFAULT_DB_ALIAS) -> DjangoIssuer:
    """The process's one issuer on the database ``using`` (the one ``fence`` uses); also a
    ``FencedTask``'s ``fence_issuer``, so that Celery tasks take their leases there."""
    with _issuers_lock:
        shared = _issuers.get(using)
        if shared is None:
            shared = _issuers[using] = DjangoIssuer(using)
        return shared


def fence(
    name: str,
    ttl: float = DEFAULT_TTL,
    *,
    using: str = DEFAULT_DB_ALIAS,
    reentrant: bool = False,
) -> Fence:
    """A fence issued by Django's database ``using`` (default ``"default"``), on the
    ``fencing_leases`` table of ``manage.py migrate``; the same API and guarantees as
    every ``fencing.Fence``::

        with fencing.django.fence(f"invoice:{pk}", ttl=30).hold() as token:
            invoice = fencing.django.fenced_get(Invoice, token, pk=pk)
            ...
            invoice.save(fence_token=token)
    """
    return Fence(issuer(using), name, ttl, reentrant=reentrant)
