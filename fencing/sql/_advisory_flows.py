"""Advisory leases (``lease=advisory``) written once, as flows (``fencing._base.flow``) that the
blocking issuer (``_advisory``) drives with ``run_sync`` on an ``Engine`` and the asyncio
issuer (``_async_advisory``) with ``run_async`` on an ``AsyncEngine``; the database's
statements are data (``_advisory_statements``: PostgreSQL's advisory locks, MySQL's and
MariaDB's ``GET_LOCK``). The model is in ``_advisory``'s docstring.

Two steps:

- ``Call``: a function of ``_driver`` (checkout, checkin, run a statement, discard) on
  the port's engine. Blocking, it is called; asyncio, it runs in SQLAlchemy's greenlet
  on the async engine's ``sync_engine`` (``greenlet_spawn``, as ``AsyncConnection``
  runs its statements), on the pool's adapted DBAPI connection.
- ``Enter``: takes a lease's guard, which keeps a renew and a release of one lease off
  its connection at once (a ``threading.Lock`` or an ``asyncio.Lock``, as the driver
  says); the flow lets it go.

The held leases and the released connections kept for the next acquires are plain
state of ``AdvisoryFlows`` (a dict and a list, each change under a thread lock that is
never held across a step).

Imports the core flows, errors and issuer values, ``_driver``, the statements, and
SQLAlchemy (its greenlet only when driven asyncio).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, TextClause
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection

from .._base.errors import FenceSetupError
from .._base.flow import Flow
from ..issuer import Busy, FenceStatus
from . import _driver
from ._advisory_statements import (
    AdvisoryStatements,
    lock_params,
    names_params,
    statements_of,
    wait_params,
)
from ._engines import DRIVER_ERRORS, fencing_error

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")

#: Released lease connections an issuer keeps for its next acquires (its own engine only).
KEPT = 5

#: ``Connection.info`` keys: this pooled connection was shown to keep its session; the
#: id of that session (for a database whose ``acquire`` does not say it).
SESSION_KEPT = "fencing_session_kept"
SESSION_ID = "fencing_session_id"

#: Seconds ``force_release`` waits for the evicted holder's session to let the lock go.
FORCE_WAIT = 5.0

POOLER_REFUSED = (
    "lease=advisory refused: {why}, so this connection does not keep one server session "
    "(a pooler in transaction or statement mode, such as pgbouncer's pool_mode = "
    "transaction or ProxySQL multiplexing?), and a session-level lock would protect "
    "nothing. Connect directly or through a session-mode pool, or use lease=row. Nothing "
    "is left locked."
)


class Call:
    """The advisory flows' I/O step: ``function(engine, *args)``, a function of ``_driver``."""

    __slots__ = ("args", "function", "result")
    result: Any

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self.function = function
        self.args = args

    def perform(self, engine: Engine) -> None:
        self.result = self.function(engine, *self.args)

    async def aperform(self, engine: AsyncEngine) -> None:
        from sqlalchemy.util import greenlet_spawn

        self.result = await greenlet_spawn(self.function, engine.sync_engine, *self.args)


class Enter:
    """Takes a lease's guard (blocking or awaited); the flow releases it."""

    __slots__ = ("guard",)

    def __init__(self, guard: Any) -> None:
        self.guard = guard

    def perform(self, port: object) -> None:
        self.guard.acquire()

    async def aperform(self, port: object) -> None:
        await self.guard.acquire()


Step = Call | Enter


@dataclass
class Lease:
    """A held lease: its connection (out of the pool), its session's id, and its guard."""

    connection: PoolProxiedConnection
    session: Any
    guard: Any


def socket_address(driver_connection: Any) -> tuple[str, int] | None:
    """The local (host, port) of a driver connection's TCP socket (psycopg, psycopg2,
    asyncpg, PyMySQL, aiomysql); ``None`` when not known (another driver, a Unix socket)."""
    try:
        transport = getattr(driver_connection, "_transport", None)  # asyncpg
        writer = getattr(driver_connection, "_writer", None)  # aiomysql
        sock = getattr(driver_connection, "_sock", None)  # PyMySQL
        streams = transport if transport is not None else writer
        if streams is not None:
            name = streams.get_extra_info("sockname")
        elif sock is not None:
            name = sock.getsockname()
        else:
            pgconn = getattr(driver_connection, "pgconn", None)  # psycopg 3
            fd = pgconn.socket if pgconn is not None else driver_connection.fileno()
            with socket.socket(fileno=os.dup(fd)) as dup:
                name = dup.getsockname()
    except Exception:
        return None
    if isinstance(name, tuple) and len(name) >= 2:
        return str(name[0]), int(name[1])
    return None


