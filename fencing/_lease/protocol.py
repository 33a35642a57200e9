"""The fence protocol without I/O and without a clock of its own: what to ask the issuer,
how long to wait, what a reply means.

Fence operations are flows (see ``_flow``) whose steps are the issuer calls below
(``TryAcquire``, ``TryAcquireQueued``, ``AwaitRelease``, ``AwaitHandOff``, ``Renew``,
``Release``) and ``Sleep``. Each step carries itself out on a ``Calls`` port (blocking)
or an ``AsyncCalls`` port (asyncio) and keeps its typed reply in ``result``. Time comes
in from the caller: every flow that waits takes a ``clock`` (seconds, monotonic), and
sleeping is a step, so tests drive the flows on virtual time.

Rules that keep the protocol honest:

1. The uncontended acquire is one issuer call, made directly by
   ``acquire_sync``/``acquire_async`` (no flow, no step object); only a ``Busy`` reply
   starts the wait flow. A release too is one direct call (``release_sync``/
   ``release_async``); a step object is made for it only when telemetry observes it.
2. The deadline always wins: once it has passed, a waiter makes one last attempt that
   also leaves the hand-off queue, then raises ``AcquireTimeout``.
3. A waiter that stops waiting for any reason (deadline, error, cancellation) leaves
   the queue and releases a lease handed to it meanwhile, so no lease goes to a
   waiter that has gone.

Imports the errors, the flow drivers, the issuer protocols and the telemetry hooks.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Awaitable, Callable
from logging import DEBUG
from typing import TypeVar, cast

from .._base.errors import AcquireTimeout, FencingError
from .._base.flow import Flow, run_async, run_sync
from .._base.log import acquire_log
from .._base.metrics import GRANTED, AcquireWatch, live, releasing, renewing
from ..issuer import (
    AsyncHandOff,
    AsyncIssuer,
    AsyncWakesOnRelease,
    Busy,
    HandOff,
    Issuer,
    WakesOnRelease,
)

T = TypeVar("T")

# -- ports: what the steps are carried out on ----------------------------------------------


class Calls:
    """The blocking port of one fence's flows: its issuer, capabilities and ``sleep``.

    ``sleep(seconds)`` returns True when the flow is asked to stop (a renewer's stop
    event), else False after the time has passed. ``release(name, token, holder)`` is
    the call that ends a lease: ``issuer.release``, or, for a semaphore's slot, the
    issuer's ``release_slot`` that also wakes the semaphore's waiters (``_semaphore``).
    """

    __slots__ = ("handoff", "issuer", "name", "release", "sleep", "wakes")

    def __init__(
        self,
        issuer: Issuer,
        name: str,
        sleep: Callable[[float], bool],
        release: Callable[[str, int, str], bool] | None = None,
    ) -> None:
        self.issuer = issuer
        self.name = name
        self.sleep = sleep
        self.release = issuer.release if release is None else release
        hands_off, wakes = capabilities(type(issuer))
        self.handoff = cast(HandOff, issuer) if hands_off else None
        self.wakes = cast(WakesOnRelease, issuer) if wakes else None

    def with_sleep(self, sleep: Callable[[float], bool]) -> Calls:
        """The same port with another ``sleep`` (a renewer's interruptible wait)."""
        return Calls(self.issuer, self.name, sleep, self.release)

    def attempt(self, holder: str, ttl_ms: int, queue_ms: int) -> int | Busy:
        """One acquire attempt, made directly (rule 1); it also queues ``holder`` for
        ``queue_ms`` when that is not 0 (then the issuer must hand leases over)."""
        if not queue_ms:
            return self.issuer.try_acquire(self.name, holder, ttl_ms)
        if self.handoff is None:
            raise _missing("hand-off")
        return self.handoff.try_acquire_queued(self.name, holder, ttl_ms, queue_ms, False)


class AsyncCalls:
    """The asyncio port of one fence's flows (see ``Calls``)."""

    __slots__ = ("handoff", "issuer", "name", "release", "sleep", "wakes")

    def __init__(
        self,
        issuer: AsyncIssuer,
        name: str,
        sleep: Callable[[float], Awaitable[bool]],
        release: Callable[[str, int, str], Awaitable[bool]] | None = None,
    ) -> None:
        self.issuer = issuer
        self.name = name
        self.sleep = sleep
        self.release = issuer.release if release is None else release
        hands_off, wakes = capabilities(type(issuer))
        self.handoff = cast(AsyncHandOff, issuer) if hands_off else None
        self.wakes = cast(AsyncWakesOnRelease, issuer) if wakes else None

    def with_sleep(self, sleep: Callable[[float], Awaitable[bool]]) -> AsyncCalls:
        """The same port with another ``sleep`` (a renewal task's interruptible wait)."""
        return AsyncCalls(self.issuer, self.name, sleep, self.release)

    async def attempt(self, holder: str, ttl_ms: int, queue_ms: int) -> int | Busy:
        """The asyncio twin of ``Calls.attempt``."""
        if not queue_ms:
            return await self.issuer.try_acquire(self.name, holder, ttl_ms)
        if self.handoff is None:
            raise _missing("hand-off")
        return await self.handoff.try_acquire_queued(self.name, holder, ttl_ms, queue_ms, False)


@functools.lru_cache(maxsize=256)
def capabilities(kind: type) -> tuple[bool, bool]:
    """``(hands off, wakes on release)`` of an issuer class, found once per class.

    A protocol ``isinstance`` check costs microseconds; fences and ``FencedLock`` objects
    are made often, so the answer is kept per class (capabilities are methods of the
    class, not of one object).
    """
    return issubclass(kind, (HandOff, AsyncHandOff)), issubclass(
        kind, (WakesOnRelease, AsyncWakesOnRelease)
    )


def _missing(capability: str) -> TypeError:
    return TypeError(f"the issuer has no {capability} capability (a flow asked for it)")


# -- steps ---------------------------------------------------------------------------------


class TryAcquire:
    """``issuer.try_acquire``: the lease's token, or ``Busy``."""

    __slots__ = ("holder", "result", "ttl_ms")
    result: int | Busy

    def __init__(self, holder: str, ttl_ms: int) -> None:
        self.holder = holder
        self.ttl_ms = ttl_ms

    def perform(self, calls: Calls) -> None:
        self.result = calls.issuer.try_acquire(calls.name, self.holder, self.ttl_ms)

    async def aperform(self, calls: AsyncCalls) -> None:
        self.result = await calls.issuer.try_acquire(calls.name, self.holder, self.ttl_ms)


class TryAcquireQueued:
    """``HandOff.try_acquire_queued``: an attempt that also queues (or unqueues) its waiter."""

    __slots__ = ("holder", "queue_ms", "queued", "result", "ttl_ms")
    result: int | Busy

    def __init__(self, holder: str, ttl_ms: int, queue_ms: int, queued: bool) -> None:
        self.holder = holder
        self.ttl_ms = ttl_ms
        self.queue_ms = queue_ms
        self.queued = queued

    def perform(self, calls: Calls) -> None:
        if calls.handoff is None:
            raise _missing("hand-off")
        self.result = calls.handoff.try_acquire_queued(
            calls.name, self.holder, self.ttl_ms, self.queue_ms, self.queued
        )

    async def aperform(self, calls: AsyncCalls) -> None:
        if calls.handoff is None:
            raise _missing("hand-off")
        self.result = await calls.handoff.try_acquire_queued(
            calls.name, self.holder, self.ttl_ms, self.queue_ms, self.queued
        )


class AwaitHandOff:
    """``HandOff.await_handoff``: the token a release handed over, or ``None``."""

    __slots__ = ("holder", "result", "seconds")
    result: int | None

    def __init__(self, holder: str, seconds: float) -> None:
        self.holder = holder
        self.seconds = seconds

    def perform(self, calls: Calls) -> None:
        if calls.handoff is None:
            raise _missing("hand-off")
        self.result = calls.handoff.await_handoff(calls.name, self.holder, self.seconds)

    async def aperform(self, calls: AsyncCalls) -> None:
        if calls.handoff is None:
            raise _missing("hand-off")
        self.result = await calls.handoff.await_handoff(calls.name, self.holder, self.seconds)


class AwaitRelease:
    """``WakesOnRelease.await_release``: block until a release may have happened."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def perform(self, calls: Calls) -> None:
        if calls.wakes is None:
            raise _missing("wake-on-release")
        calls.wakes.await_release(calls.name, self.seconds)

    async def aperform(self, calls: AsyncCalls) -> None:
        if calls.wakes is None:
            raise _missing("wake-on-release")
        await calls.wakes.await_release(calls.name, self.seconds)


class Renew:
    """``issuer.renew``: True if ``token``/``holder`` still held the lease."""

    __slots__ = ("holder", "result", "token", "ttl_ms")
    result: bool

    def __init__(self, token: int, holder: str, ttl_ms: int) -> None:
        self.token = token
        self.holder = holder
        self.ttl_ms = ttl_ms

    def perform(self, calls: Calls) -> None:
        with renewing(calls, self):
            self.result = calls.issuer.renew(calls.name, self.token, self.holder, self.ttl_ms)

    async def aperform(self, calls: AsyncCalls) -> None:
        with renewing(calls, self):
            self.result = await calls.issuer.renew(calls.name, self.token, self.holder, self.ttl_ms)


class Release:
    """``calls.release`` (``issuer.release``): True if ``token``/``holder`` still held the
    lease."""

    __slots__ = ("holder", "result", "token")
    result: bool

    def __init__(self, token: int, holder: str) -> None:
        self.token = token
        self.holder = holder

    def perform(self, calls: Calls) -> None:
        if GRANTED and self.holder in GRANTED:  # granted under telemetry: observe its end
            with releasing(calls, self):
                self.result = calls.release(calls.name, self.token, self.holder)
            return
        self.result = calls.release(calls.name, self.token, self.holder)

    async def aperform(self, calls: AsyncCalls) -> None:
        if GRANTED and self.holder in GRANTED:
            with releasing(calls, self):
                self.result = await calls.release(calls.name, self.token, self.holder)
            return
        self.result = await calls.release(calls.name, self.token, self.holder)


class Sleep:
    """Pause the flow; ``result`` is True if the flow was asked to stop meanwhile."""

    __slots__ = ("result", "seconds")
    result: bool

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def perform(self, calls: Calls) -> None:
        self.result = calls.sleep(self.seconds)

    async def aperform(self, calls: AsyncCalls) -> None:
        self.result = await calls.sleep(self.seconds)


#: The steps of a fence's flows (``Flow[Op, T]``).
Op = TryAcquire | TryAcquireQueued | AwaitHandOff | AwaitRelease | Renew | Release | Sleep


# -- waiting -------------------------------------------------------------------------------


class WaitSchedule:
    """How long a blocked ``acquire`` waits before its next attempt.

    With an issuer that wakes waiters (hand-off or wake-on-release), a waiter blocks
    until the release, the lease's expiry, or ``max_block`` (default ``MAX_BLOCK``, so a
    lost wake-up only delays). Without one, it backs off exponentially with full jitter
    so that waiters do not stampede, or, given an ``interval``, waits exactly that long
    each time, as redis-py's ``Lock`` polls. The deadline always wins: once it has
    passed (with an ``interval``: once the next attempt would come after it, redis-py's
    rule), ``next_wait`` raises ``AcquireTimeout``.
    """

    MAX_BLOCK = 1.0
    FIRST_BACKOFF = 0.002
    MAX_BACKOFF = 0.2

    def __init__(
        self,
        name: str,
        timeout: float | None,
        wakes: bool,
        clock: Callable[[], float],
        rng: Callable[[], float] = random.random,
        max_block: float = MAX_BLOCK,
        interval: float | None = None,
        kind: str = "fence",
    ) -> None:
        self._name = name
        self._kind = kind  # what ``AcquireTimeout`` says did not come
        self._timeout = timeout
        self._wakes = wakes
        self._clock = clock
        self._rng = rng
        self._max_block = max_block
        self._interval = interval
        self._deadline = None if timeout is None else clock() + timeout
        self._backoff = self.FIRST_BACKOFF

    def remaining(self) -> float | None:
        """Seconds left before the deadline (negative once passed); ``None``: no deadline."""
        return None if self._deadline is None else self._deadline - self._clock()

    def next_wait(self, busy: Busy) -> float:
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            raise AcquireTimeout(self._name, self._timeout, self._kind)
        if self._wakes:
            wait = self._max_block
        elif self._interval is not None:
            if self._deadline is not None and self._clock() + self._interval > self._deadline:
                raise AcquireTimeout(self._name, self._timeout, self._kind)
            return self._interval
        else:
            wait = self._backoff * (0.5 + self._rng() / 2)
            self._backoff = min(self._backoff * 2, self.MAX_BACKOFF)
        if busy.expires_in is not None:
            wait = min(wait, busy.expires_in + 0.001)
        if remaining is not None:
            wait = min(wait, remaining)
        return max(wait, 0.0)


#: How much longer than its next wait a queued waiter's place lasts: covers the round
#: trip between the attempt that queues it and the start of its wait.
QUEUE_GRACE = 0.5


def queue_millis(remaining: float | None, max_block: float) -> int:
    """How long an attempt queues its waiter (0: not at all, the deadline has passed).

    The place must outlive the wait that follows; a waiter that dies meanwhile can be
    handed a lease it never uses (it expires), so it must not outlive it by much.
    """
    if remaining is not None and remaining <= 0:
        return 0
    wait = max_block if remaining is None else min(max_block, remaining)
    return round((wait + QUEUE_GRACE) * 1000)


class Waiting:
    """How one fence waits: its issuer's capabilities, its clock, its longest block and,
    when it polls, its fixed ``interval`` if it has one (see ``WaitSchedule``).

    ``unbounded_ms`` is ``first_queue_millis`` of an acquire without a timeout, for a
    lease that expires: the default acquire's, found once, not at every call.
    """

    __slots__ = ("clock", "hands_off", "interval", "max_block", "unbounded_ms", "wakes")

    def __init__(
        self,
        hands_off: bool,
        wakes: bool,
        clock: Callable[[], float],
        max_block: float = WaitSchedule.MAX_BLOCK,
        interval: float | None = None,
    ) -> None:
        self.hands_off = hands_off
        self.wakes = wakes
        self.clock = clock
        self.max_block = max_block
        self.interval = interval
        self.unbounded_ms = queue_millis(None, max_block) if hands_off else 0


def first_queue_millis(ttl_ms: int, timeout: float | None, waiting: Waiting) -> int:
    """How long an acquire's first attempt queues its waiter (0: it does not queue).

    Where the issuer hands leases over, the first attempt queues the waiter unless it
    must not wait. A lease that never expires (``ttl_ms`` 0) is never handed over: a
    waiter that died while queued would get it for ever, so such waiters poll instead.
    """
    if not waiting.hands_off or ttl_ms <= 0 or timeout == 0:
        return 0
    if timeout is None:
        return waiting.unbounded_ms
    return queue_millis(timeout, waiting.max_block)


def wait_flow(
    name: str,
    holder: str,
    ttl_ms: int,
    queued: bool,
    busy: Busy,
    timeout: float | None,
    waiting: Waiting,
) -> Flow[Op, int]:
    """The rest of an acquire whose first attempt (which ``queued`` its waiter, or not)
    found the lease ``busy``.

    ``timeout``: ``0`` gives up at once, ``None`` waits for ever, else ``AcquireTimeout``
    at the deadline. Where the issuer hands leases over, every attempt that finds the
    lease busy also queues the waiter, so the release can hand the lease straight to it
    (rules 2 and 3 of the module docstring).
    """
    if acquire_log.isEnabledFor(DEBUG):  # the wait path only: the fast path logs nothing
        acquire_log.debug("fence %r: busy, holder %s waits", name, holder)
    hands_off = waiting.hands_off and ttl_ms > 0
    schedule = WaitSchedule(
        name,
        timeout,
        hands_off or waiting.wakes,
        waiting.clock,
        max_block=waiting.max_block,
        interval=waiting.interval,
    )
    reply: int | Busy = busy
    try:
        while isinstance(reply, Busy):
            try:
                wait = schedule.next_wait(reply)
            except AcquireTimeout:
                if not queued:
                    raise
                queued = False  # the last attempt leaves the queue, and may still win
                last = TryAcquireQueued(holder, ttl_ms, 0, True)
                yield last
                if isinstance(last.result, Busy):
                    raise
                return last.result
            if hands_off:
                handed = AwaitHandOff(holder, wait)
                yield handed
                if handed.result is not None:
                    return handed.result
            elif waiting.wakes:
                yield AwaitRelease(wait)
            else:
                yield Sleep(wait)
            attempt: TryAcquire | TryAcquireQueued
            if hands_off:
                queue_ms = queue_millis(schedule.remaining(), waiting.max_block) if queued else 0
                attempt = TryAcquireQueued(holder, ttl_ms, queue_ms, queued)
                queued = queue_ms > 0
            else:
                attempt = TryAcquire(holder, ttl_ms)
            yield attempt
            reply = attempt.result
    except GeneratorExit:  # closed, not driven: no more steps can run
        raise
    except BaseException:
        if queued:
            yield from leave_queue(holder, ttl_ms)
        raise
    return reply


def acquire_sync(
    holder: str,
    ttl_ms: int,
    timeout: float | None,
    waiting: Waiting,
    calls: Calls,
    watched: bool = False,
) -> int:
    """The blocking acquire of ``calls.name`` by ``holder``: the first attempt made
    directly, the wait flow only if it found the lease busy.

    Once the application has set an OpenTelemetry SDK (``_metrics``), the acquire runs
    again inside its watch (``watched``); until then the check is all it costs.
    """
    if not watched and (telemetry := live()) is not None:
        with AcquireWatch(telemetry, calls, holder) as watch:
            return watch.granted(acquire_sync(holder, ttl_ms, timeout, waiting, calls, True))
    if timeout is None and ttl_ms > 0:  # first_queue_millis, inline: the default acquire's
        queue_ms = waiting.unbounded_ms
    else:
        queue_ms = first_queue_millis(ttl_ms, timeout, waiting)
    reply = calls.attempt(holder, ttl_ms, queue_ms)
    if isinstance(reply, Busy):
        flow = wait_flow(calls.name, holder, ttl_ms, queue_ms > 0, reply, timeout, waiting)
        return run_sync(flow, calls)
    return reply


def release_sync(calls: Calls, token: int, holder: str) -> bool:
    """The blocking release of ``token``/``holder``: True if it still held the lease."""
    if GRANTED and holder in GRANTED:  # granted under telemetry: the step observes it
        release = Release(token, holder)
        release.perform(calls)
        return release.result
    return calls.release(calls.name, token, holder)


async def release_async(calls: AsyncCalls, token: int, holder: str) -> bool:
    """The asyncio twin of ``release_sync``."""
    if GRANTED and holder in GRANTED:
        release = Release(token, holder)
        await release.aperform(calls)
        return release.result
    return await calls.release(calls.name, token, holder)


async def acquire_async(
    holder: str,
    ttl_ms: int,
    timeout: float | None,
    waiting: Waiting,
    calls: AsyncCalls,
    watched: bool = False,
) -> int:
    """The asyncio twin of ``acquire_sync``."""
    if not watched and (telemetry := live()) is not None:
        with AcquireWatch(telemetry, calls, holder) as watch:
            granted = await acquire_async(holder, ttl_ms, timeout, waiting, calls, True)
            return watch.granted(granted)
    if timeout is None and ttl_ms > 0:  # first_queue_millis, inline: the default acquire's
        queue_ms = waiting.unbounded_ms
    else:
        queue_ms = first_queue_millis(ttl_ms, timeout, waiting)
    reply = await calls.attempt(holder, ttl_ms, queue_ms)
    if isinstance(reply, Busy):
        flow = wait_flow(calls.name, holder, ttl_ms, queue_ms > 0, reply, timeout, waiting)
        return await run_async(flow, calls)
    return reply


def leave_queue(holder: str, ttl_ms: int) -> Flow[Op, None]:
    """Best effort: take ``holder`` out of the queue; release a lease handed to it.

    Also what ``FencedLock`` runs when an acquire is interrupted mid-attempt (a lost
    reply may have left it queued or holding)."""
    try:
        leave = TryAcquireQueued(holder, ttl_ms, 0, True)
        yield leave
        if isinstance(leave.result, int):
            yield Release(leave.result, holder)
    except FencingError:
        pass
