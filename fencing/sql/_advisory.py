"""Leases as session-level advisory locks (``lease=advisory``): PostgreSQL's advisory
locks, MySQL's and MariaDB's ``GET_LOCK``; tokens from ``fencing_leases``. The blocking
issuer; the logic is written once as flows (``_advisory_flows``), the statements once
per database (``_advisory_statements``), and the asyncio issuer (``_async_advisory``)
drives the same flows.

A lease is a lock (PostgreSQL: ``pg_try_advisory_lock(k1, k2)``, the keys of
``advisory_keys(name)``; MySQL: ``GET_LOCK(lock_name(name), 0)``) held by a connection
the issuer keeps checked out of its pool for the lease's whole life, one connection per
held lease. The lease ends when the lock is let go (release) or when that connection's
server session ends, whatever ends it: the holder's crash, a network cut noticed by the
server, ``pg_terminate_backend``/``KILL`` (``fencing release --force``), an idle timeout
(``idle_session_timeout``, ``wait_timeout``).

Every operation on a lease connection runs in autocommit mode, one statement each:

- acquire: the lock and the token in one statement, so one transaction (PostgreSQL:
  ``WITH lock AS MATERIALIZED (SELECT pg_try_advisory_lock(k1, k2) AS got) INSERT INTO
  fencing_leases ... SELECT ... FROM lock WHERE got ON CONFLICT (name) DO UPDATE SET
  token = greatest(token + 1, clock) RETURNING token, pg_backend_pid()``; MySQL: ``INSERT
  ... SELECT ... FROM DUAL WHERE GET_LOCK(:lock, 0) = 1 ON DUPLICATE KEY UPDATE token =
  LAST_INSERT_ID(GREATEST(token + 1, clock))``, the token in the reply's insert id); the
  token is clock-floored as the ``row`` issuer's (a row deleted by hand does not restart
  it). Nothing changed: the lock is held by someone else (``Busy``, with no expiry to
  report). The counter is the ``row`` leases' counter, so both kinds of lease of one
  name share one token sequence; the advisory acquire touches neither ``holder`` nor
  ``expires_at``.
- renew: a check, not an extension (the lease has no expiry): the lock is still held by
  this connection's own session, and that session is still the one that took it (a
  pooler in transaction mode would hand the statement to another server connection).
  Any error on the connection means the connection, and with it the lock, is gone:
  ``False`` (``LeaseLost``).
- release: the unlock; the connection is used again (kept for the next acquire, or back
  to the pool) only if that returned true, and is closed otherwise.

The issuer's own engine does not ping connections at checkout (``pool_pre_ping``: a
round trip on every acquire); an acquire, a wait or a read that finds its pooled
connection dead runs once more on a new connection (``once_more``).

The hot path is kept short (``benchmarks/advisory_family.py``, ``mysql_advisory_family.py``):
the lease statements are sent with the driver's own cursor on the pool's DBAPI
connection (``_driver``), not through SQLAlchemy's ``Connection``, and a released
lease's connection is kept by the issuer for its next acquire (up to ``KEPT``, on its
own engine only) instead of going back to the pool: an acquire + release is two
statements, two round trips, and little else.

Poolers: a session lock is only a lease if the connection keeps one server session for
the lease's life. The first time a connection takes a lease (the verdict is kept in the
pooled connection's ``info``), ``_check_session`` proves it, or refuses the lease with
``FenceSetupError`` after letting the lock go:

- direct: the server sees, as its peer (PostgreSQL's ``inet_client_addr()``,
  ``inet_client_port()``; MySQL's ``PROCESSLIST.HOST``), the very socket this connection
  has (``getsockname``), and the session has not moved. No proxy sits in between, so the
  session is the connection's. No extra connection.
- otherwise (a pooler, a TCP proxy, NAT, a Unix socket) the session id is read again on
  the lease's connection, and a *probe*, another connection of the same engine, reads
  its own at once. A pooler that keeps sessions (pgbouncer's session mode, a 1:1 proxy)
  never lets the probe reach the lease's session, nor moves the lease's connection to
  another one; one that pools transactions (pgbouncer's transaction or statement mode)
  hands its most recently freed server connection, the lease's, to the probe (pgbouncer
  reuses server connections last-in first-out). Either sighting refuses the lease. The
  check never refuses a connection that keeps its session; a transaction pooler that
  hands the probe another server connection escapes it, and the renew check still
  reports the lease lost when the lease's connection moves.
- the lock is let go where it is: the probe unlocks it in the statement that finds it
  on the lease's session; if the lease's connection moved, the session that took the
  lock is ended (``pg_terminate_backend``, ``KILL``), the only way to reach it.

A session lock taken by a statement that then fails stays locked despite the rollback,
so a lease connection that saw any error, an interrupt or a cancellation is closed, never
pooled: nothing is ever left locked by a failed acquire.

Waiting (``WakesOnRelease``): a waiter blocks in the lock itself on a pooled connection,
for at most the time it may wait (PostgreSQL: ``pg_advisory_lock`` under a ``lock_timeout``
set for that statement; MySQL: ``GET_LOCK(name, seconds)``), and lets it go in the same
statement once granted, then tries again. The lock manager wakes it at the very moment
the lock is freed, by a release, a crash or a termination alike, and nothing polls.

Operators (``Inspects``, ``ForceReleases``): ``status`` is one read of the lock's holder
(``pg_locks`` joined with ``pg_stat_activity``; ``IS_USED_LOCK`` and the process list)
and the counter; ``force_release`` ends the holder's session (``pg_terminate_backend``,
``KILL``) and waits for its lock to go; the next token is above the evicted holder's
because the counter only grows.

Imports the core fences, flows and sharing, the SQL engines and the advisory flows,
SQLAlchemy.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL

from .._base.flow import Flow, run_sync
from .._base.shared import Shared
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from ..issuer import Busy, FenceStatus
from ._advisory_flows import AdvisoryFlows, Step, T, translated
from ._engines import (
    _SYNC_DRIVERS,
    _SYNC_KEPT,
    _with_driver,
    parse_sql_url,
)
from ._schema import ADVISORY_BACKENDS


def advisory_url(source: str | URL) -> URL:
    """The URL of a PostgreSQL, MySQL or MariaDB database for advisory leases; a ValueError
    for another database."""
    url = parse_sql_url(source)
    if url.get_backend_name() not in ADVISORY_BACKENDS:
        raise ValueError(
            "advisory leases need PostgreSQL, MySQL or MariaDB, not "
            f"{url.get_backend_name()!r} (use lease=row)"
        )
    return url


def advisory_engine(source: Engine | str) -> Engine:
    """The engine of the blocking issuer: the user's, or one of its own for a URL (its
    side's driver: psycopg, PyMySQL) whose pool keeps 5 idle connections and opens more
    without limit (a lease holds one for its whole life, so a bounded pool would make an
    acquire wait for a connection)."""
    if isinstance(source, Engine):
        advisory_url(source.url)
        return source
    url = _with_driver(advisory_url(source), _SYNC_DRIVERS, _SYNC_KEPT)
    # No pool_pre_ping: it costs a round trip on every checkout, a third of an acquire;
    # the issuer instead tries once more when a pooled connection turns out dead (``once_more``).
    # In autocommit, as every lease statement runs: no isolation level switched at each
    # checkout and back at each return.
    return create_engine(url, pool_size=5, max_overflow=-1, isolation_level="AUTOCOMMIT")


def owns(engine: object, source: object) -> bool:
    """Whether an issuer made ``engine`` itself from ``source`` (a URL; for the asyncio
    issuer also a blocking ``Engine``, of which it takes the URL) rather than taking the
    user's engine as is. Its own engine is the issuer's alone: in autocommit, unbounded,
    connections kept out of it, disposed of by ``close()``. A user's engine is borrowed:
    switched to autocommit per checkout, its connections always given back, never
    disposed of (the user goes on using it)."""
    return engine is not source


class AdvisoryIssuer:
    """Leases as session-level advisory locks on PostgreSQL, MySQL or MariaDB (an
    ``Engine`` or URL); see the module docstring. The ``fencing_leases`` table must exist
    (``fencing migrate``).

    It wakes waiters on release (``fencing.issuer.WakesOnRelease``) and can be inspected
    and force-released (``Inspects``, ``ForceReleases``). ``ttl`` does not bound a lease:
    ``renew`` checks that the lock still stands, and ``hold()`` does so every ttl/3.
    """

    def __init__(self, engine: Engine | str) -> None:
        self.engine = advisory_engine(engine)
        self.flows = AdvisoryFlows(
            self.engine.dialect.name, owns(self.engine, engine), threading.Lock
        )

    def __repr__(self) -> str:
        return f"AdvisoryIssuer({self.engine.url.render_as_string()!r})"

    def _run(self, flow: Flow[Step, T]) -> T:
        return run_sync(translated(flow, self.engine.url), self.engine)

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self._run(self.flows.try_acquire(name, holder, ttl_ms))

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self._run(self.flows.renew(name, token, holder, ttl_ms))

    def release(self, name: str, token: int, holder: str) -> bool:
        return self._run(self.flows.release(name, token, holder))

    def await_release(self, name: str, seconds: float) -> None:
        """Block until the lock of ``name`` is free or ``seconds`` pass."""
        self._run(self.flows.await_release(name, seconds))

    def status(self, name: str) -> FenceStatus:
        return self._run(self.flows.status(name))

    def names(self, prefix: str = "") -> Iterator[str]:
        return iter(self._run(self.flows.names(prefix)))

    def force_release(self, name: str) -> FenceStatus:
        return self._run(self.flows.force_release(name))

    def close(self) -> None:
        """End every lease this issuer holds (their connections are closed, so their locks
        go) and dispose of the engine's pool if the engine is the issuer's own (``owns``):
        a user's engine stays usable."""
        self._run(self.flows.close())


_issuers: Shared[str, AdvisoryIssuer] = Shared(AdvisoryIssuer, AdvisoryIssuer.close)


def shared_advisory_issuer(url: str) -> AdvisoryIssuer:
    """One blocking advisory issuer (and one pool) per URL in this process, closed at
    exit (its leases end with their connections, as they would with the process)."""
    return _issuers.get(url)


class AdvisoryFence(Fence):
    """A fence whose lease is a session-level advisory lock (PostgreSQL, MySQL, MariaDB).

    ``AdvisoryFence(engine_or_url, "invoice:42", ttl=10)`` (or
    ``fencing.connect("postgresql://...?lease=advisory").fence(...)``): the same API and
    token guarantees as every ``Fence``; the lease lasts until released or until its
    connection ends, and ``ttl`` is how often ``hold()`` checks it (every ttl/3).
    """

    def __init__(
        self,
        engine: Engine | str,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: AdvisoryIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        if issuer is None:
            issuer = shared_advisory_issuer(engine) if isinstance(engine, str) else None
        super().__init__(issuer or AdvisoryIssuer(engine), name, ttl, reentrant=reentrant)
