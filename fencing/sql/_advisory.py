"""Leases as PostgreSQL session-level advisory locks (``lease=advisory``), tokens from
``fencing_leases``.

A lease is ``pg_try_advisory_lock(k1, k2)`` (the keys of ``advisory_keys(name)``) held by
a connection the issuer keeps checked out of its pool for the lease's whole life, one
connection per held lease. The lease ends when the lock is unlocked (release) or when
that connection ends, whatever ends it: the holder's crash, a network cut noticed by the
server, ``pg_terminate_backend`` (``fencing release --force``), ``idle_session_timeout``.

Every operation on a lease connection runs in autocommit mode, one statement each:

- acquire: ``WITH lock AS MATERIALIZED (SELECT pg_try_advisory_lock(k1, k2) AS got)
  INSERT INTO fencing_leases ... SELECT ... FROM lock WHERE got ON CONFLICT (name) DO
  UPDATE SET token = greatest(token + 1, clock) RETURNING token, pg_backend_pid()``: the
  lock and the token in one statement, so one transaction; the token is clock-floored
  as the ``row`` issuer's (a row deleted by hand does not restart it). No row back: the
  lock is held by someone else (``Busy``, with no expiry to report). The counter is the
  ``row`` leases' counter, so both kinds of lease of one name share one token sequence;
  the advisory acquire touches neither ``holder`` nor ``expires_at``.
- renew: a check, not an extension (the lease has no expiry): the lock is still granted
  to this connection's own ``pg_backend_pid()`` in ``pg_locks``, and that pid is still
  the one that took it (a pooler in transaction mode would hand the statement to another
  server connection). Any error on the connection means the connection, and with it the
  lock, is gone: ``False`` (``LeaseLost``).
- release: ``pg_advisory_unlock(k1, k2)``; the connection is used again (kept for the
  next acquire, or back to the pool) only if that returned true, and is closed otherwise.

The issuer's own engine does not ping connections at checkout (``pool_pre_ping``: a
round trip on every acquire); an acquire, a wait or a read that finds its pooled
connection dead runs once more on a new connection (``once_more``).

The hot path is kept short (``benchmarks/advisory_family.py``): the lease statements are
sent with the driver's own cursor on the pool's DBAPI connection (``_driver``), not
through SQLAlchemy's ``Connection``, and a released lease's connection is kept by the
issuer for its next acquire (up to ``KEPT``, on its own engine only) instead of going
back to the pool: an acquire + release is two statements, two round trips, and little
else.

Poolers: a session lock is only a lease if the connection keeps one server session for
the lease's life. The first time a connection takes a lease (the verdict is kept in the
pooled connection's ``info``), ``check_session`` proves it, or refuses the lease with
``FenceSetupError`` after letting the lock go:

- direct: the server sees, as its peer (``inet_client_addr()``, ``inet_client_port()``),
  the very socket this connection has (``getsockname``), and the pid has not moved. No
  proxy sits in between, so the session is the connection's. No extra connection.
- otherwise (a pooler, a TCP proxy, NAT, a Unix socket) the pid is read again on the
  lease's connection, and a *probe*, another connection of the same engine, reads its
  own pid at once. A pooler that keeps sessions (pgbouncer's session mode, a 1:1 proxy)
  never lets the probe reach the lease's backend, nor moves the lease's connection to
  another one; one that pools transactions (pgbouncer's transaction or statement mode)
  hands its most recently freed server connection, the lease's, to the probe (pgbouncer
  reuses server connections last-in first-out). Either sighting refuses the lease. The
  check never refuses a connection that keeps its session; a transaction pooler that
  hands the probe another server connection escapes it, and the renew check (the pid)
  still reports the lease lost when the lease's connection moves.
- the lock is let go where it is: the probe unlocks it in the statement that finds it
  on the lease's backend; if the lease's connection moved, the backend that took the
  lock is terminated (``pg_terminate_backend``), the only way to reach it.

A session lock taken by a statement that then fails stays locked despite the rollback,
so a lease connection that saw any error, an interrupt or a cancellation is closed, never
pooled: nothing is ever left locked by a failed acquire.

Waiting (``WakesOnRelease``): a waiter blocks in ``pg_advisory_lock(k1, k2)`` with
``SET LOCAL lock_timeout`` on a pooled connection and unlocks in the same statement once
granted, then tries again. PostgreSQL's lock manager wakes it at the very moment the
lock is freed, by a release, a crash or a termination alike (``LISTEN``/``NOTIFY`` would
say nothing when a holder's connection just ends), and nothing polls.

Operators (``Inspects``, ``ForceReleases``): ``status`` is one read of ``pg_locks`` joined
with ``pg_stat_activity`` and the counter; ``force_release`` terminates the holder's
backend with ``pg_terminate_backend(pid, 5000)`` (PostgreSQL 14+, which waits for the
backend to end) in that same statement; the next token is above the evicted holder's
because the counter only grows.

Imports the core fences and flows, the SQL engines, ``_driver``, key and schema helpers,
SQLAlchemy.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, TextClause, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection

from .._base.errors import FenceSetupError
from .._base.shared import Shared
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from ..issuer import Busy, FenceStatus
from . import _driver
from ._engines import parse_sql_url, sql_errors
from ._keys import advisory_keys

T = TypeVar("T")

#: The database clock in whole microseconds: the token floor (as ``_schema.db_micros``).
_CLOCK = "floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"

#: Lock and count in one statement (autocommit: one transaction). Row: (token, pid).
ACQUIRE = text(
    "WITH lock AS MATERIALIZED "
    "(SELECT pg_try_advisory_lock(CAST(:k1 AS int4), CAST(:k2 AS int4)) AS got) "
    "INSERT INTO fencing_leases AS l (name, token) "
    f"SELECT :name, {_CLOCK} FROM lock WHERE got "
    "ON CONFLICT (name) DO UPDATE "
    f"SET token = greatest(l.token + 1, {_CLOCK}) "
    "RETURNING l.token, pg_backend_pid()"
)

#: ``pg_locks`` rows of the advisory lock of (k1, k2) in this database: the two-int4 form
#: shows k1 and k2 as ``classid``/``objid`` (oids, so unsigned) with ``objsubid`` 2.
_LOCK_ROWS = (
    "p.locktype = 'advisory' AND p.objsubid = 2 AND p.granted "
    "AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND p.classid::int8 = :c1 AND p.objid::int8 = :c2"
)

#: Row: (held by this connection's backend?, this backend's pid).
CHECK = text(
    f"SELECT EXISTS (SELECT 1 FROM pg_locks p WHERE {_LOCK_ROWS} "
    "AND p.pid = pg_backend_pid()), pg_backend_pid()"
)

RELEASE = text("SELECT pg_advisory_unlock(CAST(:k1 AS int4), CAST(:k2 AS int4))")

#: A waiter: blocks until the lock is free (or ``lock_timeout``), then lets it go at once.
WAIT = text(
    "SELECT pg_advisory_lock(CAST(:k1 AS int4), CAST(:k2 AS int4)), "
    "pg_advisory_unlock(CAST(:k1 AS int4), CAST(:k2 AS int4))"
)

#: Row: (this connection's backend pid, its peer's address and port as the server sees
#: them: NULL on a Unix socket).
PEER = text("SELECT pg_backend_pid(), host(inet_client_addr()), inet_client_port()")

#: On a probe connection. Row: (its backend pid, whether it let go of the lease's lock,
#: which it does only when it runs on the lease's backend ``:pid``).
PROBE = text(
    "SELECT pg_backend_pid(), CASE WHEN pg_backend_pid() = :pid "
    "THEN pg_advisory_unlock(CAST(:k1 AS int4), CAST(:k2 AS int4)) ELSE false END"
)

#: Ends the backend ``:pid`` if it still holds the lock (its lease refused; unreachable).
END_HOLDER = text(
    f"SELECT pg_terminate_backend(p.pid, 5000) FROM pg_locks p WHERE {_LOCK_ROWS} AND p.pid = :pid"
)

#: Released lease connections an issuer keeps for its next acquires (``AdvisoryIssuer``).
KEPT = 5

#: ``Connection.info`` key: this pooled connection was shown to keep its session.
SESSION_KEPT = "fencing_session_kept"

POOLER_REFUSED = (
    "lease=advisory refused: {why}, so this connection does not keep one server session "
    "(a pooler in transaction or statement mode, such as pgbouncer's pool_mode = "
    "transaction?), and a session-level advisory lock would protect nothing. Connect "
    "directly or through a session-mode pool, or use lease=row or "
    "fencing.sql.advisory_xact. Nothing is left locked."
)

_HOLDER = (
    "SELECT (SELECT token FROM fencing_leases WHERE name = :name), p.pid, "
    "s.application_name, host(s.client_addr){extra} "
    "FROM pg_locks p LEFT JOIN pg_stat_activity s ON s.pid = p.pid "
    f"WHERE {_LOCK_ROWS}"
)
#: Rows: (last token, holder pid, application_name, client address), none when free.
STATUS = text(_HOLDER.format(extra=""))
#: The same, terminating the holder's backend (waiting up to 5 s for it to end).
FORCE = text(_HOLDER.format(extra=", pg_terminate_backend(p.pid, 5000)"))
LAST_TOKEN = text("SELECT token FROM fencing_leases WHERE name = :name")
NAMES = text("SELECT name FROM fencing_leases WHERE starts_with(name, :prefix) ORDER BY name")

#: SQLSTATE of ``lock_timeout`` expiring (``lock_not_available``).
LOCK_NOT_AVAILABLE = "55P03"


@functools.lru_cache(maxsize=1024)
def lock_params(name: str) -> Mapping[str, int]:
    """The bound parameters of the statements above for fence ``name`` (cached, read-only)."""
    k1, k2 = advisory_keys(name)
    return MappingProxyType({"k1": k1, "k2": k2, "c1": k1 & 0xFFFFFFFF, "c2": k2 & 0xFFFFFFFF})


@functools.lru_cache(maxsize=1024)
def acquire_params(name: str) -> Mapping[str, Any]:
    """The bound parameters of ``ACQUIRE``, ``STATUS`` and ``FORCE`` for fence ``name``."""
    return MappingProxyType({"name": name, **lock_params(name)})


def timeout_sql(seconds: float) -> TextClause:
    """``SET LOCAL lock_timeout`` to ``seconds`` (at least 1 ms: 0 would mean no limit)."""
    return text(f"SET LOCAL lock_timeout = {max(1, round(seconds * 1000))}")


def is_lock_timeout(exc: DBAPIError) -> bool:
    return getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE


def holder_status(name: str, rows: list[Any], last: int | None) -> FenceStatus:
    """The ``FenceStatus`` from ``STATUS``/``FORCE`` rows (``last``: the counter when free)."""
    if not rows:
        return FenceStatus(name, held=False, last_token=last)
    token, pid, app, addr = rows[0][:4]
    holder = f"pid {pid}" + (f", application_name {app!r}" if app else "")
    holder += f", client {addr}" if addr else ", client local socket"
    token = None if token is None else int(token)
    return FenceStatus(name, True, holder, token, None, token)


def socket_address(driver_connection: Any) -> tuple[str, int] | None:
    """The local (host, port) of a driver connection's TCP socket (psycopg, psycopg2,
    asyncpg); ``None`` when not known (another driver, a Unix socket)."""
    try:
        transport = getattr(driver_connection, "_transport", None)  # asyncpg
        if transport is not None:
            name = transport.get_extra_info("sockname")
        else:
            pgconn = getattr(driver_connection, "pgconn", None)  # psycopg 3
            fd = pgconn.socket if pgconn is not None else driver_connection.fileno()
            with socket.socket(fileno=os.dup(fd)) as sock:
                name = sock.getsockname()
    except Exception:
        return None
    if isinstance(name, tuple) and len(name) >= 2:
        return str(name[0]), int(name[1])
    return None


def is_direct(peer: tuple[Any, Any], local: tuple[str, int] | None) -> bool:
    """Whether the server's view of its peer, ``(host, port)`` from ``PEER``, is this very
    socket (``local``): then nothing sits between the connection and the server."""
    host, port = peer
    if host is None or port is None or local is None:
        return False
    try:
        return ipaddress.ip_address(str(host)) == ipaddress.ip_address(local[0]) and int(
            port
        ) == int(local[1])
    except ValueError:
        return False


def advisory_url(source: str | URL) -> URL:
    """The URL of a PostgreSQL database for advisory leases (psycopg by default)."""
    url = parse_sql_url(source)
    if url.get_backend_name() != "postgresql":
        raise ValueError(
            f"advisory leases need PostgreSQL, not {url.get_backend_name()!r} (use lease=row)"
        )
    if url.get_driver_name() not in ("psycopg", "psycopg2", "pg8000", "asyncpg"):
        url = url.set(drivername="postgresql+psycopg")
    return url


def advisory_engine(source: Engine | str | URL) -> Engine:
    """The engine of the blocking issuer: the user's, or one of its own for a URL whose
    pool keeps 5 idle connections and opens more without limit (a lease holds one for its
    whole life, so a bounded pool would make an acquire wait for a connection)."""
    if isinstance(source, Engine):
        advisory_url(source.url)
        return source
    url = advisory_url(source)
    if url.get_driver_name() == "asyncpg":
        url = url.set(drivername="postgresql+psycopg")
    # No pool_pre_ping: it costs a round trip on every checkout, a third of an acquire;
    # the issuer instead tries once more when a pooled connection turns out dead (``once_more``).
    # In autocommit, as every lease statement runs: no isolation level switched at each
    # checkout and back at each return (the waiter, which needs a transaction, switches).
    return create_engine(url, pool_size=5, max_overflow=-1, isolation_level="AUTOCOMMIT")


def owns(engine: object, source: object) -> bool:
    """Whether an issuer made ``engine`` itself from ``source`` (a URL; for the asyncio
    issuer also a blocking ``Engine``, of which it takes the URL) rather than taking the
    user's engine as is (as ``SqlIssuer`` does). Its own engine is the issuer's alone: in
    autocommit, unbounded, connections kept out of it, disposed of by ``close()``. A
    user's engine is borrowed: switched to autocommit per checkout, its connections
    always given back, never disposed of (the user goes on using it)."""
    return engine is not source


def once_more(exc: BaseException, attempt: int) -> bool:
    """Whether to run again, on a new connection, what failed with ``exc`` on attempt 1:
    only when the failure was a pooled connection found dead (a server restart, an idle
    connection cut), which SQLAlchemy has invalidated with the rest of the pool. What
    ``pool_pre_ping`` does, paid only when it happens. Safe for an acquire: a session lock
    taken on a dead connection ends with its session, and a token it bumped is skipped."""
    return attempt == 1 and isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


@dataclass
class Lease:
    """A held lease: its connection (checked out of the pool), its backend's pid, and a
    lock so that a renew and a release of it never use the connection at once."""

    connection: Any
    pid: int
    guard: Any = field(default_factory=threading.Lock)


class AdvisoryIssuer:
    """Leases as session-level advisory locks on PostgreSQL (an ``Engine`` or URL); see
    the module docstring. The ``fencing_leases`` table must exist (``fencing migrate``).

    It wakes waiters on release (``fencing.issuer.WakesOnRelease``) and can be inspected
    and force-released (``Inspects``, ``ForceReleases``). ``ttl`` does not bound a lease:
    ``renew`` checks that the lock still stands, and ``hold()`` does so every ttl/3.
    """

    def __init__(self, engine: Engine | str) -> None:
        self.engine = advisory_engine(engine)
        #: The engine is the issuer's own, not the user's (``owns``).
        self._owned = owns(self.engine, engine)
        self._leases: dict[tuple[str, int, str], Lease] = {}
        self._lock = threading.Lock()
        #: Connections whose lease was released, kept out of the pool for the next
        #: acquires (a checkout and a return cost more than an unlock), on the issuer's own
        #: engine only, whose pool is private and unbounded: never kept from a user's pool.
        self._kept: list[PoolProxiedConnection] = []
        self._keep = KEPT if self._owned else 0
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"AdvisoryIssuer({self.engine.url.render_as_string()!r})"

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        with sql_errors("advisory lease", self.engine.url):
            conn, row = self._lock_and_count(name)
        if row is None:
            self._give(conn)  # the lock was not taken: it holds nothing
            return Busy(None)
        token, pid = int(row[0]), int(row[1])
        try:
            if not conn.info.get(SESSION_KEPT):
                self._check_session(conn, name, pid)
                conn.info[SESSION_KEPT] = True
        except BaseException:
            _driver.discard(conn)
            raise
        with self._lock:
            self._leases[(name, token, holder)] = Lease(conn, pid)
        return token

    def _lock_and_count(self, name: str) -> tuple[PoolProxiedConnection, Any]:
        """``ACQUIRE`` on a pooled connection in autocommit: (that connection, its row),
        sent with the driver's cursor (``_driver``: a third of the cost otherwise)."""
        for attempt in (1, 2):
            conn = self._take()
            try:
                return conn, _driver.run(self.engine, conn, ACQUIRE, acquire_params(name))
            except BaseException as exc:
                _driver.discard(conn)  # a failed statement may still have taken the lock
                if not once_more(exc, attempt):
                    raise
                self._drop_kept()  # they died with it (a server restart), as the pool's did
        raise AssertionError("unreachable")

    def _take(self) -> PoolProxiedConnection:
        """A kept connection (see ``__init__``), or one of the pool's, in autocommit."""
        with self._lock:
            self._after_fork()
            if self._kept:
                return self._kept.pop()
        return _driver.checkout(self.engine, not self._owned)

    def _give(self, conn: PoolProxiedConnection) -> None:
        """Keep ``conn``, which holds no lock, for the next acquire, or return it to the pool."""
        with self._lock:
            if len(self._kept) < self._keep:
                self._kept.append(conn)
                return
        _driver.checkin(self.engine, conn, not self._owned)

    def _drop_kept(self) -> None:
        with self._lock:
            kept, self._kept = self._kept, []
        for conn in kept:
            _driver.discard(conn)

    def _check_session(self, conn: PoolProxiedConnection, name: str, pid: int) -> None:
        """Prove that ``conn``, whose backend ``pid`` has just taken the lock of ``name``,
        keeps its server session, or let the lock go and raise ``FenceSetupError`` (see
        the module docstring)."""
        params = {"pid": pid, **lock_params(name)}
        with sql_errors("advisory lease", self.engine.url):
            now, *peer = _driver.run(self.engine, conn, PEER, {})
            if now == pid:
                if is_direct((peer[0], peer[1]), socket_address(conn.driver_connection)):
                    return
                with self.engine.connect() as probe:  # it lets the lock go if it finds it
                    if probe.execute(PROBE, params).one()[0] != pid:
                        return
                why = "another connection of the pool ran on the lease's server session"
            else:
                with self.engine.connect() as other:
                    other.execute(END_HOLDER, params).all()
                why = "the lease's connection moved to another server session"
        raise FenceSetupError(POOLER_REFUSED.format(why=why))

    def _lease(self, name: str, token: int, holder: str) -> Lease | None:
        with self._lock:
            self._after_fork()
            return self._leases.get((name, token, holder))

    def _after_fork(self) -> None:
        """In a forked child (with ``_lock`` held): forget the parent's leases and kept
        connections, and its own engine's pool (SQLAlchemy's ``dispose(close=False)``
        recipe), all sockets of the parent's server sessions: the child never unlocks,
        checks or reuses them, and opens its own. Forgotten, not closed (psycopg closes a
        connection only in the process that opened it)."""
        if self._pid != os.getpid():
            self._leases, self._kept, self._pid = {}, [], os.getpid()
            if self._owned:
                self.engine.dispose(close=False)

    def _forget(self, name: str, token: int, holder: str) -> None:
        with self._lock:
            self._leases.pop((name, token, holder), None)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        lease = self._lease(name, token, holder)
        if lease is None:
            return False
        with lease.guard:
            if _driver.is_closed(lease.connection):
                return False
            try:
                held, pid = _driver.run(self.engine, lease.connection, CHECK, lock_params(name))
            except Exception:  # the connection is gone, and its lock with it
                held, pid = False, None
            except BaseException:
                self._lost(lease, name, token, holder)
                raise
            if held and pid == lease.pid:
                return True
            self._lost(lease, name, token, holder)
            return False

    def release(self, name: str, token: int, holder: str) -> bool:
        lease = self._lease(name, token, holder)
        if lease is None:
            return False
        with lease.guard:
            self._forget(name, token, holder)
            if _driver.is_closed(lease.connection):
                return False
            try:
                row = _driver.run(self.engine, lease.connection, RELEASE, lock_params(name))
            except BaseException as exc:
                _driver.discard(lease.connection)
                if isinstance(exc, Exception):
                    return False  # the connection, and its lock, were gone already
                raise
            if row[0]:
                self._give(lease.connection)  # it holds nothing now
            else:
                _driver.discard(lease.connection)
            return bool(row[0])

    def close(self) -> None:
        """End every lease this issuer holds (their connections are closed, so their locks
        go) and dispose of the engine's pool if the engine is the issuer's own (``owns``):
        a user's engine stays usable."""
        with self._lock:
            leases, self._leases = list(self._leases.values()), {}
        for lease in leases:
            with lease.guard:
                _driver.discard(lease.connection)
        self._drop_kept()
        if self._owned:
            self.engine.dispose()

    def _lost(self, lease: Lease, name: str, token: int, holder: str) -> None:
        self._forget(name, token, holder)
        _driver.discard(lease.connection)

    def await_release(self, name: str, seconds: float) -> None:
        """Block until the lock of ``name`` is free or ``seconds`` pass (see the module
        docstring); the lock is let go in the statement that got it."""
        if seconds <= 0:
            return
        with sql_errors("advisory wait", self.engine.url):
            for attempt in (1, 2):
                conn = self.engine.connect()
                try:
                    if self._owned:  # in autocommit; SET LOCAL needs a transaction
                        conn = conn.execution_options(isolation_level="READ COMMITTED")
                    with conn.begin():
                        conn.execute(timeout_sql(seconds))
                        conn.execute(WAIT, lock_params(name))
                except DBAPIError as exc:
                    if not is_lock_timeout(exc):
                        _discard(conn)
                        if once_more(exc, attempt):
                            continue
                        raise
                    conn.close()  # the lock was never granted
                except BaseException:
                    _discard(conn)
                    raise
                else:
                    conn.close()
                return

    def _read(self, read: Callable[[Connection], T]) -> T:
        """``read`` in a transaction; once more if its pooled connection was dead."""
        return read_once_more(self.engine, read)

    def status(self, name: str) -> FenceStatus:
        return self._read(functools.partial(read_status, name=name))

    def names(self, prefix: str = "") -> Iterator[str]:
        found = self._read(
            lambda conn: [str(r[0]) for r in conn.execute(NAMES, {"prefix": prefix})]
        )
        return iter(found)

    def force_release(self, name: str) -> FenceStatus:
        with sql_errors(url=self.engine.url), self.engine.begin() as conn:
            rows = list(conn.execute(FORCE, acquire_params(name)))
            last = None if rows else conn.execute(LAST_TOKEN, {"name": name}).scalar()
        return holder_status(name, rows, None if last is None else int(last))


