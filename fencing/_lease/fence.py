"""``Fence``: the blocking fence, driving ``BaseFence``'s flows against an ``Issuer``.

Imports the core, protocol and flow modules; knows no backend.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Generic, TypeVar

from .._base.errors import FenceUnavailable
from .._base.flow import Flow, run_sync
from .._base.token import FenceToken
from .._base.validate import check_timeout
from ..issuer import Issuer
from .core import DEFAULT_TTL, BaseFence, BaseHold, Clock, OnLost, pause_with
from .protocol import Calls, Op, acquire_sync, capabilities, release_sync


class Fence(BaseFence):
    """A named lease plus its token counter, on a blocking issuer.

    ``acquire`` grants the lease and returns a ``FenceToken`` larger than every token
    issued for this name before; pass it with every write to a guarded store.
    ``clock`` (default: the system's) is where waiting reads and spends time.

    ``reentrant=True``: the thread that holds a lease of this fence may ``acquire`` it
    again and gets the same token; each ``release`` counts down and the lease ends at
    the last one. Other threads (and other fence objects) wait as usual. In-process
    only: neither the reentrant acquire nor a counted-down release asks the issuer, so
    keep the lease renewed (``hold()``) if it must outlive its ttl.
    """

    _calls: Calls

    def __init__(
        self,
        issuer: Issuer,
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
        self._calls = Calls(issuer, self.name, pause_with(self.clock))

    def acquire(self, timeout: float | None = None) -> FenceToken:
        """Take the lease and return its token.

        ``timeout=0`` tries once, ``None`` waits for ever, a number waits at most that
        many seconds; then ``AcquireTimeout``. Waiters are woken on release (or handed
        the lease) where the issuer supports it, and otherwise back off with jitter.
        """
        if self.reentrant:
            return run_sync(self._reentrant_flow(threading.current_thread(), timeout), self._calls)
        holder = self._new_holder_id()
        wait = None if timeout is None else check_timeout(timeout)  # None, the default: no check
        return self._granted(
            acquire_sync(holder, self._ttl_ms, wait, self._waiting, self._calls), holder
        )

    def renew(self, token: int, ttl: float | None = None) -> None:
        """Extend the lease of ``token`` to ``ttl`` (default: the fence's) from now.

        Raises ``LeaseLost`` if that exact lease is no longer held.
        """
        run_sync(self._renew_flow(token, ttl), self._calls)

    def release(self, token: int) -> None:
        """End the lease of ``token``; ``LeaseLost`` if it had already expired or moved on.

        On a reentrant fence, a release before the last only counts down (no I/O)."""
        value, holder = self._lease_of(token)
        if not (self.reentrant and self._counted_down(value)):
            self._released(value, release_sync(self._calls, value, holder))

    def _abandon(self, token: int) -> None:
        """Release a lease presumed lost, or whose release the issuer did not answer
        (``_abandon_flow``), in a thread of its own: leaving a hold never waits for an
        issuer that does not answer."""
        threading.Thread(
            target=run_sync,
            args=(self._abandon_flow(token), self._calls),
            name=f"fencing-abandon:{self.name}",
            daemon=True,
        ).start()

    def hold(
        self,
        timeout: float | None = None,
        *,
        auto_renew: bool = True,
        on_lost: OnLost | None = None,
    ) -> Hold:
        """Acquire, renew every ttl/3 in a background thread, release on exit.

        ``with fence.hold() as token:`` gives the token. The returned ``Hold`` has its
        own ``lost`` flag: if a renewal finds the lease lost it becomes True at once,
        and leaving the block raises ``LeaseLost``. ``on_lost(error)`` is called once,
        in a background thread of the hold, when that happens (see ``Hold.on_lost``), and
        ``Hold.wait_lost`` blocks until it does.
        """
        return Hold(self, timeout, auto_renew, on_lost)


#: What entering a hold gives: a token (``Hold``), or a semaphore's permit.
E = TypeVar("E")


class Holding(BaseHold, Generic[E]):
    """A blocking hold: on entry it takes a lease (``_take``, which says on which fence
    and what the ``with`` gives), renews it every ttl/3 in a background thread, and
    releases it on exit; with its own ``lost`` flag, ``on_lost`` callbacks and
    ``wait_lost``. ``Hold`` takes a fence's lease, a semaphore's hold a permit's.

    A second thread, the watch, presumes the lease lost at the hold's deadline (see
    ``HoldState``) while the renewer may still be blocked in a call to a frozen or cut
    off issuer; that renewer ends when its call returns (each backend bounds its calls)
    or, if the call is still blocked, is left behind by ``__exit__``."""

    _fence: Fence  # the fence of the lease held, once entered

    def __init__(
        self, timeout: float | None, auto_renew: bool, on_lost: OnLost | None, clock: Clock
    ) -> None:
        super().__init__(timeout, auto_renew, on_lost, clock)
        self._stop = threading.Event()
        self._threads: tuple[threading.Thread, threading.Thread] | None = None

    def _take(self) -> tuple[Fence, FenceToken, E]:
        """Acquire the lease: its fence, its token, and what the ``with`` gives."""
        raise NotImplementedError

    def __enter__(self) -> E:
        started = self._entering()
        fence, token, given = self._take()
        self._fence = fence
        state = run_sync(self._start_flow(fence, token, started), fence._calls)
        if self._auto_renew:
            port = fence._calls.with_sleep(self._stop.wait)
            self._threads = (
                _thread(fence._renewal_flow(state), port, f"fencing-renew:{fence.name}"),
                _thread(fence._watch_flow(state), port, f"fencing-watch:{fence.name}"),
            )
        return given

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until this hold's lease is found lost, and return True; or return False
        once ``timeout`` seconds passed (``None``: no limit) or the hold ended with its
        lease released. Any thread may wait, also before the hold is entered."""
        return self._signal.wait(check_timeout(timeout))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        state = self._state
        if state is None:
            return
        try:
            if self._threads is not None:
                renewer, watch = self._threads
                self._stop.set()
                watch.join()
                # a renewer blocked in its call is waited for until the deadline at most
                while renewer.is_alive() and (left := state.left()) is not None:
                    renewer.join(left)
            if state.presumed:
                self._fence._abandon(state.token)
            with state.finishing():
                try:
                    self._fence.release(state.token)
                except FenceUnavailable:  # still held, maybe: released once it answers
                    self._fence._abandon(state.token)
                    raise
        finally:
            state.signal.end()
            self._over()


def _thread(flow: Flow[Op, None], port: Calls, name: str) -> threading.Thread:
    """A daemon thread, started, that drives ``flow`` on ``port``."""
    thread = threading.Thread(target=run_sync, args=(flow, port), name=name, daemon=True)
    thread.start()
    return thread


class Hold(Holding[FenceToken]):
    """One ``fence.hold()``: a context manager giving the token, with its own ``lost``
    flag, ``on_lost`` callbacks and ``wait_lost``."""

    def __init__(
        self, fence: Fence, timeout: float | None, auto_renew: bool, on_lost: OnLost | None
    ) -> None:
        super().__init__(timeout, auto_renew, on_lost, fence.clock)
        self._fence = fence

    def _take(self) -> tuple[Fence, FenceToken, FenceToken]:
        token = self._fence.acquire(self._timeout)
        return self._fence, token, token
