"""``AsyncFence``: the asyncio fence, driving ``BaseFence``'s flows against an ``AsyncIssuer``.

The same flows as ``Fence``; only the driver and the renewal task differ.
Imports the core, protocol and flow modules; knows no backend.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Generic, TypeVar

from .._base.errors import LeaseLost
from .._base.flow import run_async
from .._base.owned import Owner
from .._base.token import FenceToken
from .._base.validate import check_timeout
from .._base.waits import wait_event
from ..issuer import AsyncIssuer
from .core import DEFAULT_TTL, BaseFence, BaseHold, Clock, OnLost
from .protocol import AsyncCalls, acquire_async, capabilities, release_async


async def _pause(seconds: float) -> bool:
    await asyncio.sleep(seconds)
    return False


class AsyncFence(BaseFence, Owner):
    """A named lease plus its token counter, on an asyncio issuer (see ``Fence``).

    ``clock`` gives the deadlines' time; waiting itself is ``asyncio.sleep``.
    ``reentrant=True`` as for ``Fence``, with the asyncio task as the owner.
    ``await fence.aclose()`` closes the connections opened for this fence alone (see
    ``Owner.aclose``).
    """

    _calls: AsyncCalls

    def __init__(
        self,
        issuer: AsyncIssuer,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Clock | None = None,
        reentrant: bool = False,
    ) -> None:
        hands_off, wakes = capabilities(type(issuer))
        super().__init__(
            name, ttl, hands_off=hands_off, wakes=wakes, clock=clock, reentrant=reentrant
        )
        self.issuer = issuer
        self._calls = AsyncCalls(issuer, self.name, _pause)

    async def acquire(self, timeout: float | None = None) -> FenceToken:
        """Take the lease and return its token (see ``Fence.acquire``)."""
        if self.reentrant:
            flow = self._reentrant_flow(asyncio.current_task(), timeout)
            return await run_async(flow, self._calls)
        holder = self._new_holder_id()
        wait = None if timeout is None else check_timeout(timeout)  # None, the default: no check
        token = await acquire_async(holder, self._ttl_ms, wait, self._waiting, self._calls)
        return self._granted(token, holder)

    async def renew(self, token: int, ttl: float | None = None) -> None:
        """Extend the lease of ``token``; ``LeaseLost`` if no longer held."""
        await run_async(self._renew_flow(token, ttl), self._calls)

    async def release(self, token: int) -> None:
        """End the lease of ``token``; ``LeaseLost`` if it had already expired or moved on.

        On a reentrant fence, a release before the last only counts down (no I/O)."""
        value, holder = self._lease_of(token)
        if not (self.reentrant and self._counted_down(value)):
            self._released(value, await release_async(self._calls, value, holder))

    def hold(
        self,
        timeout: float | None = None,
        *,
        auto_renew: bool = True,
        on_lost: OnLost | None = None,
        cancel_on_loss: bool = False,
    ) -> AsyncHold:
        """Acquire, renew every ttl/3 in a task, release on exit (see ``Fence.hold``).

        ``async with fence.hold() as token:``; the returned ``AsyncHold`` has its own
        ``lost`` flag, ``on_lost`` callbacks (run in its renewal or watch task) and
        ``await hold.wait_lost()``. With ``cancel_on_loss=True`` the task running the
        ``async with`` body is cancelled when the renewal finds the lease lost: the body
        sees ``CancelledError`` at its next ``await``, and the ``async with`` then raises
        ``LeaseLost`` from that ``CancelledError`` (the cancellation is taken back, so
        an enclosing ``asyncio.timeout`` or ``TaskGroup`` is not confused).
        """
        if not isinstance(cancel_on_loss, bool):
            raise TypeError(f"cancel_on_loss must be a bool, not {type(cancel_on_loss).__name__}")
        return AsyncHold(self, timeout, auto_renew, on_lost, cancel_on_loss)


#: What entering a hold gives: a token (``AsyncHold``), or a semaphore's permit.
E = TypeVar("E")


class AsyncHolding(BaseHold, Generic[E]):
    """An asyncio hold: on entry it takes a lease (``_take``, which says on which fence
    and what the ``async with`` gives), renews it every ttl/3 in a task, and releases it
    on exit; with its own ``lost`` flag, ``on_lost`` callbacks, ``wait_lost`` and, if
    asked, the body's cancellation on loss. ``AsyncHold`` takes a fence's lease, a
    semaphore's hold a permit's.

    A second task, the watch, presumes the lease lost at the hold's deadline (see
    ``HoldState``) while the renewal may still be blocked in a call to a frozen or cut
    off issuer; that renewal ends when its call returns (each backend bounds its calls),
    and ``__aexit__`` does not wait for it past the deadline. (It is not cancelled: a
    driver's clean-up of a cancelled call can itself wait for the frozen issuer.)"""

    _fence: AsyncFence  # the fence of the lease held, once entered

    def __init__(
        self,
        timeout: float | None,
        auto_renew: bool,
        clock: Clock,
        on_lost: OnLost | None = None,
        cancel_on_loss: bool = False,
    ) -> None:
        super().__init__(timeout, auto_renew, None, clock)
        self._stop = asyncio.Event()
        self._tasks: tuple[asyncio.Task[None], asyncio.Task[None]] | None = None
        self._settled = asyncio.Event()  # lost or over, for wait_lost (set on the loop)
        self._cancel_on_loss = cancel_on_loss
        self._body: asyncio.Task[object] | None = None  # the task to cancel on loss
        self._cancelled = False  # whether this hold cancelled its body
        self._exiting = False
        self._signal.add(self._lost)  # first: before the user's callbacks
        if on_lost is not None:
            self.on_lost(on_lost)

    async def _take(self) -> tuple[AsyncFence, FenceToken, E]:
        """Acquire the lease: its fence, its token, and what the ``async with`` gives."""
        raise NotImplementedError

    async def __aenter__(self) -> E:
        started = self._entering()
        fence, token, given = await self._take()
        self._fence = fence
        state = await run_async(self._start_flow(fence, token, started), fence._calls)
        if self._cancel_on_loss:
            self._body = asyncio.current_task()
        if self._auto_renew:
            port = fence._calls.with_sleep(self._wait_stop)
            self._tasks = (
                asyncio.create_task(run_async(fence._renewal_flow(state), port)),
                asyncio.create_task(run_async(fence._watch_flow(state), port)),
            )
        return given

    def _lost(self, error: LeaseLost) -> None:
        """The signal's first callback: wake ``wait_lost``, cancel the body if asked.

        Runs on the loop (in the renewal task, the watch, or ``__aexit__``), so the body
        is suspended in its own code: the cancellation lands there, never in
        ``__aexit__``.
        """
        self._settled.set()
        body = self._body
        if body is not None and not self._exiting and not body.done():
            self._cancelled = True
            body.cancel(f"lease of fence {error.name!r} token {error.token} lost")

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until this hold's lease is found lost, and return True; or return False
        once ``timeout`` seconds passed (``None``: no limit) or the hold ended with its
        lease released. Any task of the hold's event loop may wait."""
        seconds = check_timeout(timeout)
        if not self._signal.settled:
            await wait_event(self._settled, seconds)
        return self._signal.lost

    async def _wait_stop(self, seconds: float) -> bool:
        return await wait_event(self._stop, seconds)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._exiting = True
        state = self._state
        if state is None:
            return
        try:
            if self._tasks is not None:
                renewal, watch = self._tasks
                self._stop.set()
                await asyncio.wait({watch})
                # a renewal still in its call (its cancellation may wait for a frozen
                # issuer too) is waited for until the deadline at most; it raises nothing
                while not renewal.done() and (left := state.left()) is not None:
                    await asyncio.wait({renewal}, timeout=left)
            if (
                self._cancelled
                and self._took_back_cancel()
                and isinstance(exc, asyncio.CancelledError)
            ):
                raise LeaseLost(
                    self._fence.name, state.token, "lease was lost; hold() cancelled its body"
                ) from exc
            if self._cancelled and isinstance(exc, asyncio.CancelledError):
                return  # cancelled from outside as well: that cancellation goes on
            with state.finishing():
                await self._fence.release(state.token)
        finally:
            state.signal.end()
            self._settled.set()
            self._over()

    def _took_back_cancel(self) -> bool:
        """Undo this hold's cancellation of its body; whether no other one is pending
        (Python 3.11+ counts them; before, this hold's is taken as the only one)."""
        body = self._body
        uncancel = getattr(body, "uncancel", None)
        if uncancel is None:
            return True
        left: int = uncancel()
        return left == 0


class AsyncHold(AsyncHolding[FenceToken]):
    """One ``async with fence.hold()``: gives the token, with its own ``lost`` flag,
    ``on_lost`` callbacks, ``wait_lost`` and, if asked, the body's cancellation on loss."""

    def __init__(
        self,
        fence: AsyncFence,
        timeout: float | None,
        auto_renew: bool,
        on_lost: OnLost | None = None,
        cancel_on_loss: bool = False,
    ) -> None:
        super().__init__(timeout, auto_renew, fence.clock, on_lost, cancel_on_loss)
        self._fence = fence

    async def _take(self) -> tuple[AsyncFence, FenceToken, FenceToken]:
        token = await self._fence.acquire(self._timeout)
        return self._fence, token, token
