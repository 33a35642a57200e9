"""The asyncio advisory-lock issuer: the flows of ``_advisory_flows`` driven by
``run_async`` on an ``AsyncEngine`` (PostgreSQL through psycopg or asyncpg, MySQL and
MariaDB through aiomysql or asyncmy); see ``_advisory`` for the model. And
``advisory_xact`` on an ``AsyncConnection``/``AsyncSession`` (``_xact``'s flow, awaited).

Separate from ``_advisory`` because SQLAlchemy's asyncio layer needs greenlet.
Imports the core async fence and flows, the advisory flows, ``_xact``, SQLAlchemy's
asyncio layer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from sqlalchemy import Engine

from .._base.flow import Flow, run_async
from .._base.lazy import needs_extra
from .._base.owned import OldClose
from .._base.token import FenceToken
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from ..issuer import Busy, FenceStatus
from . import _xact
from ._advisory import advisory_url, owns
from ._advisory_flows import AdvisoryFlows, Step, T, translated
from ._engines import _ASYNC_DRIVERS, _ASYNC_KEPT, _with_driver

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
    url = _with_driver(url, _ASYNC_DRIVERS, _ASYNC_KEPT)
    return create_async_engine(url, pool_size=5, max_overflow=-1, isolation_level="AUTOCOMMIT")


class AsyncAdvisoryIssuer(OldClose):
    """The asyncio ``AdvisoryIssuer``: the same flows, the same leases."""

    def __init__(self, engine: AsyncEngine | Engine | str) -> None:
        self.engine = async_advisory_engine(engine)
        owned = owns(self.engine, engine)
        self.flows = AdvisoryFlows(self.engine.dialect.name, owned, asyncio.Lock)

    def __repr__(self) -> str:
        return f"AsyncAdvisoryIssuer({self.engine.url.render_as_string()!r})"

    async def _run(self, flow: Flow[Step, T]) -> T:
        return await run_async(translated(flow, self.engine.url), self.engine)

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await self._run(self.flows.try_acquire(name, holder, ttl_ms))

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await self._run(self.flows.renew(name, token, holder, ttl_ms))

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await self._run(self.flows.release(name, token, holder))

    async def await_release(self, name: str, seconds: float) -> None:
        """See ``AdvisoryIssuer.await_release``."""
        await self._run(self.flows.await_release(name, seconds))

    async def status(self, name: str) -> FenceStatus:
        return await self._run(self.flows.status(name))

    async def names(self, prefix: str = "") -> Iterator[str]:
        return iter(await self._run(self.flows.names(prefix)))

    async def force_release(self, name: str) -> FenceStatus:
        return await self._run(self.flows.force_release(name))

    async def aclose(self) -> None:
        """End every lease this issuer holds, and dispose of the engine's pool if it is
        the issuer's own (see ``AdvisoryIssuer.close``); used again, it reconnects."""
        await self._run(self.flows.close())


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
    ``AsyncSession``: the same flow (``_xact.xact_flow``), awaited."""
    given = connection_or_session
    session = given if isinstance(given, AsyncSession) else None
    conn = given if isinstance(given, AsyncConnection) else None
    what = (
        "advisory_xact needs a sqlalchemy AsyncConnection or AsyncSession, "
        f"not {type(given).__name__}"
    )
    return await run_async(_xact.xact_flow(session, conn, name, wait, what), None)
