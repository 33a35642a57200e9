"""The fence protocol without I/O and without a clock of its own: what to ask the issuer,
how long to wait, what a reply means.

Fence operations are flows (see ``_flow``) whose steps are ``Call`` s: each names a
method of the fence's port (``try_acquire``, ``try_acquire_queued``, ``await_handoff``,
``await_release``, ``renew``, ``release``, ``sleep``) and keeps its typed reply in
``result``. One port class, ``Port``, serves both drivers: its methods return the
issuer's reply, which an asyncio issuer's are awaitables that ``Call.aperform`` awaits;
``Calls`` and ``AsyncCalls`` only say which issuer it wraps. Time comes in from the
caller: every flow that waits takes a ``clock`` (seconds, monotonic), and sleeping is a
step, so tests drive the flows on virtual time.

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
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from logging import DEBUG
from typing import Any, Generic, TypeVar

from .._base.errors import AcquireTimeout, FencingError
from .._base.flow import Flow, run_async, run_sync
from .._base.log import acquire_log
from .._base.metrics import GRANTED, AcquireWatch, live, releasing, renewing
from .._base.waits import JITTER
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


class Port:
    """What one fence's flows are carried out on: its issuer, the issuer's capabilities,
    its ``sleep`` and the call that ends a lease; blocking or asyncio alike.

    Its methods are the calls a ``Call`` step names, the fence's name filled in. Each
    returns what the issuer returns: the reply of a blocking issuer, the awaitable of an
    asyncio one (``Call.aperform`` and ``acquire_async`` await it), so one class serves
    both drivers and nothing here is written twice.

    ``sleep(seconds)`` returns (or, asyncio, resolves to) True when the flow is asked to
    stop (a renewer's stop event), else False after the time has passed.
    ``releaser(name, token, holder)`` is the call that ends a lease: ``issuer.release``,
    or, for a semaphore's slot, the issuer's ``release_slot`` that also wakes the
    semaphore's waiters (``_semaphore``).
    """

    __slots__ = ("handoff", "issuer", "name", "releaser", "sleep", "wakes")

    def __init__(
        self,
        issuer: Any,
        name: str,
        sleep: Callable[[float], Any],
        releaser: Callable[[str, int, str], Any] | None = None,
    ) -> None:
        self.issuer = issuer
        self.name = name
        self.sleep = sleep
        self.releaser = issuer.release if releaser is None else releaser
        kind: type = type(issuer)
        hands_off, wakes = capabilities(kind)
        self.handoff: Any = issuer if hands_off else None
        self.wakes: Any = issuer if wakes else None

    def with_sleep(self, sleep: Callable[[float], Any]) -> Any:
        """The same port with another ``sleep`` (a renewer's interruptible wait)."""
        return type(self)(self.issuer, self.name, sleep, self.releaser)

    def attempt(self, holder: str, ttl_ms: int, queue_ms: int) -> Any:
        """One acquire attempt, made directly (rule 1); it also queues ``holder`` for
        ``queue_ms`` when that is not 0 (then the issuer must hand leases over)."""
        if not queue_ms:
            return self.issuer.try_acquire(self.name, holder, ttl_ms)
        return self.try_acquire_queued(holder, ttl_ms, queue_ms, False)

    def try_acquire(self, holder: str, ttl_ms: int) -> Any:
        return self.issuer.try_acquire(self.name, holder, ttl_ms)

    def try_acquire_queued(self, holder: str, ttl_ms: int, queue_ms: int, queued: bool) -> Any:
        if self.handoff is None:
            raise _missing("hand-off")
        return self.handoff.try_acquire_queued(self.name, holder, ttl_ms, queue_ms, queued)

    def await_handoff(self, holder: str, seconds: float) -> Any:
        if self.handoff is None:
            raise _missing("hand-off")
        return self.handoff.await_handoff(self.name, holder, seconds)

    def await_release(self, seconds: float) -> Any:
        if self.wakes is None:
            raise _missing("wake-on-release")
        return self.wakes.await_release(self.name, seconds)

    def renew(self, token: int, holder: str, ttl_ms: int) -> Any:
        return self.issuer.renew(self.name, token, holder, ttl_ms)

    def release(self, token: int, holder: str) -> Any:
        return self.releaser(self.name, token, holder)


class Calls(Port):
    """The blocking port: a ``Port`` on an ``Issuer``, whose ``sleep`` blocks."""

    __slots__ = ()

    def __init__(
        self,
        issuer: Issuer,
        name: str,
        sleep: Callable[[float], bool],
        releaser: Callable[[str, int, str], bool] | None = None,
    ) -> None:
        super().__init__(issuer, name, sleep, releaser)


class AsyncCalls(Port):
    """The asyncio port: a ``Port`` on an ``AsyncIssuer``, whose ``sleep`` is awaited."""

    __slots__ = ()

    def __init__(
        self,
        issuer: AsyncIssuer,
        name: str,
        sleep: Callable[[float], Awaitable[bool]],
        releaser: Callable[[str, int, str], Awaitable[bool]] | None = None,
    ) -> None:
        super().__init__(issuer, name, sleep, releaser)


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

#: The context of a step that no telemetry observes (reusable: it holds nothing).
_UNOBSERVED: AbstractContextManager[None] = nullcontext()


class Call(Generic[T]):
    """The one step of the core's flows: call the port's method ``method`` with ``args``
    and keep its reply, typed, in ``result``.

    ``perform`` calls it, ``aperform`` awaits what it returns; those two lines are all
    that differs between blocking and asyncio for every step of a fence, a semaphore, an
    election or a limiter. A subclass names its method and the type of its reply
    (``Renew`` is a ``Call[bool]`` of ``renew``), and may observe the call
    (``observed``: its telemetry, around the I/O).
    """

    __slots__ = ("args", "method", "result")
    result: T

    def __init__(self, method: str, *args: object) -> None:
        self.method = method
        self.args = args

    def observed(self, port: Any) -> AbstractContextManager[object]:
        """What the call runs inside: nothing, unless telemetry observes this kind."""
        return _UNOBSERVED

    def perform(self, port: object) -> None:
        with self.observed(port):
            self.result = getattr(port, self.method)(*self.args)

    async def aperform(self, port: object) -> None:
        with self.observed(port):
            self.result = await getattr(port, self.method)(*self.args)


class TryAcquire(Call[int | Busy]):
    """``issuer.try_acquire``: the lease's token, or ``Busy``."""

    __slots__ = ()

    def __init__(self, holder: str, ttl_ms: int) -> None:
        super().__init__("try_acquire", holder, ttl_ms)


class TryAcquireQueued(Call[int | Busy]):
    """``HandOff.try_acquire_queued``: an attempt that also queues (or unqueues) its waiter."""

    __slots__ = ()

    def __init__(self, holder: str, ttl_ms: int, queue_ms: int, queued: bool) -> None:
        super().__init__("try_acquire_queued", holder, ttl_ms, queue_ms, queued)


class AwaitHandOff(Call[int | None]):
    """``HandOff.await_handoff``: the token a release handed over, or ``None``."""

    __slots__ = ()

    def __init__(self, holder: str, seconds: float) -> None:
        super().__init__("await_handoff", holder, seconds)


class AwaitRelease(Call[None]):
    """``WakesOnRelease.await_release``: block until a release may have happened."""

    __slots__ = ()

    def __init__(self, seconds: float) -> None:
        super().__init__("await_release", seconds)


class Renew(Call[bool]):
    """``issuer.renew``: True if ``token``/``holder`` still held the lease; counted and
    traced once telemetry is on (``renewing``)."""

    __slots__ = ("holder", "token")

    def __init__(self, token: int, holder: str, ttl_ms: int) -> None:
        super().__init__("renew", token, holder, ttl_ms)
        self.token = token
        self.holder = holder

    def observed(self, port: Any) -> AbstractContextManager[object]:
        return renewing(port, self)


class Release(Call[bool]):
    """``Port.release`` (``issuer.release``): True if ``token``/``holder`` still held the
    lease; a lease granted under telemetry has its end observed (``releasing``)."""

    __slots__ = ("holder", "token")

    def __init__(self, token: int, holder: str) -> None:
        super().__init__("release", token, holder)
        self.token = token
        self.holder = holder

    def observed(self, port: Any) -> AbstractContextManager[object]:
        if GRANTED and self.holder in GRANTED:  # granted under telemetry: observe its end
            return releasing(port, self)
        return _UNOBSERVED


class Sleep(Call[bool]):
    """Pause the flow; ``result`` is True if the flow was asked to stop meanwhile."""

    __slots__ = ()

    def __init__(self, seconds: float) -> None:
        super().__init__("sleep", seconds)


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
        rng: Callable[[], float] = JITTER.random,
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
    holder: str, ttl_ms: int, timeout: float | None, waiting: Waiting, calls: Calls
) -> int:
    """The blocking acquire of ``calls.name`` by ``holder``: the first attempt made
    directly, the rest a flow (``acquire_rest``) only if it found the lease busy or
    telemetry observes the acquire (``live``: until an OpenTelemetry SDK is set, the
    check is all it costs)."""
    if timeout is None and ttl_ms > 0:  # first_queue_millis, inline: the default acquire's
        queue_ms = waiting.unbounded_ms
    else:
        queue_ms = first_queue_millis(ttl_ms, timeout, waiting)
    reply = None if live() is not None else calls.attempt(holder, ttl_ms, queue_ms)
    if isinstance(reply, int):
        return reply
    return run_sync(acquire_rest(reply, holder, ttl_ms, queue_ms, timeout, waiting, calls), calls)


async def acquire_async(
    holder: str, ttl_ms: int, timeout: float | None, waiting: Waiting, calls: AsyncCalls
) -> int:
    """``acquire_sync``, its first attempt awaited."""
    if timeout is None and ttl_ms > 0:  # first_queue_millis, inline: the default acquire's
        queue_ms = waiting.unbounded_ms
    else:
        queue_ms = first_queue_millis(ttl_ms, timeout, waiting)
    reply = None if live() is not None else await calls.attempt(holder, ttl_ms, queue_ms)
    if isinstance(reply, int):
        return reply
    flow = acquire_rest(reply, holder, ttl_ms, queue_ms, timeout, waiting, calls)
    return await run_async(flow, calls)


def acquire_rest(
    reply: Busy | None,
    holder: str,
    ttl_ms: int,
    queue_ms: int,
    timeout: float | None,
    waiting: Waiting,
    calls: Port,
) -> Flow[Op, int]:
    """What an acquire does after its direct first attempt (``reply``, ``None``: not
    made): the wait flow from a ``Busy`` reply, or, under telemetry, the whole acquire,
    its first attempt a step, inside its ``AcquireWatch``."""
    if reply is not None:
        return (
            yield from wait_flow(calls.name, holder, ttl_ms, queue_ms > 0, reply, timeout, waiting)
        )
    telemetry = live()
    if telemetry is None:  # switched off meanwhile: unobserved
        return (yield from acquire_flow(calls.name, holder, ttl_ms, timeout, waiting))
    with AcquireWatch(telemetry, calls, holder) as watch:
        token = yield from acquire_flow(calls.name, holder, ttl_ms, timeout, waiting)
        return watch.granted(token)


def acquire_flow(
    name: str, holder: str, ttl_ms: int, timeout: float | None, waiting: Waiting
) -> Flow[Op, int]:
    """The whole acquire of ``name`` by ``holder`` as a flow, its first attempt a step
    too: what an observed acquire and a reentrant fence's first acquire run."""
    queue_ms = first_queue_millis(ttl_ms, timeout, waiting)
    first: TryAcquire | TryAcquireQueued = (
        TryAcquireQueued(holder, ttl_ms, queue_ms, False)
        if queue_ms
        else TryAcquire(holder, ttl_ms)
    )
    yield first
    reply = first.result
    if isinstance(reply, Busy):
        return (yield from wait_flow(name, holder, ttl_ms, queue_ms > 0, reply, timeout, waiting))
    return reply


def release_sync(calls: Calls, token: int, holder: str) -> bool:
    """The blocking release of ``token``/``holder``: True if it still held the lease.
    One direct call (rule 1); the ``Release`` step, under telemetry only."""
    if GRANTED and holder in GRANTED:  # granted under telemetry: the step observes it
        return run_sync(one(Release(token, holder)), calls)
    held: bool = calls.releaser(calls.name, token, holder)
    return held


async def release_async(calls: AsyncCalls, token: int, holder: str) -> bool:
    """``release_sync``, awaited."""
    if GRANTED and holder in GRANTED:
        return await run_async(one(Release(token, holder)), calls)
    held: bool = await calls.releaser(calls.name, token, holder)
    return held


def one(step: Call[T]) -> Flow[Call[T], T]:
    """The flow of one step: its reply."""
    yield step
    return step.result


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
