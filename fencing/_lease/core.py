"""``BaseFence``: everything a fence does that is not I/O, shared by sync and async fences.

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

from .._base.errors import FenceUnavailable, LeaseLost
from .._base.flow import Flow
from .._base.log import acquire_log, lost_log, release_log, renew_log
from .._base.metrics import lease_lost
from .._base.token import FenceToken
from .._base.validate import check_name, check_timeout, check_token_for, check_ttl
from .protocol import Op, Port, Release, Renew, Sleep, Waiting, acquire_rest

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


class BaseFence:
    """A named lease plus its token counter, minus the I/O.

    A fence object may be shared by threads like a ``threading.Lock``: it remembers the
    holder id of every lease it granted until that lease is released or found lost, so
    ``renew``/``release`` can name the exact lease (holder id and token are compared by
    the issuer in one atomic step).

    A reentrant fence (``reentrant=True``) also remembers which owner (a thread, or an
    asyncio task) holds each of its leases, like a ``threading.RLock``: the owner's
    second ``acquire`` returns the same token and counts, each ``release`` counts down,
    and the lease ends at the last one. That bookkeeping is in this process only: a
    reentrant acquire or a release that counts down asks the issuer nothing.
    """

    _calls: Port  # the port of the subclass's issuer (blocking or asyncio)

    def __init__(
        self,
        name: str,
        ttl: float,
        *,
        hands_off: bool,
        wakes: bool,
        clock: Clock | None,
        reentrant: bool = False,
    ) -> None:
        if not isinstance(reentrant, bool):
            raise TypeError(f"reentrant must be a bool, not {type(reentrant).__name__}")
        self.name = check_name(name)
        self.ttl = check_ttl(ttl)
        self._ttl_ms = millis(self.ttl)
        self.clock: Clock = SYSTEM_CLOCK if clock is None else clock
        self._waiting = Waiting(hands_off, wakes, self.clock.monotonic)
        # token -> holder id; single dict operations are atomic, so threads need no lock
        self._holders: dict[int, str] = {}
        self._last_hold: HoldState | None = None
        #: Where the holder id of each acquisition comes from (an election's candidate
        #: fence makes ids that carry its value).
        self._new_holder_id: Callable[[], str] = new_holder_id
        #: Whether the owner of a lease may acquire it again (see the class docstring).
        self.reentrant = reentrant
        # reentrant only: owner -> its token, and token -> (owner, acquisitions)
        self._owned: dict[object, FenceToken] = {}
        self._counts: dict[int, tuple[object, int]] = {}

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

    def _granted(self, token: int, holder: str) -> FenceToken:
        """Remember the lease just granted to ``holder``, so ``renew``/``release`` can name it."""
        self._holders[token] = holder
        if acquire_log.isEnabledFor(DEBUG):  # one call, not two, when debug logs are off
            acquire_log.debug("fence %r: acquired token %d (ttl %ss)", self.name, token, self.ttl)
        return FenceToken(token, self.name)

    def _reentrant_flow(self, owner: object, timeout: float | None) -> Flow[Op, FenceToken]:
        """The acquire of a reentrant fence by ``owner`` (a thread, or a task): the token it
        holds, counted once more, or a lease acquired at the issuer."""
        wait = check_timeout(timeout)
        again = self._reentered(owner)
        if again is not None:
            return again
        holder = self._new_holder_id()
        rest = acquire_rest(None, holder, self._ttl_ms, 0, wait, self._waiting, self._calls)
        granted = yield from rest
        return self._owns(owner, self._granted(granted, holder))

    def _reentered(self, owner: object) -> FenceToken | None:
        """The token ``owner`` holds on this reentrant fence, counted once more; or
        ``None`` when it holds none (then it acquires at the issuer)."""
        token = self._owned.get(owner)
        if token is None:
            return None
        _, count = self._counts[token]
        self._counts[token] = (owner, count + 1)
        return token

    def _owns(self, owner: object, token: FenceToken) -> FenceToken:
        """Record that ``owner`` holds ``token``, acquired once."""
        self._owned[owner] = token
        self._counts[token] = (owner, 1)
        return token

    def _counted_down(self, token: int) -> bool:
        """On a reentrant fence, a release that is not the last: count it down and
        return True (the lease stays); False when the lease must end at the issuer."""
        entry = self._counts.get(token)
        if entry is None or entry[1] <= 1:
            return False
        self._counts[token] = (entry[0], entry[1] - 1)
        return True

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

    def _release_flow(self, token: object) -> Flow[Op, None]:
        """``release`` as a flow, for a release that is part of a larger one (a
        semaphore's permit); the fences' own ``release`` calls the issuer directly."""
        value, holder = self._lease_of(token)
        if not (self.reentrant and self._counted_down(value)):
            release = Release(value, holder)
            yield release
            self._released(value, release.result)

    def _released(self, token: int, held: bool) -> None:
        """Forget the lease of ``token``; ``LeaseLost`` if the release found it gone."""
        if self.reentrant:
            self._forget(token)
        else:  # _forget, inline: this is on every release's path
            self._holders.pop(token, None)
        if not held:
            lost_log.warning(
                "fence %r: lease of token %d lost (found at release)", self.name, token
            )
            raise LeaseLost(self.name, token, "lease expired or was taken over before release")
        if release_log.isEnabledFor(DEBUG):
            release_log.debug("fence %r: released token %d", self.name, token)

    def _renewal_flow(self, hold: HoldState) -> Flow[Op, None]:
        """Renew ``hold``'s lease every ttl/3, counted from when the last successful
        renewal was sent, until stopped; on loss mark the hold lost.

        Each renewal that succeeds moves the hold's deadline (``HoldState.renewed``) to
        when that request was *sent* plus the ttl: the issuer may have applied it at any
        moment until its reply. A renewal that fails because the issuer is unreachable
        is retried every ttl/6 until the deadline, where the lease is presumed lost.
        (Retrying after half of what is left would never reach the end on a virtual
        clock, and would call the issuer ever faster on a real one.) The hold's watch
        (``_watch_flow``) presumes the loss at the deadline too, while a renewal is
        still blocked in its call; a renewal that returns after that changes nothing.
        Any other error ends the renewal, and the lease is lost (``renewal_crashed``).
        """
        try:
            yield from self._renewing(hold)
        except Exception:
            hold.renewal_crashed()

    def _renewing(self, hold: HoldState) -> Flow[Op, None]:
        token = hold.token
        interval = self.ttl / 3
        monotonic = self.clock.monotonic
        delay = max(0.0, hold.sent + interval - monotonic())
        while True:
            pause = Sleep(delay)
            yield pause
            if pause.result or hold.signal.settled:
                return
            sent = monotonic()
            try:
                yield from self._renew_flow(token)
            except LeaseLost as lost:
                hold.lose(lost)
                return
            except FenceUnavailable as exc:
                left = hold.left(exc)
                if left is None:
                    return
                delay = min(interval / 2, left)  # sooner, but never a shrinking series
                continue
            if not hold.renewed(sent):
                return  # the deadline passed while the renewal was in flight: too late
            delay = max(0.0, sent + interval - monotonic())

    def _watch_flow(self, hold: HoldState) -> Flow[Op, None]:
        """Sleep until ``hold``'s deadline and presume its lease lost there, unless a
        renewal moved the deadline meanwhile (then sleep until the new one), or the hold
        was stopped. It waits on its own, not on the renewal's calls, so a renewal
        blocked in a frozen issuer or a cut connection does not delay the signal (as
        etcd's clients time a lease's keep-alive out by a timer of their own)."""
        while (left := hold.left()) is not None:
            pause = Sleep(left)
            yield pause
            if pause.result:
                return

    def _anchor_flow(
        self, token: FenceToken, started: float
    ) -> Flow[Op, tuple[float, LeaseLost | None]]:
        """When the ttl of a hold's lease last began, on this client's clock, at most:
        ``started``, when the acquire began, if it took at most a third of the ttl; else
        the send time of a renewal made at once (an acquire that waited may have been
        granted or handed its lease at any moment since it began, and a reentrant
        acquire asked the issuer nothing).

        It never raises, so a hold whose acquire succeeded is always entered (and its
        lease released on leaving). A lease that renewal finds gone comes back with the
        loss, and the hold starts lost, as if its renewer had found it. An issuer that
        does not answer leaves the earliest moment the ttl can have begun: ``started``,
        or for a reentrant acquire (whose lease began before it) a whole ttl earlier, so
        the hold's watch presumes the loss at once unless a renewal gets through."""
        monotonic = self.clock.monotonic
        reentered = self.reentrant and self._counts.get(token, (None, 1))[1] > 1
        if not reentered and monotonic() - started <= self.ttl / 3:
            return started, None
        sent = monotonic()
        try:
            yield from self._renew_flow(token)
        except LeaseLost as lost:
            return started, lost
        except FenceUnavailable:
            return (started - self.ttl if reentered else started), None
        return sent, None

    def _abandon_flow(self, token: int) -> Flow[Op, None]:
        """Release the lease of ``token`` that a blocking hold presumed lost, or whose
        release at the hold's end the issuer did not answer, once the issuer answers
        again; then forget it (docs/guarantees.md: an asyncio hold leaves no task behind
        it, so it does not).

        A presumed loss is not a known one: a lease whose issuer keeps it with no expiry
        of its own (a ZooKeeper session or a PostgreSQL advisory lock's connection that
        lived through the outage) must not outlive the hold that gave it up, or nobody
        else could take it. So the release is tried every ttl/6 for two ttls while the
        issuer does not answer. It compares the holder in one atomic step, so it can end
        nothing but this lease; a lease already gone is just forgotten, and any other
        error ends the attempt (the hold is over: its client may be closed already).
        """
        holder = self._holders.get(token)
        if holder is None:
            return
        give_up = self.clock.monotonic() + 2 * self.ttl
        try:
            while True:
                try:
                    yield Release(token, holder)
                    return
                except FenceUnavailable:
                    if self.clock.monotonic() >= give_up:
                        return
                except Exception:  # best effort, after the hold ended (its client closed?)
                    release_log.debug("fence %r: no release of token %d", self.name, token)
                    return
                pause = Sleep(self.ttl / 6)
                yield pause
                if pause.result:
                    return
        finally:
            self._forget(token)

    # -- holds -------------------------------------------------------------------------

    def _hold_started(
        self, token: FenceToken, signal: LossSignal | None = None, sent: float | None = None
    ) -> HoldState:
        """The state of a hold of ``token`` whose lease was granted (or last renewed)
        by a request sent at ``sent`` (default: now) on the fence's clock."""
        start = self.clock.monotonic() if sent is None else sent
        hold = HoldState(self, token, LossSignal() if signal is None else signal, start)
        self._last_hold = hold
        return hold

    # -- helpers -----------------------------------------------------------------------

    def _lease_of(self, token: object) -> tuple[int, str]:
        """The token's value and the holder id of its lease; ``LeaseLost`` if this fence
        holds none. A ``FenceToken`` of this fence is the usual case, on every release's
        path: ``check_token_for``'s own first test, inline; any other token is checked."""
        if type(token) is FenceToken and token.name == self.name and token >= 0:
            value = int(token)
        else:
            value = check_token_for(token, self.name)
        holder = self._holders.get(value)
        if holder is None:
            raise LeaseLost(self.name, value, "this fence holds no lease with that token")
        return value, holder

    def _forget(self, token: int) -> None:
        self._holders.pop(token, None)
        if self.reentrant:
            entry = self._counts.pop(token, None)
            if entry is not None:
                self._owned.pop(entry[0], None)


#: An ``on_lost`` callback: called once with the ``LeaseLost`` that says what was lost.
OnLost = Callable[[LeaseLost], object]


def check_callback(callback: object) -> OnLost:
    """``callback`` if it can be called, else ``TypeError`` (before any I/O)."""
    if not callable(callback):
        raise TypeError(f"on_lost needs a callable, not {type(callback).__name__}")
    return callback


class LossSignal:
    """How one hold tells that its lease is lost: a flag set once, the ``on_lost``
    callbacks, and the waiters of ``wait_lost``. Thread-safe.

    ``lose`` sets the flag, runs the callbacks registered so far, each once, then wakes
    the waiters (so ``wait_lost`` returns once every callback has run), in the calling
    thread: the hold's renewer or watch (threads for ``Hold``, tasks on the event loop
    for ``AsyncHold``), or the code leaving the hold when its release or its deadline
    is what found the lease gone. A callback registered after the loss runs at once, in
    the thread that registers it. A callback that raises is logged on ``fencing.lost``
    and does not stop the others. ``end`` says the hold is over with its lease released:
    waiters wake up and learn it was not lost.
    """

    __slots__ = ("_callbacks", "_lock", "_lost", "_settled", "error")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lost = threading.Event()
        self._settled = threading.Event()  # lost, or the hold is over
        self._callbacks: list[OnLost] = []
        #: What was lost, once it was: the ``LeaseLost`` the callbacks receive.
        self.error: LeaseLost | None = None

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    @property
    def settled(self) -> bool:
        """Lost, or over: nothing will change any more."""
        return self._settled.is_set()

    def add(self, callback: OnLost) -> None:
        """Run ``callback`` on the loss (at once if the lease is lost already)."""
        with self._lock:
            error = self.error
            if error is None:
                self._callbacks.append(callback)
                return
        _call(callback, error)

    def lose(self, error: LeaseLost) -> None:
        """Mark the lease lost (once; later calls change nothing) and run the callbacks."""
        with self._lock:
            if self.error is not None:
                return
            self.error = error
            callbacks, self._callbacks = self._callbacks, []
            self._lost.set()
        for callback in callbacks:
            _call(callback, error)
        self._settled.set()  # after the callbacks: a waiter that wakes sees them done

    def end(self) -> None:
        """The hold is over: wake the waiters (``lost`` stays as it is)."""
        self._settled.set()

    def wait(self, timeout: float | None) -> bool:
        """Block until lost or over, at most ``timeout`` seconds; whether it was lost."""
        self._settled.wait(None if timeout is None else min(timeout, threading.TIMEOUT_MAX))
        return self._lost.is_set()


def _call(callback: OnLost, error: LeaseLost) -> None:
    try:
        callback(error)
    except Exception:
        lost_log.exception(
            "fence %r: an on_lost callback of token %s failed", error.name, error.token
        )


class BaseHold:
    """What the blocking ``Hold`` and the asyncio ``AsyncHold`` share: no I/O."""

    _state: HoldState | None = None

    def __init__(
        self, timeout: float | None, auto_renew: bool, on_lost: OnLost | None, clock: Clock
    ) -> None:
        self._timeout = timeout
        self._clock = clock  # the fence's: where the hold's deadline is read
        self._auto_renew = auto_renew
        self._signal = LossSignal()
        if on_lost is not None:
            self._signal.add(check_callback(on_lost))

    def _entering(self) -> float:
        """A hold is entered once: its state (token, lost flag) belongs to one lease.
        Returns when the entry began, on the fence's clock."""
        if self._state is not None:
            raise RuntimeError("a hold is entered once; call fence.hold() again")
        return self._clock.monotonic()

    def _start_flow(
        self, fence: BaseFence, token: FenceToken, started: float
    ) -> Flow[Op, HoldState]:
        """Once ``fence`` granted ``token`` (its acquire began at ``started``): the hold's
        state, its deadline anchored (``_anchor_flow``); a lease found gone already
        starts it lost."""
        sent, lost = yield from fence._anchor_flow(token, started)
        state = self._state = fence._hold_started(token, self._signal, sent)
        if lost is not None:
            state.lose(lost)
        return state

    def _over(self) -> None:
        """The hold ended (its lease released, or found lost): a hook for what a kind of
        hold counts (a semaphore's permits)."""

    @property
    def token(self) -> FenceToken | None:
        """The token of this hold once entered, else ``None``."""
        return None if self._state is None else self._state.token

    @property
    def lost(self) -> bool:
        """True once this hold's lease was found lost (by its renewal, or on leaving)."""
        return self._signal.lost

    def on_lost(self, callback: Callable[[LeaseLost], object]) -> None:
        """Call ``callback(error)`` once when this hold's lease is found lost.

        ``error`` is a ``LeaseLost`` naming the fence and token and saying how the lease
        was lost (renewal refused, or no renewal went through by the lease's end). The
        callback runs where the loss was found: the hold's renewer or its watch (see
        ``HoldState``), background threads for a ``Hold``, tasks on the event loop for
        an ``AsyncHold`` (so it must not block; start a task from it for asynchronous
        work). Registered after the loss, it runs at
        once, in the caller's thread. It may be registered before the hold is entered.
        A callback that raises is logged on ``fencing.lost``; the others still run.
        ``TypeError`` if ``callback`` is not callable.
        """
        self._signal.add(check_callback(callback))


#: The share of a ttl by which a hold presumes its lease lost before ``sent + ttl``: it
#: covers the issuer's clock running up to 1% faster than this client's during one ttl.
DRIFT = 0.01


class HoldState:
    """What one ``hold()`` knows once entered: its token, its ``LossSignal``, and its
    deadline: when the lease must be presumed lost unless a renewal succeeds first.

    The deadline is ``sent + ttl`` less the ``DRIFT`` margin, where ``sent`` is this
    client's monotonic time when the acquire or the last successful renewal was
    *sent*: the issuer cannot have started the lease's ttl before then, so the lease
    cannot outlive that moment on the issuer's clock, whatever happened to the reply.
    Each hold has its own, so a second hold on the same fence never clears the first
    one's flag.
    """

    __slots__ = ("_fence", "deadline", "presumed", "sent", "signal", "token")

    def __init__(
        self, fence: BaseFence, token: FenceToken, signal: LossSignal, sent: float
    ) -> None:
        self._fence = fence
        self.token = token
        self.signal = signal
        self.sent = sent
        self.deadline = sent + fence.ttl * (1 - DRIFT)
        #: True once the loss was presumed at the deadline rather than found: the lease
        #: may still be held, so a blocking hold's end releases it in the background.
        self.presumed = False

    @property
    def lost(self) -> bool:
        """True once this hold's lease was found (or presumed) lost."""
        return self.signal.lost

    def lose(self, error: LeaseLost | None = None) -> None:
        """Mark the lease lost (``error`` says how) and run the hold's callbacks."""
        if error is None:
            error = LeaseLost(self._fence.name, self.token, "lease was lost during hold()")
        self.signal.lose(error)

    def renewed(self, sent: float) -> bool:
        """A renewal sent at ``sent`` succeeded: move the deadline. False if the hold is
        lost or over already (a loss signalled is never taken back)."""
        if self.signal.settled:
            return False
        self.sent = sent
        self.deadline = sent + self._fence.ttl * (1 - DRIFT)
        return True

    def left(self, cause: Exception | None = None) -> float | None:
        """Seconds until the deadline; ``None`` once the hold is lost or over, and, at
        the deadline, after presuming the lease lost (``cause``: the renewal's last
        error, if any)."""
        if self.signal.settled:
            return None
        fence = self._fence
        left = self.deadline - fence.clock.monotonic()
        if left >= 0.001:  # a lease's resolution: less than that is nothing left
            return left
        token = self.token
        why = "no renewal succeeded within the ttl"
        if cause is not None:
            why = f"issuer unreachable past the lease's end: {cause}"
        lost_log.warning("fence %r: token %d presumed lost: %s", fence.name, token, why)
        lease_lost(fence._calls, fence._holders.get(token))
        presumed = LeaseLost(fence.name, token, why)
        presumed.__cause__ = cause
        self.presumed = True  # its holder id is kept for the release that ends the hold
        self.lose(presumed)
        return None

    @contextlib.contextmanager
    def finishing(self) -> Iterator[None]:
        """Around the release that ends the hold: ``LeaseLost`` if renewal lost the lease
        during the hold, and a release that finds it gone (a hold without auto-renewal
        that outlived its ttl) marks the hold lost too."""
        if self.signal.lost:
            raise LeaseLost(self._fence.name, self.token, "lease was lost during hold()")
        try:
            yield
        except LeaseLost as exc:
            self.signal.lose(exc)
            raise

    def renewal_crashed(self) -> None:
        """A renewal died of an unexpected error: the holder must not believe it holds."""
        fence = self._fence
        lost_log.exception("fence %r: renewal of token %d failed", fence.name, self.token)
        lease_lost(fence._calls, fence._holders.get(self.token))
        fence._forget(self.token)
        self.lose(LeaseLost(fence.name, self.token, "the renewal failed with an unexpected error"))


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
