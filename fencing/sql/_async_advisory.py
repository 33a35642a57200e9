"""The asyncio advisory-lock issuer: the statements of ``_advisory`` (psycopg's asyncio
side or asyncpg); see ``_advisory`` for the model. The lease statements run as the
blocking issuer's do, by ``_driver`` on the pool's connection (SQLAlchemy's adapted
DBAPI connection), each in one ``greenlet_spawn``, as ``AsyncConnection.execute`` would
run them but without its objects; the waiter and the pooler's probe use an
``AsyncConnection``. And ``advisory_xact`` on an ``AsyncConnection``/``AsyncSession``
(``_xact``'s, by ``run_sync``).

Separate from ``_advisory`` because SQLAlchemy's asyncio layer needs greenlet.
Imports the core async fence, ``_advisory``'s statements, ``_driver``, ``_xact``,
SQLAlchemy's asyncio layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from sqlalchemy import Engine, TextClause
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from .._base.errors import FenceSetupError
from .._base.lazy import needs_extra
from .._base.owned import OldClose
from .._base.token import FenceToken
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from ..issuer import Busy, FenceStatus
from . import _driver, _xact
from ._advisory import (
    ACQUIRE,
    CHECK,
    END_HOLDER,
    KEPT,
    PEER,
    POOLER_REFUSED,
    PROBE,
    RELEASE,
    SESSION_KEPT,
    WAIT,
    Lease,
    acquire_params,
    advisory_url,
    is_direct,
    is_lock_timeout,
    lock_params,
    once_more,
    owns,
    read_once_more,
    read_status,
    socket_address,
    timeout_sql,
)
from ._engines import sql_errors

with needs_extra("fencing.sql.aio"):  # SQLAlchemy's asyncio layer needs greenlet
    from sqlalchemy.ext.asyncio import (
        AsyncConnection,
        AsyncEngine,
        AsyncSession,
        create_async_engine,
    )


def async_advisory_engine(source: AsyncEngine | Engine | str) -> AsyncEngine:
    """The engine of the asyncio issuer (see ``_advisory.advisory_engine``)."""
    if isinstance(source, AsyncEngine):
        advisory_url(source.url)
        return source
    url = advisory_url(source.url if isinstance(source, Engine) else source)
    if url.get_driver_name() not in ("psycopg", "asyncpg"):
        url = url.set(drivername="postgresql+psycopg")
    return create_async_engine(url, pool_size=5, max_overflow=-1, isolation_level="AUTOCOMMIT")


class AsyncAdvisoryIssuer(OldClose):
    """The asyncio ``AdvisoryIssuer``: the same statements, the same leases."""

    def __init__(self, engine: AsyncEngine | Engine | str) -> None:
        self.engine = async_advisory_engine(engine)
        self._owned = owns(self.engine, engine)  # see AdvisoryIssuer
        self._leases: dict[tuple[str, int, str], Lease] = {}
        self._kept: list[PoolProxiedConnection] = []  # see AdvisoryIssuer
        self._keep = KEPT if self._owned else 0

    async def _run(self, conn: PoolProxiedConnection, statement: TextClause, params: Any) -> Any:
        """``_driver.run`` on the pool's (adapted) DBAPI connection, in SQLAlchemy's
        greenlet: what ``AsyncConnection.execute`` does, without its objects."""
        return await greenlet_spawn(_driver.run, self.engine.sync_engine, conn, statement, params)

    def __repr__(self) -> str:
        return f"AsyncAdvisoryIssuer({self.engine.url.render_as_string()!r})"

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        with sql_errors("advisory lease", self.engine.url):
            conn, row = await self._lock_and_count(name)
        if row is None:
            await self._give(conn)  # the lock was not taken: it holds nothing
            return Busy(None)
        token, pid = int(row[0]), int(row[1])
        try:
            if not conn.info.get(SESSION_KEPT):
                await self._check_session(conn, name, pid)
                conn.info[SESSION_KEPT] = True
        except BaseException:
            await _drop(conn)
            raise
        self._leases[(name, token, holder)] = Lease(conn, pid, asyncio.Lock())
        return token

    async def _lock_and_count(self, name: str) -> tuple[PoolProxiedConnection, Any]:
        """See ``AdvisoryIssuer._lock_and_count``."""
        for attempt in (1, 2):
            conn = await self._take()
            try:
                return conn, await self._run(conn, ACQUIRE, acquire_params(name))
            except BaseException as exc:
                await _drop(conn)  # a failed statement may still have taken the lock
                if not once_more(exc, attempt):
                    raise
                await self._drop_kept()  # they died with it, as the pool's did
        raise AssertionError("unreachable")

    async def _take(self) -> PoolProxiedConnection:
        """See ``AdvisoryIssuer._take``."""
        if self._kept:
            return self._kept.pop()
        switch = not self._owned
        return await greenlet_spawn(_driver.checkout, self.engine.sync_engine, switch)

    async def _give(self, conn: PoolProxiedConnection) -> None:
        """See ``AdvisoryIssuer._give``."""
        if len(self._kept) < self._keep:
            self._kept.append(conn)
        else:
            switch = not self._owned
            await greenlet_spawn(_driver.checkin, self.engine.sync_engine, conn, switch)

    async def _drop_kept(self) -> None:
        kept, self._kept = self._kept, []
        for conn in kept:
            await _drop(conn)

    async def _check_session(self, conn: PoolProxiedConnection, name: str, pid: int) -> None:
        """See ``AdvisoryIssuer._check_session``."""
        params = {"pid": pid, **lock_params(name)}
        with sql_errors("advisory lease", self.engine.url):
            now, *peer = await self._run(conn, PEER, {})
            if now == pid:
                if is_direct((peer[0], peer[1]), socket_address(conn.driver_connection)):
                    return
                async with self.engine.connect() as probe:  # it lets the lock go if it finds it
                    if (await probe.execute(PROBE, params)).one()[0] != pid:
                        return
                why = "another connection of the pool ran on the lease's server session"
            else:
                async with self.engine.connect() as other:
                    (await other.execute(END_HOLDER, params)).all()
                why = "the lease's connection moved to another server session"
        raise FenceSetupError(POOLER_REFUSED.format(why=why))

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        lease = self._leases.get((name, token, holder))
        if lease is None:
            return False
        async with lease.guard:
            conn: PoolProxiedConnection = lease.connection
            if _driver.is_closed(conn):
                return False
            try:
                held, pid = await self._run(conn, CHECK, lock_params(name))
            except Exception:  # the connection is gone, and its lock with it
                held, pid = False, None
            except BaseException:
                await self._lost(lease, name, token, holder)
                raise
            if held and pid == lease.pid:
                return True
            await self._lost(lease, name, token, holder)
            return False

    async def release(self, name: str, token: int, holder: str) -> bool:
        lease = self._leases.get((name, token, holder))
        if lease is None:
            return False
        async with lease.guard:
            self._leases.pop((name, token, holder), None)
            conn: PoolProxiedConnection = lease.connection
            if _driver.is_closed(conn):
                return False
            try:
                row = await self._run(conn, RELEASE, lock_params(name))
            except BaseException as exc:
                await _drop(conn)
                if isinstance(exc, Exception):
                    return False
                raise
            if row[0]:
                await self._give(conn)  # it holds nothing now
            else:
                await _drop(conn)
            return bool(row[0])

    async def aclose(self) -> None:
        """End every lease this issuer holds, and dispose of the engine's pool if it is
        the issuer's own (see ``AdvisoryIssuer.close``); used again, it reconnects."""
        leases, self._leases = list(self._leases.values()), {}
        for lease in leases:
            async with lease.guard:
                await _drop(lease.connection)
        await self._drop_kept()
        if self._owned:
            await self.engine.dispose()

    async def _lost(self, lease: Lease, name: str, token: int, holder: str) -> None:
        self._leases.pop((name, token, holder), None)
        await _drop(lease.connection)

    async def await_release(self, name: str, seconds: float) -> None:
        """See ``AdvisoryIssuer.await_release``."""
        if seconds <= 0:
            return
        with sql_errors("advisory wait", self.engine.url):
            for attempt in (1, 2):
                conn = await self.engine.connect()
                try:
                    if self._owned:  # in autocommit; SET LOCAL needs a transaction
                        conn = await conn.execution_options(isolation_level="READ COMMITTED")
                    async with conn.begin():
                        await conn.execute(timeout_sql(seconds))
                        await conn.execute(WAIT, lock_params(name))
                except DBAPIError as exc:
                    if not is_lock_timeout(exc):
                        await _discard(conn)
                        if once_more(exc, attempt):
                            continue
                        raise
                    await conn.close()
                except BaseException:
                    await _discard(conn)
                    raise
                else:
                    await conn.close()
                return

    async def status(self, name: str) -> FenceStatus:
        """``AsyncInspects``: see ``AdvisoryIssuer.status`` (the same read, run in
        SQLAlchemy's greenlet on this engine's blocking facade)."""
        read = functools.partial(read_status, name=name)
        return await greenlet_spawn(read_once_more, self.engine.sync_engine, read)