def is_direct(peer: tuple[Any, Any], local: tuple[str, int] | None) -> bool:
    """Whether the server's view of its peer, ``(host, port)`` from ``peer``, is this very
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


def once_more(exc: BaseException, attempt: int) -> bool:
    """Whether to run again, on a new connection, what failed with ``exc`` on attempt 1:
    only when the failure was a pooled connection found dead (a server restart, an idle
    connection cut), which SQLAlchemy has invalidated with the rest of the pool. What
    ``pool_pre_ping`` does, paid only when it happens. Safe for an acquire: a lock taken
    on a dead connection ends with its session, and a token it bumped is skipped."""
    return attempt == 1 and isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def holder_status(name: str, row: Any, word: str) -> FenceStatus:
    """The ``FenceStatus`` from a ``status`` row (``word``: what a session is called)."""
    last, session, app, addr = row
    token = None if last is None else int(last)
    if session is None:
        return FenceStatus(name, held=False, last_token=token)
    holder = f"{word} {session}" + (f", application_name {app!r}" if app else "")
    holder += f", client {addr}" if addr else ", client local socket"
    return FenceStatus(name, True, holder, token, None, token)


def translated(flow: Flow[Step, T], url: URL) -> Flow[Step, T]:
    """``flow``, its driver errors raised as fencing errors (``_engines.sql_errors``):
    what both issuers run, so that each driver is one call."""
    try:
        return (yield from flow)
    except DRIVER_ERRORS as exc:
        raise fencing_error(exc, "advisory lease", url) from exc


class AdvisoryFlows:
    """The advisory issuer's calls as flows of ``Call``/``Enter`` steps (see the module
    docstring), on ``dialect``'s statements. ``owned``: the engine is the issuer's own
    (``_advisory.owns``): connections in autocommit already, kept out of the pool after a
    release; otherwise each is switched to autocommit at checkout and back at return.
    ``new_guard`` makes a lease's guard (``threading.Lock`` or ``asyncio.Lock``)."""

    def __init__(self, dialect: str, owned: bool, new_guard: Callable[[], Any]) -> None:
        self.sql: AdvisoryStatements = statements_of(dialect)
        self.owned = owned
        self.new_guard = new_guard
        self.leases: dict[tuple[str, int, str], Lease] = {}
        #: Connections whose lease was released, kept for the next acquires (a checkout
        #: and a return cost more than an unlock); never from a user's pool.
        self.kept: list[PoolProxiedConnection] = []
        self.keep = KEPT if owned else 0
        self.lock = threading.Lock()
        #: Set in a forked child (``_forked``): its pool is still to be forgotten.
        self.forked = False
        _FLOWS.add(self)

    def _forked(self) -> None:
        """In a forked child: forget the parent's leases and kept connections, all
        sockets of the parent's server sessions (the child never unlocks, checks or
        reuses them, and opens its own), and take a new thread lock (another thread may
        have held this one at the fork). Forgotten, not closed (psycopg closes a
        connection only in the process that opened it); the engine's own pool is
        forgotten by the child's next flow (``_after_fork``)."""
        self.leases, self.kept, self.lock = {}, [], threading.Lock()
        self.forked = self.owned

    # -- the issuer's calls --------------------------------------------------------

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> Flow[Step, int | Busy]:
        params = lock_params(name)
        for attempt in (1, 2):
            conn = yield from self._take()
            take = Call(_driver.run, conn, self.sql.acquire, params)
            try:
                yield take
            except BaseException as exc:
                yield from self._drop(conn)  # a failed statement may still have locked
                if not once_more(exc, attempt):
                    raise
                yield from self._drop_kept()  # they died with it, as the pool's did
                continue
            row = take.result
            if row is None:
                yield from self._give(conn)  # the lock was not taken: it holds nothing
                return Busy(None)
            token = int(row[0])
            session = row[1] if len(row) > 1 else None
            try:
                if not conn.info.get(SESSION_KEPT):
                    yield from self._check_session(conn, name, session)
                    conn.info[SESSION_KEPT] = True
            except BaseException:
                yield from self._drop(conn)
                raise
            known = conn.info[SESSION_ID] if session is None else session
            lease = Lease(conn, known, self.new_guard())
            with self.lock:
                self.leases[(name, token, holder)] = lease
            return token
        raise AssertionError("unreachable")

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Flow[Step, bool]:
        """A check, not an extension: the lock is still this connection's session's."""
        if self.forked:
            yield from self._after_fork()
        lease = self.leases.get((name, token, holder))
        if lease is None:
            return False
        yield Enter(lease.guard)
        try:
            if _driver.is_closed(lease.connection):
                return False
            try:
                held, session = yield from self._run(
                    lease.connection, self.sql.check, lock_params(name)
                )
            except Exception:  # the connection is gone, and its lock with it
                held, session = False, None
            except BaseException:
                yield from self._lost(lease, name, token, holder)
                raise
            if held and session == lease.session:
                return True
            yield from self._lost(lease, name, token, holder)
            return False
        finally:
            lease.guard.release()

    def release(self, name: str, token: int, holder: str) -> Flow[Step, bool]:
        if self.forked:
            yield from self._after_fork()
        lease = self.leases.get((name, token, holder))
        if lease is None:
            return False
        yield Enter(lease.guard)
        try:
            self._forget(name, token, holder)
            if _driver.is_closed(lease.connection):
                return False
            unlock = Call(_driver.run, lease.connection, self.sql.release, lock_params(name))
            try:
                yield unlock
            except BaseException as exc:
                yield from self._drop(lease.connection)
                if isinstance(exc, Exception):
                    return False  # the connection, and its lock, were gone already
                raise
            if unlock.result[0]:
                yield from self._give(lease.connection)  # it holds nothing now
            else:
                yield from self._drop(lease.connection)
            return bool(unlock.result[0])
        finally:
            lease.guard.release()

    def await_release(self, name: str, seconds: float) -> Flow[Step, None]:
        """Until the lock of ``name`` is free or ``seconds`` pass: ``wait``, on a pooled
        connection, lets the lock go in the statement that got it. The lock manager wakes
        it the moment the lock is freed, by a release or a session's end alike."""
        if seconds <= 0:
            return
        params = wait_params(name, seconds)
        for attempt in (1, 2):
            conn = yield from self._take()
            try:
                yield from self._run(conn, self.sql.wait, params)
            except BaseException as exc:
                if self.sql.is_lock_timeout(exc):
                    yield from self._give(conn)  # the lock was never granted
                    return
                yield from self._drop(conn)
                if once_more(exc, attempt):
                    continue
                raise
            yield from self._give(conn)
            return

    def status(self, name: str) -> Flow[Step, FenceStatus]:
        row = yield from self._elsewhere(self.sql.status, lock_params(name))
        return holder_status(name, row, self.sql.session)

    def names(self, prefix: str) -> Flow[Step, list[str]]:
        rows = yield from self._elsewhere(self.sql.names, names_params(prefix), every=True)
        return [str(row[0]) for row in rows]

    def force_release(self, name: str) -> Flow[Step, FenceStatus]:
        """End the holder's session (the only way to reach its lock), then wait until the
        lock is free; the next token is above the evicted holder's (the counter grows)."""
        row = yield from self._elsewhere(self.sql.status, lock_params(name))
        if row[1] is not None:
            yield from self._elsewhere(self.sql.end_holder, {**lock_params(name), "pid": row[1]})
            yield from self.await_release(name, FORCE_WAIT)
        return holder_status(name, row, self.sql.session)

    def close(self) -> Flow[Step, None]:
        """End every lease (their connections are closed, so their locks go), drop the
        kept connections, and dispose of the engine's pool if it is the issuer's own."""
        with self.lock:
            leases, self.leases = list(self.leases.values()), {}
        for lease in leases:
            yield Enter(lease.guard)
            try:
                yield from self._drop(lease.connection)
            finally:
                lease.guard.release()
        yield from self._drop_kept()
        if self.owned:
            yield Call(_driver.dispose)

    # -- the parts -----------------------------------------------------------------

    def _run(
        self, conn: PoolProxiedConnection, statement: TextClause, params: Mapping[str, Any]
    ) -> Flow[Step, Any]:
        step = Call(_driver.run, conn, statement, params)
        yield step
        return step.result

    def _elsewhere(
        self, statement: TextClause, params: Mapping[str, Any], every: bool = False
    ) -> Flow[Step, Any]:
        """``statement`` on a connection of the pool (not a lease's); once more if that
        connection turns out dead."""
        for attempt in (1, 2):
            conn = yield from self._take()
            step = Call(_driver.run, conn, statement, params, every)
            try:
                yield step
            except BaseException as exc:
                yield from self._drop(conn)
                if once_more(exc, attempt):
                    continue
                raise
            yield from self._give(conn)
            return step.result
        raise AssertionError("unreachable")

    def _check_session(
        self, conn: PoolProxiedConnection, name: str, session: Any
    ) -> Flow[Step, None]:
        """Prove that ``conn``, whose session ``session`` (``None``: not known) has just
        taken the lock of ``name``, keeps its server session, or let the lock go and raise
        ``FenceSetupError`` (see ``_advisory``'s docstring)."""
        now, *peer = yield from self._run(conn, self.sql.peer, {})
        conn.info[SESSION_ID] = now
        params = {**lock_params(name), "pid": now if session is None else session}
        if session is None or now == session:
            if is_direct((peer[0], peer[1]), socket_address(conn.driver_connection)):
                return
            seen, _ = yield from self._elsewhere(self.sql.probe, params)  # it lets go if there
            if seen != now:
                return
            why = "another connection of the pool ran on the lease's server session"
        else:
            yield from self._elsewhere(self.sql.end_holder, params)
            why = "the lease's connection moved to another server session"
        raise FenceSetupError(POOLER_REFUSED.format(why=why))

    def _take(self) -> Flow[Step, PoolProxiedConnection]:
        """A kept connection, or one of the pool's, in autocommit."""
        if self.forked:
            yield from self._after_fork()
        with self.lock:
            if self.kept:
                return self.kept.pop()
        step = Call(_driver.checkout, not self.owned)
        yield step
        conn: PoolProxiedConnection = step.result
        return conn

    def _give(self, conn: PoolProxiedConnection) -> Flow[Step, None]:
        """Keep ``conn``, which holds no lock, for the next acquire, or return it to the pool."""
        with self.lock:
            if len(self.kept) < self.keep:
                self.kept.append(conn)
                return
        yield Call(_driver.checkin, conn, not self.owned)

    def _drop(self, conn: PoolProxiedConnection) -> Flow[Step, None]:
        """Close ``conn`` for good: its session, and any lock it may hold, end with it."""
        yield Call(_driver.drop, conn)

    def _drop_kept(self) -> Flow[Step, None]:
        with self.lock:
            kept, self.kept = self.kept, []
        for conn in kept:
            yield from self._drop(conn)

    def _forget(self, name: str, token: int, holder: str) -> None:
        with self.lock:
            self.leases.pop((name, token, holder), None)

    def _lost(self, lease: Lease, name: str, token: int, holder: str) -> Flow[Step, None]:
        self._forget(name, token, holder)
        yield from self._drop(lease.connection)

    def _after_fork(self) -> Flow[Step, None]:
        """The engine's own pool forgotten in a forked child (SQLAlchemy's
        ``dispose(close=False)`` recipe), once; see ``_forked``."""
        self.forked = False
        yield Call(_driver.forget_pool)


#: Every ``AdvisoryFlows`` of the process, told when it forks (``os.register_at_fork``).
_FLOWS: weakref.WeakSet[AdvisoryFlows] = weakref.WeakSet()


def _in_child() -> None:
    for flows in list(_FLOWS):
        flows._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
