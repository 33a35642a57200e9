"""``Fence``: the blocking fence, driving ``FenceCore``'s flows against an ``Issuer``.

Imports the core and protocol modules; knows no backend.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ._core import DEFAULT_TTL, FenceCore
from ._protocol import Busy, Issuer, run_sync
from ._token import FenceToken


class Fence(FenceCore):
    """A named lease plus its token counter, on a blocking issuer.

    ``acquire`` grants the lease and returns a ``FenceToken`` larger than every token
    issued for this name before; pass it with every write to a guarded store.
    """

    def __init__(self, issuer: Issuer, name: str, ttl: float = DEFAULT_TTL) -> None:
        super().__init__(name, ttl, wakes_on_release=issuer.wakes_on_release)
        self.issuer = issuer

    def acquire(self, timeout: float | None = None) -> FenceToken:
        """Take the lease and return its token.

        ``timeout=0`` tries once, ``None`` waits for ever, a number waits at most that
        many seconds; then ``AcquireTimeout``. Waiters are woken on release where the
        issuer supports it, and otherwise back off with jitter.
        """
        first, wait = self._first_attempt(timeout)
        reply = first.call(self.issuer, self.name)
        if isinstance(reply, Busy):
            reply = run_sync(self._wait_flow(first, reply, wait), self.issuer, self.name)
        return self._granted(reply, first)

    def renew(self, token: int, ttl: float | None = None) -> None:
        """Extend the lease of ``token`` to ``ttl`` (default: the fence's) from now.

        Raises ``LeaseLost`` if that exact lease is no longer held.
        """
        run_sync(self._renew_flow(token, ttl), self.issuer, self.name)

    def release(self, token: int) -> None:
        """End the lease of ``token``; ``LeaseLost`` if it had already expired or moved on."""
        value, holder = self._lease_of(token)
        self._released(value, self.issuer.release(self.name, value, holder))

    @contextmanager
    def hold(
        self, timeout: float | None = None, *, auto_renew: bool = True
    ) -> Iterator[FenceToken]:
        """Acquire, renew every ttl/3 in a background thread, release on exit.

        If a renewal finds the lease lost, ``fence.lost`` becomes True at once and
        leaving the block raises ``LeaseLost``.
        """
        token = self.acquire(timeout)
        self._hold_started()
        renewer = _Renewer(self, token) if auto_renew else None
        try:
            yield token
        finally:
            if renewer is not None:
                renewer.stop()
            self._hold_finished(token)
            self.release(token)


class _Renewer:
    """The background thread of ``hold()``: stops at once when asked (an ``Event``)."""

    def __init__(self, fence: Fence, token: FenceToken) -> None:
        self._stop = threading.Event()
        self._fence = fence
        self._token = token
        self._thread = threading.Thread(
            target=self._run, name=f"fencing-renew:{fence.name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        fence = self._fence
        try:
            run_sync(fence._renewal_flow(self._token), fence.issuer, fence.name, self._stop.wait)
        except Exception:
            fence._renewal_crashed(self._token)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
