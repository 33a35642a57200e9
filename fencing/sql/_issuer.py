"""The SQL issuer: leases and token counters in the ``fencing_leases`` table.

Every operation is one transaction and, on both databases, one statement whose WHERE
clause is the whole decision (time from the database's clock, never the client's):

- acquire: ``INSERT ... ON CONFLICT (name) DO UPDATE SET token = max(token + 1, clock),
  ... WHERE holder IS NULL OR expires_at <= now RETURNING token``, where ``clock`` is the
  database's clock in microseconds (a new row starts there too, so a row deleted by hand
  does not restart its tokens at 1). No row back means the lease is taken; a second
  read then reports how long it has left (``Busy``).
- renew / release: ``UPDATE ... WHERE name, token, holder match AND expires_at > now``;
  one row changed means it was ours. Release clears holder and expiry, keeps the counter.

The operators' calls (``Inspects``, ``ForceReleases``): ``status`` is one read;
``force_release`` reads the live lease with ``FOR UPDATE`` and clears it by its exact
token and holder in the same transaction; the counter stays, so the next token is
higher than the one it ended.

The operations are written once as flows of named statements (``SqlFlows``, in the
core's ``fencing._sql.flows``, shared with ``fencing.django``'s issuer, which needs no
SQLAlchemy); the statements themselves are SQLAlchemy constructs, built once per
dialect (``_issuer_statements``). ``SqlIssuer`` drives the flows on a ``Connection``
(its calls written once in ``FlowsIssuer``) and ``AsyncSqlIssuer`` (``_async_issuer``)
on an ``AsyncConnection``, each inside one transaction.
Nothing wakes a fence's waiters on release (no capability): the core backs off with
jitter. A read-write lock's waiter (``rw_await``) is woken by a release or force-release
of its lock made through the same issuer (``Wakes``, in this process), and else tries
again every ``RW_POLL`` seconds (another process's release, a lease that expired).

The rate limiters' ``admit`` (``fencing_admissions``, see ``_schema.admissions``) is one
transaction too: first an upsert of the limiter's lock row, which serializes the
requests of one limiter (PostgreSQL's row lock, SQLite's ``BEGIN IMMEDIATE``) and returns
the database's clock in µs read *after* the lock was taken; then, on that time, a count
of the window's admissions, the deletion of those that no longer count, and the insert
of the new one when it is admitted.
Imports the core fences and SQL flows, the statements and engine helpers, and SQLAlchemy.
"""

from __future__ import annotations

import threading
import weakref

from sqlalchemy import Engine

from .._base.flow import Flow, run_sync
from .._base.shared import Shared
from .._base.waits import Wakes
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from .._primitives.limiter import Admission, LimitUse
from .._sql.flows import RW_POLL, Execute, FlowsIssuer, SqlFlows, T
from ..issuer import Busy, RWStatus
from . import _driver
from ._engines import issuer_engine, sql_errors
from ._errors import check_innodb
from ._issuer_statements import DriverPort, SqlPort, statements
from ._schema import MYSQL


class SqlIssuer(FlowsIssuer):
    """Issuer on SQLite, PostgreSQL, MySQL or MariaDB (an ``Engine`` or URL); see the
    module docstring (and docs/mysql.md for what differs on MySQL and MariaDB).

    The ``fencing_leases`` table must exist: run ``fencing migrate`` (or
    ``fencing.sql.create_tables``); SQLite files get it automatically on first use.
    Without it, every call raises ``FenceSetupError`` naming the command to run. It can
    be inspected and force-released (``fencing.issuer.Inspects``, ``ForceReleases``).
    """

    def __init__(self, engine: Engine | str) -> None:
        self.engine = issuer_engine(engine)
        self.dialect = self.engine.dialect.name
        #: On its own engine (from a URL; not SQLite's, whose ``BEGIN IMMEDIATE`` is a
        #: ``Connection``'s event), a flow runs on the pool's DBAPI connection: all its
        #: connections are set up at connect, nothing per ``Connection`` is needed.
        self._raw = not isinstance(engine, Engine) and self.dialect != "sqlite"
        self.flows = SqlFlows()
        self.statements = statements(self.dialect)
        self._ready = False
        self._ready_lock = threading.Lock()
        #: the read-write locks' waiters, by lock name, woken by a release made here
        self.wakes = Wakes()

    def _run(self, flow: Flow[Execute, T]) -> T:
        self._ensure_tables()
        with sql_errors(url=self.engine.url):
            if not self._raw:
                with self.engine.begin() as conn:
                    return run_sync(flow, SqlPort(conn, self.statements))
            with _driver.transaction(self.engine) as raw:
                return run_sync(flow, DriverPort(self.engine, raw, self.statements))

    def _ensure_tables(self) -> None:
        if self._ready:
            return
        with self._ready_lock, sql_errors("creating the fencing tables", self.engine.url):
            if not self._ready and self.dialect == "sqlite":
                from ._migrate import create_tables

                create_tables(self.engine)
            if not self._ready and self.dialect in MYSQL:
                with self.engine.connect() as conn:
                    check_innodb(conn)
            self._ready = True

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """``fencing.issuer.ReadWrites``: one transaction (``SqlFlows.rw_acquire``)."""
        return self._run(self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms))

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """``fencing.issuer.ReadWrites``: one statement."""
        return self._run(self.flows.rw_renew(name, mode, token, holder, ttl_ms))

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        """``fencing.issuer.ReadWrites``: one statement; wakes the lock's waiters here."""
        ended = self._run(self.flows.rw_release(name, mode, token, holder))
        return self.wakes.released(name, ended)

    def rw_force_release(self, name: str) -> RWStatus:
        """``fencing.issuer.OperatesReadWrites``; wakes the lock's waiters here."""
        ended = super().rw_force_release(name)
        self.wakes.wake(name)
        return ended

    def rw_await(self, name: str, seconds: float) -> None:
        """``fencing.issuer.ReadWrites``: until a release of the lock through this issuer
        wakes it, or ``RW_POLL`` seconds (at most ``seconds``): nothing in the database
        wakes a waiter of another process, so it tries again that often."""
        woken = threading.Event()
        with self.wakes.waiting(name, woken.set):
            woken.wait(min(seconds, RW_POLL))

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """One request of the rate limiter ``name``: one transaction, the database's clock."""
        return self._run(self.flows.admit(name, limit, per_ms, window))

    def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """The use of the rate limiter ``name`` now, on the database's clock."""
        return self._run(self.flows.limit_use(name, per_ms, window))


#: A URL's issuer owns its engine: its pool is disposed of at exit. An engine's issuer
#: lives as long as the caller's engine, which is the caller's to dispose of.
_issuers: Shared[str, SqlIssuer] = Shared(SqlIssuer, lambda issuer: issuer.engine.dispose())
_engine_issuers: weakref.WeakKeyDictionary[Engine, SqlIssuer] = weakref.WeakKeyDictionary()
_engine_issuers_lock = threading.Lock()


def shared_issuer(source: Engine | str) -> SqlIssuer:
    """One issuer (and one pool) per engine or URL in this process."""
    if not isinstance(source, Engine):
        return _issuers.get(source)
    with _engine_issuers_lock:
        issuer = _engine_issuers.get(source)
        if issuer is None:
            issuer = _engine_issuers[source] = SqlIssuer(source)
        return issuer


class SqlFence(Fence):
    """A fence issued by a SQLite file or a PostgreSQL, MySQL or MariaDB database.

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
        reentrant: bool = False,
    ) -> None:
        super().__init__(issuer or shared_issuer(engine), name, ttl, reentrant=reentrant)
