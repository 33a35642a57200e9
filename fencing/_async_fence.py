"""``AsyncFence``: the asyncio fence, driving ``FenceCore``'s flows against an ``AsyncIssuer``.

The same flows as ``Fence``; only the driver and the renewal task differ.
Imports the core, protocol and flow modules; knows no backend.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from ._core import DEFAULT_TTL, Clock, FenceCore, HoldBase, HoldState
from ._flow import run_async
from ._protocol import AsyncCalls, acquire_async, capabilities, release_async
from ._token import FenceToken
from .issuer import AsyncIssuer


async def _pause(seconds: float) -> bool:
    await asyncio.sleep(seconds)
    return False


class AsyncFence(FenceCore):
    """A named lease plus its token counter, on an asyncio issuer (see ``Fence``).

    ``clock`` gives the deadlines' time; waiting itself is ``asyncio.sleep``.
    """

    _calls: AsyncCalls

    def __init__(
        self,
        issuer: AsyncIssuer,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Clock | None = None,
    ) -> None:
        hands_off, wakes = capabilities(type(issuer))
        super().__init__(name, ttl, hands_off=hands_off, wakes=wakes, clock=clock)
        self.issuer = issuer
        self._calls = AsyncCalls(issuer, self.name, _pause)

    async def acquire(self, timeout: float | None = None) -> FenceToken:
        """Take the lease and return its token (see ``Fence.acquire``)."""
        holder, wait = self._acquiring(timeout)
        token = await acquire_async(holder, self._ttl_ms, wait, self._waiting, self._calls)
        return self._granted(token, holder)

    async def renew(self, token: int, ttl: float | None = None) -> None:
        """Extend the lease of ``token``; ``LeaseLost`` if no longer held."""
        await run_async(self._renew_flow(token, ttl), self._calls)

    async def release(self, token: int) -> None:
        """End the lease of ``token``; ``LeaseLost`` if it had already expired or moved on."""
        value, holder = self._lease_of(token)
        self._released(value, await release_async(self._calls, value, holder))

    def hold(self, timeout: float | None = None, *, auto_renew: bool = True) -> AsyncHold:
        """Acquire, renew every ttl/3 in a task, release on exit (see ``Fence.hold``).

        ``async with fence.hold() as token:``; the returned ``AsyncHold`` has its own
        ``lost`` flag.
        """
        return AsyncHold(self, timeout, auto_renew)


class AsyncHold(HoldBase):
    """One ``async with fence.hold()``: gives the token, with its own ``lost`` flag."""

    def __init__(self, fence: AsyncFence, timeout: float | None, auto_renew: bool) -> None:
        super().__init__(timeout, auto_renew)
        self._fence = fence
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FenceToken:
        self._entering()
        token = await self._fence.acquire(self._timeout)
        state = self._state = self._fence._hold_started(token)
        if self._auto_renew:
            self._task = asyncio.create_task(self._renew(state))
        return token

    async def _wait_stop(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        return True

    async def _renew(self, state: HoldState) -> None:
        fence = self._fence
        try:
            await run_async(fence._renewal_flow(state), fence._calls.with_sleep(self._wait_stop))
        except Exception:
            state.renewal_crashed()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        state = self._state
        if state is None:
            return
        if self._task is not None:
            self._stop.set()
            await self._task
        with state.finishing():
            await self._fence.release(state.token)
