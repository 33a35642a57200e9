"""``FenceCore``: everything a fence does that is not I/O, shared by sync and async fences.

It checks arguments, mints holder ids, remembers which leases this object granted,
writes the logs and expresses each operation as a flow (see ``_protocol``). The sync
``Fence`` and the asyncio ``AsyncFence`` only drive those flows (``_flow``), and each
``hold()`` keeps its own state (``HoldState``). Time comes from a ``Clock`` passed in.

Imports the errors, token, validation, log, telemetry and protocol modules.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from logging import DEBUG
from typing import Protocol

from ._errors import FenceUnavailable, LeaseLost
from ._flow import Flow
from ._log import acquire_log, lost_log, release_log, renew_log
from ._metrics import lease_lost
from ._protocol import (
    AsyncCalls,
    Calls,
    Op,
    Renew,
    Sleep,
    Waiting,
)
from ._token import FenceToken
from ._validate import check_name, check_timeout, check_token_for, check_ttl

DEFAULT_TTL = 10.0


class Clock(Protocol):
    """Where a fence's time comes from: ``monotonic()`` seconds and ``sleep(seconds)``.

    The default is the system's (``time.monotonic``, ``time.sleep``); a test passes a
    virtual clock so that waiting costs no real time. Lease lifetimes are never read
    from it: they come from the issuer's clock (invariant 6 of docs/design.md).
    """

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        ...


class SystemClock:
    """The process's own clock: ``time.monotonic`` and ``time.sleep``."""

    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)


SYSTEM_CLOCK = SystemClock()


def pause_with(clock: Clock) -> Callable[[float], bool]:
    """The ``sleep`` of a blocking port: let the time pass on ``clock``; never stopped."""
    sleep = clock.sleep

    def pause(seconds: float) -> bool:
        sleep(seconds)
        return False

    return pause