async def _drop(conn: PoolProxiedConnection) -> None:
    """``_driver.discard`` in SQLAlchemy's greenlet (closing an asyncio driver's
    connection awaits), even while being cancelled."""
    with contextlib.suppress(Exception):
        await greenlet_spawn(_driver.discard, conn)


async def _discard(conn: Any) -> None:
    """Close ``conn`` for good (see ``_advisory._discard``), even while being cancelled."""
    try:
        await conn.invalidate()
    except Exception:
        pass
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


class AsyncAdvisoryFence(AsyncFence):
    """The asyncio ``AdvisoryFence``; a URL gets an issuer (and engine) of its own, since
    asyncio engines belong to one event loop: pass an ``AsyncEngine`` or ``issuer`` to share."""

    def __init__(
        self,
        engine: AsyncEngine | Engine | str,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: AsyncAdvisoryIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        super().__init__(issuer or AsyncAdvisoryIssuer(engine), name, ttl, reentrant=reentrant)


async def advisory_xact(
    connection_or_session: AsyncConnection | AsyncSession, name: str, *, wait: bool = True
) -> FenceToken:
    """``fencing.sql.advisory_xact`` in the open transaction of an ``AsyncConnection`` or
    ``AsyncSession`` (run by SQLAlchemy's ``run_sync`` on the same blocking code)."""
    if isinstance(connection_or_session, AsyncConnection | AsyncSession):
        return await connection_or_session.run_sync(_xact.advisory_xact, name, wait=wait)
    raise TypeError(
        "advisory_xact needs a sqlalchemy AsyncConnection or AsyncSession, "
        f"not {type(connection_or_session).__name__}"
    )
