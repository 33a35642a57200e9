"""The SQL issuer: leases and token counters in the ``fencing_leases`` table.

Every operation is one transaction and, on both databases, one statement whose WHERE
clause is the whole decision (time from the database's clock, never the client's):

- acquire: ``INSERT ... ON CONFLICT (name) DO UPDATE SET token = token + 1, ...
  WHERE holder IS NULL OR expires_at <= now RETURNING token``. No row back means the
  lease is taken; a second read then reports how long it has left (``Busy``).
- renew / release: ``UPDATE ... WHERE name, token, holder match AND expires_at > now``;
  one row changed means it was ours. Release clears holder and expiry, keeps the counter.

The statements are built once by pure functions (``Plan``); ``SqlIssuer`` runs them on a
``Connection`` and ``AsyncSqlIssuer`` (``_async_issuer``) on an ``AsyncConnection``,
each in one short method.
Nothing wakes waiters on release (``wakes_on_release = False``): the core backs off with
jitter. Imports the core fences, the schema and engine helpers, and SQLAlchemy.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import CursorResult, Engine, Executable, and_, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from .._core import DEFAULT_TTL
from .._fence import Fence
from .._protocol import Busy
from ._engines import issuer_engine, sql_errors
from ._schema import db_now, leases

T = TypeVar("T")


@dataclass(frozen=True)
class Reply:
    """What a statement returned, read the same way from sync and async results."""

    rowcount: int
    rows: list[tuple[Any, ...]]


def read(result: CursorResult[Any]) -> Reply:
    rows = [tuple(row) for row in result] if result.returns_rows else []
    return Reply(result.rowcount, rows)


@dataclass(frozen=True)
class Plan(Generic[T]):
    """One statement and the meaning of its reply: a value, or the next ``Plan`` to run."""

    statement: Executable
    meaning: Callable[[Reply], T | Plan[T]]


def _upsert(dialect: str) -> Any:
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def acquire_plan(dialect: str, name: str, holder: str, ttl_ms: int) -> Plan[int | Busy]:
    now = db_now(dialect)
    insert = _upsert(dialect)(leases).values(
        name=name, token=1, holder=holder, expires_at=now + ttl_ms / 1000.0
    )
    statement = insert.on_conflict_do_update(
        index_elements=[leases.c.name],
        set_={
            "token": leases.c.token + 1,
            "holder": insert.excluded.holder,
            "expires_at": insert.excluded.expires_at,
        },
        where=or_(leases.c.holder.is_(None), leases.c.expires_at <= now),
    ).returning(leases.c.token)

    def meaning(reply: Reply) -> int | Busy | Plan[int | Busy]:
        if reply.rows:
            return int(reply.rows[0][0])
        return busy_plan(dialect, name)

    return Plan(statement, meaning)


def busy_plan(dialect: str, name: str) -> Plan[int | Busy]:
    statement = select(leases.c.expires_at - db_now(dialect)).where(leases.c.name == name)

    def meaning(reply: Reply) -> Busy:
        left = reply.rows[0][0] if reply.rows else None
        return Busy(None if left is None else max(0.0, float(left)))

    return Plan(statement, meaning)


def _held(dialect: str, name: str, token: int, holder: str) -> Any:
    return and_(
        leases.c.name == name,
        leases.c.token == token,
        leases.c.holder == holder,
        leases.c.expires_at > db_now(dialect),
    )


def _one_row(reply: Reply) -> bool:
    return reply.rowcount == 1


def renew_plan(dialect: str, name: str, token: int, holder: str, ttl_ms: int) -> Plan[bool]:
    statement = (
        update(leases)
        .where(_held(dialect, name, token, holder))
        .values(expires_at=db_now(dialect) + ttl_ms / 1000.0)
    )
    return Plan(statement, _one_row)


def release_plan(dialect: str, name: str, token: int, holder: str) -> Plan[bool]:
    statement = (
        update(leases)
        .where(_held(dialect, name, token, holder))
        .values(holder=None, expires_at=None)
    )
    return Plan(statement, _one_row)


class _Plans:
    """Builds the plans for one engine's dialect; shared by the sync and async issuers."""

    wakes_on_release = False
    dialect: str

    def _acquire(self, name: str, holder: str, ttl_ms: int) -> Plan[int | Busy]:
        return acquire_plan(self.dialect, name, holder, ttl_ms)

    def _renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Plan[bool]:
        return renew_plan(self.dialect, name, token, holder, ttl_ms)

    def _release(self, name: str, token: int, holder: str) -> Plan[bool]:
        return release_plan(self.dialect, name, token, holder)


def advance(plan: Plan[T], result: CursorResult[Any]) -> T | Plan[T]:
    return plan.meaning(read(result))


class SqlIssuer(_Plans):
    """Issuer on SQLite or PostgreSQL (an ``Engine`` or URL); see the module docstring.

    The ``fencing_leases`` table must exist: run ``fencing migrate`` (or
    ``fencing.sql.create_tables``); SQLite files get it automatically on first use.
    """

    def __init__(self, engine: Engine | str) -> None:
        self.engine = issuer_engine(engine)
        self.dialect = self.engine.dialect.name
        self._ready = False
        self._ready_lock = threading.Lock()

    def _run(self, plan: Plan[T]) -> T:
        self._ensure_tables()
        with sql_errors(), self.engine.begin() as conn:
            while isinstance(step := advance(plan, conn.execute(plan.statement)), Plan):
                plan = step
            return step

    def _ensure_tables(self) -> None:
        if self._ready:
            return
        with self._ready_lock, sql_errors("creating the fencing tables"):
            if not self._ready and self.dialect == "sqlite":
                from ._migrate import create_tables

                create_tables(self.engine)
            self._ready = True

    def try_acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> int | Busy:
        return self._run(self._acquire(name, holder, ttl_ms))

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self._run(self._renew(name, token, holder, ttl_ms))

    def release(self, name: str, token: int, holder: str) -> bool:
        return self._run(self._release(name, token, holder))

    def await_release(self, name: str, holder: str, seconds: float) -> None:
        threading.Event().wait(seconds)


_issuers: dict[object, SqlIssuer] = {}
_engine_issuers: weakref.WeakKeyDictionary[Engine, SqlIssuer] = weakref.WeakKeyDictionary()
_issuers_lock = threading.Lock()


def shared_issuer(source: Engine | str) -> SqlIssuer:
    """One issuer (and one pool) per engine or URL in this process."""
    with _issuers_lock:
        cache: Any = _engine_issuers if isinstance(source, Engine) else _issuers
        issuer: SqlIssuer | None = cache.get(source)
        if issuer is None:
            issuer = cache[source] = SqlIssuer(source)
        return issuer


class SqlFence(Fence):
    """A fence issued by a SQLite file or a PostgreSQL database.

    ``SqlFence(engine_or_url, "invoice:42", ttl=10)``; the same API and guarantees as
    every ``Fence``. Fences on the same engine or URL share one issuer and its pool.
    """

    def __init__(
        self,
        engine: Engine | str,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: SqlIssuer | None = None,
    ) -> None:
        super().__init__(issuer or shared_issuer(engine), name, ttl)
