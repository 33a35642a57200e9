"""The asyncio SQL issuer: the very same flows as ``SqlIssuer``, driven on an ``AsyncConnection``.

Separate from ``_issuer`` because SQLAlchemy's asyncio layer needs greenlet (the
``fencing[async]`` extra); sync users of ``fencing[sql]`` never import it.
Imports the core async fence and SQL flows, the statements' port, and SQLAlchemy's asyncio layer.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress

from sqlalchemy import Connection, Engine

from .._base.flow import Flow, run_async
from .._base.lazy import needs_extra
from .._base.waits import Wakes, wait_event
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._primitives.limiter import Admission, LimitUse
from .._sql.flows import RW_POLL, Execute, SqlFlows, T
from ..issuer import Busy, FenceStatus
from ._engines import async_issuer_engine, sql_errors
from ._errors import check_innodb
from ._issuer_statements import AsyncSqlPort, statements
from ._schema import MYSQL

with needs_extra("fencing.sql.aio"):  # SQLAlchemy's asyncio layer needs greenlet
    from sqlalchemy.ext.asyncio import AsyncEngine


class AsyncSqlIssuer:
    """The asyncio ``SqlIssuer`` (aiosqlite, asyncpg or psycopg async); the same flows."""

    def __init__(self, engine: AsyncEngine | Engine | str) -> None:
        self.engine = async_issuer_engine(engine)
        # made here (from a URL, an Engine or a SQLite AsyncEngine): a pool of its own
        self._owns_engine = (
            not isinstance(engine, AsyncEngine) or self.engine.pool is not engine.pool
        )
        self.dialect = self.engine.dialect.name
        self.flows = SqlFlows()
        self.statements = statements(self.dialect)
        self._ready = False
        #: the read-write locks' waiters, by lock name, woken by a release made here
        self.wakes = Wakes()

    async def _run(self, flow: Flow[Execute, T]) -> T:
        await self._ensure_tables()
        with sql_errors(url=self.engine.url):
            async with self.engine.begin() as conn:
                return await run_async(flow, AsyncSqlPort(conn, self.statements))

    async def _ensure_tables(self) -> None:
        if self._ready:
            return
        with sql_errors("creating the fencing tables", self.engine.url):
            if self.dialect == "sqlite":
                from ._migrate import create_tables

                async with self.engine.begin() as conn:
                    await conn.run_sync(_call_on, create_tables)
            if self.dialect in MYSQL:
                async with self.engine.connect() as conn:
                    await conn.run_sync(_call_on, check_innodb)
            self._ready = True

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await self._run(self.flows.try_acquire(name, holder, ttl_ms))

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> int | Busy:
        """``fencing.issuer.AsyncTakesSlots``: see ``SqlIssuer.try_acquire_slot``."""
        return await self._run(self.flows.try_acquire_slot(group, slot, permits, holder, ttl_ms))

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await self._run(self.flows.renew(name, token, holder, ttl_ms))

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await self._run(self.flows.release(name, token, holder))

    async def status(self, name: str) -> FenceStatus:
        """``fencing.issuer.AsyncInspects``: see ``SqlIssuer.status``."""
        return await self._run(self.flows.status(name))

    async def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """See ``SqlIssuer.rw_acquire``: the same transaction."""
        return await self._run(self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms))

    async def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """See ``SqlIssuer.rw_renew``."""
        return await self._run(self.flows.rw_renew(name, mode, token, holder, ttl_ms))

    async def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        # SqlIssuer.rw_release's, awaited
        ended = await self._run(self.flows.rw_release(name, mode, token, holder))
        return self.wakes.released(name, ended)

    async def rw_await(self, name: str, seconds: float) -> None:
        """See ``SqlIssuer.rw_await``."""
        loop, woken = asyncio.get_running_loop(), asyncio.Event()

        def wake() -> None:  # maybe in another thread, or after the loop closed
            with suppress(RuntimeError):
                loop.call_soon_threadsafe(woken.set)

        with self.wakes.waiting(name, wake):
            await wait_event(woken, min(seconds, RW_POLL))

    async def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """See ``SqlIssuer.admit``: the same transaction."""
        return await self._run(self.flows.admit(name, limit, per_ms, window))

    async def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """See ``SqlIssuer.limit_use``: the same statements."""
        return await self._run(self.flows.limit_use(name, per_ms, window))

    async def aclose(self) -> None:
        """Dispose of the engine's pool if the issuer made the engine (from a URL or a
        blocking ``Engine``), never an ``AsyncEngine`` passed in; used again, the pool
        opens new connections."""
        if self._owns_engine:
            await self.engine.dispose()


def _call_on(conn: Connection, create: Callable[[Connection], None]) -> None:
    create(conn)


_async_issuers: weakref.WeakKeyDictionary[AsyncEngine, AsyncSqlIssuer] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def shared_async_issuer(source: AsyncEngine | Engine | str) -> AsyncSqlIssuer:
    """One asyncio issuer per ``AsyncEngine``; a URL gets its own (engines belong to a loop)."""
    if not isinstance(source, AsyncEngine):
        return AsyncSqlIssuer(source)
    with _lock:
        issuer = _async_issuers.get(source)
        if issuer is None:
            issuer = _async_issuers[source] = AsyncSqlIssuer(source)
        return issuer


class AsyncSqlFence(AsyncFence):
    """The asyncio ``SqlFence`` (published as ``fencing.aio.SqlFence``)."""

    def __init__(
        self,
        engine: AsyncEngine | Engine | str,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: AsyncSqlIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        super().__init__(issuer or shared_async_issuer(engine), name, ttl, reentrant=reentrant)