class FenceCore:
    """A named lease plus its token counter, minus the I/O.

    A fence object may be shared by threads like a ``threading.Lock``: it remembers the
    holder id of every lease it granted until that lease is released or found lost, so
    ``renew``/``release`` can name the exact lease (holder id and token are compared by
    the issuer in one atomic step).
    """

    _calls: Calls | AsyncCalls  # the port of the subclass's issuer (blocking or asyncio)

    def __init__(
        self,
        name: str,
        ttl: float,
        *,
        hands_off: bool,
        wakes: bool,
        clock: Clock | None,
    ) -> None:
        self.name = check_name(name)
        self.ttl = check_ttl(ttl)
        self._ttl_ms = millis(self.ttl)
        self.clock: Clock = SYSTEM_CLOCK if clock is None else clock
        self._waiting = Waiting(hands_off, wakes, self.clock.monotonic)
        # token -> holder id; single dict operations are atomic, so threads need no lock
        self._holders: dict[int, str] = {}
        self._last_hold: HoldState | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, ttl={self.ttl})"

    @property
    def lost(self) -> bool:
        """Deprecated: use the ``Hold`` object's ``lost`` (``h = fence.hold()``).

        True once a background renewal of this fence's most recent ``hold()`` found its
        lease lost. Kept for 0.x; a fence's holds each have their own flag now.
        """
        warnings.warn(
            "fence.lost is deprecated: use the hold's own flag (h = fence.hold(); h.lost)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._last_hold is not None and self._last_hold.lost

    # -- flows -------------------------------------------------------------------------

    def _acquiring(self, timeout: object) -> tuple[str, float | None]:
        """An acquire's fresh holder id and its checked ``timeout`` (``None``, the
        default, needs no check: this is on every acquire's path)."""
        return new_holder_id(), None if timeout is None else check_timeout(timeout)

    def _granted(self, token: int, holder: str) -> FenceToken:
        """Remember the lease just granted to ``holder``, so ``renew``/``release`` can name it."""
        self._holders[token] = holder
        if acquire_log.isEnabledFor(DEBUG):  # one call, not two, when debug logs are off
            acquire_log.debug("fence %r: acquired token %d (ttl %ss)", self.name, token, self.ttl)
        return FenceToken(token, self.name)

    def _renew_flow(self, token: object, ttl: object = None) -> Flow[Op, None]:
        value, holder = self._lease_of(token)
        seconds = self.ttl if ttl is None else check_ttl(ttl)
        renew = Renew(value, holder, millis(seconds))
        yield renew
        if not renew.result:
            self._forget(value)
            lost_log.warning("fence %r: lease of token %d lost (found at renew)", self.name, value)
            raise LeaseLost(self.name, value, "lease expired or was taken over before renew")
        renew_log.debug("fence %r: renewed token %d for %ss", self.name, value, seconds)

    def _released(self, token: int, held: bool) -> None:
        """Forget the lease of ``token``; ``LeaseLost`` if the release found it gone."""
        self._holders.pop(token, None)  # _forget, inline: this is on every release's path
        if not held:
            lost_log.warning(
                "fence %r: lease of token %d lost (found at release)", self.name, token
            )
            raise LeaseLost(self.name, token, "lease expired or was taken over before release")
        if release_log.isEnabledFor(DEBUG):
            release_log.debug("fence %r: released token %d", self.name, token)

    def _renewal_flow(self, hold: HoldState) -> Flow[Op, None]:
        """Renew ``hold``'s lease every ttl/3 until stopped; on loss mark the hold lost.

        A renewal that fails because the issuer is unreachable is retried every ttl/6;
        once a whole ttl has passed since the last success the lease must be presumed
        lost. (Retrying after half of what is left would never reach the end on a
        virtual clock, and would call the issuer ever faster on a real one.)
        """
        token = hold.token
        interval = self.ttl / 3
        last_ok = self.clock.monotonic()
        delay = interval
        while True:
            pause = Sleep(delay)
            yield pause
            if pause.result:
                return
            try:
                yield from self._renew_flow(token)
            except LeaseLost:
                hold.lose()
                return
            except FenceUnavailable as exc:
                left = self.ttl - (self.clock.monotonic() - last_ok)
                if left < 0.001:  # a lease's resolution: nothing of it can be left
                    lost_log.warning("fence %r: token %d presumed lost: %s", self.name, token, exc)
                    lease_lost(self._calls, self._holders.get(token))
                    self._forget(token)
                    hold.lose()
                    return
                delay = min(interval / 2, left)  # sooner, but never a shrinking series
                continue
            last_ok = self.clock.monotonic()
            delay = interval

    # -- holds -------------------------------------------------------------------------

    def _hold_started(self, token: FenceToken) -> HoldState:
        hold = self._last_hold = HoldState(self, token)
        return hold

    # -- helpers -----------------------------------------------------------------------

    def _lease_of(self, token: object) -> tuple[int, str]:
        value = check_token_for(token, self.name)
        holder = self._holders.get(value)
        if holder is None:
            raise LeaseLost(self.name, value, "this fence holds no lease with that token")
        return value, holder

    def _forget(self, token: int) -> None:
        self._holders.pop(token, None)


class HoldBase:
    """What the blocking ``Hold`` and the asyncio ``AsyncHold`` share: no I/O."""

    _state: HoldState | None = None

    def __init__(self, timeout: float | None, auto_renew: bool) -> None:
        self._timeout = timeout
        self._auto_renew = auto_renew

    def _entering(self) -> None:
        """A hold is entered once: its state (token, lost flag) belongs to one lease."""
        if self._state is not None:
            raise RuntimeError("a hold is entered once; call fence.hold() again")

    @property
    def token(self) -> FenceToken | None:
        """The token of this hold once entered, else ``None``."""
        return None if self._state is None else self._state.token

    @property
    def lost(self) -> bool:
        """True once this hold's renewal found its lease lost."""
        return self._state is not None and self._state.lost


class HoldState:
    """What one ``hold()`` knows: its token and its own lost flag (set by its renewal).

    Each hold has its own, so a second hold on the same fence never clears the first
    one's flag.
    """

    __slots__ = ("_fence", "_lost", "token")

    def __init__(self, fence: FenceCore, token: FenceToken) -> None:
        self._fence = fence
        self.token = token
        self._lost = threading.Event()  # set from a renewer thread or task

    @property
    def lost(self) -> bool:
        """True once this hold's renewal found its lease lost."""
        return self._lost.is_set()

    def lose(self) -> None:
        self._lost.set()

    @contextlib.contextmanager
    def finishing(self) -> Iterator[None]:
        """Around the release that ends the hold: ``LeaseLost`` if renewal lost the lease
        during the hold, and a release that finds it gone (a hold without auto-renewal
        that outlived its ttl) marks the hold lost too."""
        if self._lost.is_set():
            raise LeaseLost(self._fence.name, self.token, "lease was lost during hold()")
        try:
            yield
        except LeaseLost:
            self._lost.set()
            raise

    def renewal_crashed(self) -> None:
        """A renewal died of an unexpected error: the holder must not believe it holds."""
        fence = self._fence
        lost_log.exception("fence %r: renewal of token %d failed", fence.name, self.token)
        lease_lost(fence._calls, fence._holders.get(self.token))
        fence._forget(self.token)
        self._lost.set()


class _HolderIds:
    """Unique holder ids, cheaply: a random per-process prefix and a serial number.

    The prefix is drawn again in a forked child, so parent and child never share ids.
    """

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self._prefix = os.urandom(12).hex()
        self._serial = itertools.count()

    def next_id(self) -> str:
        return f"{self._prefix}{next(self._serial):x}"


#: A fresh holder id per acquisition: it names the exact lease in renew and release.
#: (A bound method: Python calls one faster than an object's ``__call__``.)
new_holder_id = _HolderIds().next_id


def millis(seconds: float) -> int:
    """Seconds as whole milliseconds, at least 1 (issuers take ``ttl_ms``)."""
    return max(1, round(seconds * 1000))