def read_once_more(engine: Engine, read: Callable[[Connection], T]) -> T:
    """``read`` in a transaction on ``engine``; once more if its pooled connection was
    dead. The asyncio issuer runs it too, on its engine's ``sync_engine`` in SQLAlchemy's
    greenlet (``greenlet_spawn``)."""
    with sql_errors(url=engine.url):
        for attempt in (1, 2):
            try:
                with engine.begin() as conn:
                    return read(conn)
            except BaseException as exc:
                if not once_more(exc, attempt):
                    raise
    raise AssertionError("unreachable")


def read_status(conn: Connection, name: str) -> FenceStatus:
    """The ``status`` of the lease ``name`` (``Inspects``), read on ``conn``."""
    rows = list(conn.execute(STATUS, acquire_params(name)))
    last = None if rows else conn.execute(LAST_TOKEN, {"name": name}).scalar()
    return holder_status(name, rows, None if last is None else int(last))


def _discard(conn: Connection) -> None:
    """Close ``conn`` for good (never back to the pool): its session, and any advisory
    lock it may hold, end with it."""
    try:
        conn.invalidate()
    except Exception:
        pass
    finally:
        conn.close()


_issuers: Shared[str, AdvisoryIssuer] = Shared(AdvisoryIssuer, AdvisoryIssuer.close)


def shared_advisory_issuer(url: str) -> AdvisoryIssuer:
    """One blocking advisory issuer (and one pool) per URL in this process, closed at
    exit (its leases end with their connections, as they would with the process)."""
    return _issuers.get(url)


class AdvisoryFence(Fence):
    """A fence whose lease is a PostgreSQL session-level advisory lock.

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
