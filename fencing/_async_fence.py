"""``AsyncFence``: the asyncio fence, driving ``FenceCore``'s flows against an ``AsyncIssuer``.

The same flows as ``Fence``; only the driver and the renewal task differ.
Imports the core and protocol modules; knows no backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ._core import DEFAULT_TTL, FenceCore
from ._protocol import AsyncIssuer, Busy, run_async
from ._token import FenceToken


class AsyncFence(FenceCore):
    """A named lease plus its token counter, on an asyncio issuer (see ``Fence``)."""

    def __init__(self, issuer: AsyncIssuer, name: str, ttl: float = DEFAULT_TTL) -> None:
        super().__init__(name, ttl, wakes_on_release=issuer.wakes_on_release)
        self.issuer = issuer

    async def acquire(self, timeout: float | None = None) -> FenceToken:
        """Take the lease and return its token (see ``Fence.acquire``)."""
        first, wait = self._first_attempt(timeout)
        reply = await first.call(self.issuer, self.name)
        if isinstance(reply, Busy):
            reply = await run_async(self._wait_flow(first, reply, wait), self.issuer, self.name)
        return self._granted(reply, first)

    async def renew(self, token: int, ttl: float | None = None) -> None:
        """Extend the lease of ``token``; ``LeaseLost`` if no longer held."""
        await run_async(self._renew_flow(token, ttl), self.issuer, self.name)

    async def release(self, token: int) -> None:
        """End the lease of ``token``; ``LeaseLost`` if it had already expired or moved on."""
        value, holder = self._lease_of(token)
        self._released(value, await self.issuer.release(self.name, value, holder))

    @asynccontextmanager
    async def hold(
        self, timeout: float | None = None, *, auto_renew: bool = True
    ) -> AsyncIterator[FenceToken]:
        """Acquire, renew every ttl/3 in a background task, release on exit (see ``Fence.hold``)."""
        token = await self.acquire(timeout)
        self._hold_started()
        stop = asyncio.Event()
        renewal = asyncio.create_task(self._renew(token, stop)) if auto_renew else None
        try:
            yield token
        finally:
            if renewal is not None:
                stop.set()
                await renewal
            self._hold_finished(token)
            await self.release(token)

    async def _renew(self, token: FenceToken, stop: asyncio.Event) -> None:
        async def sleep(seconds: float) -> bool:
            try:
                await asyncio.wait_for(stop.wait(), seconds)
            except asyncio.TimeoutError:
                return False
            return True

        try:
            await run_async(self._renewal_flow(token), self.issuer, self.name, sleep)
        except Exception:
            self._renewal_crashed(token)
