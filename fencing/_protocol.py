"""The fence protocol without I/O: what to ask the issuer, how long to wait, what a reply means.

A fence operation is a *flow*: a generator that yields operations (``TryAcquire``,
``Renew``, ``Release``, ``AwaitRelease``, ``Sleep``) and receives their replies. A tiny
sync driver (``run_sync``) and a tiny async driver (``run_async``) carry the operations
out, so the logic exists once for threads and for asyncio (the model is httpx's auth
flows). Errors raised while carrying out an operation are thrown back into the flow.

Imports only the errors, token and validation modules.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from ._errors import AcquireTimeout, FencingError

T = TypeVar("T")


@dataclass(frozen=True)
class Busy:
    """Reply to ``TryAcquire`` when another holder has the lease.

    ``expires_in`` is the lease's remaining lifetime in seconds by the issuer's clock,
    or ``None`` when the issuer cannot tell.
    """

    expires_in: float | None


class Issuer(Protocol):
    """A blocking issuer backend: grants leases and issues tokens, one fence name at a time.

    Implementations carry out each call atomically on the server and translate their
    driver's errors into ``FenceUnavailable``.
    """

    #: True when ``await_release`` returns early on a release (hand-off without polling).
    wakes_on_release: bool

    def try_acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> int | Busy:
        """Take the free or expired lease and return the new token, else ``Busy``.

        An issuer that hands the lease over directly (Redis) also queues ``holder`` for
        ``queue_ms`` when the lease is busy, and with ``queue_ms=0`` takes it out of the
        queue. ``queued`` says that an earlier attempt queued it: a release may then
        already have granted it the lease, whose token is returned. Others ignore both.
        """

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        """Extend the lease to ``ttl_ms`` if ``token``/``holder`` still hold it."""

    def release(self, name: str, token: int, holder: str) -> bool:
        """End the lease if ``token``/``holder`` still hold it; wake or serve a waiter."""

    def await_release(self, name: str, holder: str, seconds: float) -> int | None:
        """Block up to ``seconds``, returning early when the lease may be free.

        Returns the token when a release handed the lease straight to ``holder``.
        """


class AsyncIssuer(Protocol):
    """The asyncio twin of ``Issuer``: the same calls as coroutines."""

    wakes_on_release: bool

    async def try_acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> int | Busy: ...

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool: ...

    async def release(self, name: str, token: int, holder: str) -> bool: ...

    async def await_release(self, name: str, holder: str, seconds: float) -> int | None: ...


# Operations are NamedTuples: a flow makes one per step, and tuples are the cheapest to make.


class TryAcquire(NamedTuple):
    holder: str | bytes
    ttl_ms: int
    queue_ms: int = 0
    queued: bool = False

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.try_acquire(name, self.holder, self.ttl_ms, self.queue_ms, self.queued)


class Renew(NamedTuple):
    token: int
    holder: str
    ttl_ms: int

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.renew(name, self.token, self.holder, self.ttl_ms)


class Release(NamedTuple):
    token: int
    holder: str | bytes

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.release(name, self.token, self.holder)


class AwaitRelease(NamedTuple):
    holder: str | bytes
    seconds: float

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.await_release(name, self.holder, self.seconds)


class Sleep(NamedTuple):
    """Pause the flow; the driver replies ``True`` if it was asked to stop meanwhile."""

    seconds: float


IssuerOp = TryAcquire | Renew | Release | AwaitRelease
Op = IssuerOp | Sleep
Flow = Generator[Op, Any, T]


class _Stepper:
    """Advances a flow: hands out its next operation and feeds back a reply or an error."""

    __slots__ = ("_flow", "op", "result")

    def __init__(self, flow: Flow[Any]) -> None:
        self._flow = flow
        self.result: Any = None
        self.op: Op | None = None
        self.send(None)

    def send(self, reply: Any) -> None:
        try:
            self.op = self._flow.send(reply)
        except StopIteration as stop:
            self.op, self.result = None, stop.value

    def throw(self, error: BaseException) -> None:
        try:
            self.op = self._flow.throw(error)
        except StopIteration as stop:
            self.op, self.result = None, stop.value


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


async def _async_sleep(seconds: float) -> bool:
    await asyncio.sleep(seconds)
    return False


def run_sync(
    flow: Flow[T], issuer: Issuer, name: str, sleep: Callable[[float], bool] = _sleep
) -> T:
    """Drive ``flow`` with blocking calls. ``sleep(s)`` returns True to stop the flow.

    Any error of an operation, an interrupt included, is thrown into the flow, which may
    yield clean-up operations (leaving a wait queue) before it lets the error out.
    """
    stepper = _Stepper(flow)
    while (op := stepper.op) is not None:
        try:
            reply = sleep(op.seconds) if isinstance(op, Sleep) else op.call(issuer, name)
        except BaseException as exc:
            stepper.throw(exc)
            continue
        stepper.send(reply)
    return stepper.result  # type: ignore[no-any-return]


async def run_async(
    flow: Flow[T],
    issuer: AsyncIssuer,
    name: str,
    sleep: Callable[[float], Awaitable[bool]] = _async_sleep,
) -> T:
    """Drive ``flow`` with awaited calls; the asyncio twin of ``run_sync``.

    A cancellation is thrown into the flow like any error, so its clean-up operations
    still run (once: a second cancellation ends them).
    """
    stepper = _Stepper(flow)
    while (op := stepper.op) is not None:
        try:
            reply = await (sleep(op.seconds) if isinstance(op, Sleep) else op.call(issuer, name))
        except BaseException as exc:
            stepper.throw(exc)
            continue
        stepper.send(reply)
    return stepper.result  # type: ignore[no-any-return]


class WaitSchedule:
    """How long a blocked ``acquire`` waits before its next attempt.

    With an issuer that wakes waiters on release, a waiter blocks until the release
    signal, the lease's expiry, or ``max_block`` (default ``MAX_BLOCK``, so a lost
    wake-up only delays). Without one, it backs off exponentially with full jitter so
    that waiters do not stampede. The deadline always wins: once it has passed,
    ``next_wait`` raises ``AcquireTimeout``.
    """

    MAX_BLOCK = 1.0
    FIRST_BACKOFF = 0.002
    MAX_BACKOFF = 0.2

    def __init__(
        self,
        name: str,
        timeout: float | None,
        wakes_on_release: bool,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
        max_block: float = MAX_BLOCK,
    ) -> None:
        self._name = name
        self._timeout = timeout
        self._wakes = wakes_on_release
        self._clock = clock
        self._rng = rng
        self._max_block = max_block
        self._deadline = None if timeout is None else clock() + timeout
        self._backoff = self.FIRST_BACKOFF

    def remaining(self) -> float | None:
        """Seconds left before the deadline (negative once passed); ``None``: no deadline."""
        return None if self._deadline is None else self._deadline - self._clock()

    def next_wait(self, busy: Busy) -> float:
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            raise AcquireTimeout(self._name, self._timeout)
        if self._wakes:
            wait = self._max_block
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


def first_attempt(
    holder: str | bytes,
    ttl_ms: int,
    timeout: float | None,
    wakes_on_release: bool,
    max_block: float = WaitSchedule.MAX_BLOCK,
) -> TryAcquire:
    """The first attempt of an acquire: it queues the waiter unless it must not wait.

    Acquiring is this attempt, run directly by the fence (the uncontended fast path,
    no flow), then ``wait_flow`` only if it found the lease busy. A lease that never
    expires (``ttl_ms`` 0) is never handed over: a waiter that died while queued would
    get it for ever, so such waiters wait for their next attempt instead.
    """
    queues = wakes_on_release and timeout != 0 and ttl_ms > 0
    queue_ms = queue_millis(timeout, max_block) if queues else 0
    return TryAcquire(holder, ttl_ms, queue_ms)


def wait_flow(
    name: str,
    first: TryAcquire,
    busy: Busy,
    timeout: float | None,
    wakes_on_release: bool,
    max_block: float = WaitSchedule.MAX_BLOCK,
) -> Flow[int]:
    """Wait and attempt again until the lease is granted; return its token.

    ``first`` found the lease ``busy``. ``timeout``: ``0`` gives up at once, ``None``
    waits for ever, else ``AcquireTimeout`` at the deadline. Where the issuer wakes
    waiters, every attempt that finds the lease busy also queues the waiter, so the
    release can hand the lease straight to it (``AwaitRelease`` then replies with the
    token). A waiter that stops waiting (the deadline, an error, a cancellation) leaves
    the queue first, and releases a lease handed to it in the meantime, so no lease
    goes to a waiter that has gone.
    """
    holder, ttl_ms = first.holder, first.ttl_ms
    schedule = WaitSchedule(name, timeout, wakes_on_release, max_block=max_block)
    queued = first.queue_ms > 0
    reply: int | Busy = busy
    try:
        while isinstance(reply, Busy):
            try:
                wait = schedule.next_wait(reply)
            except AcquireTimeout:
                if not queued:
                    raise
                queued = False  # the last attempt leaves the queue, and may still win
                reply = yield TryAcquire(holder, ttl_ms, 0, True)
                if isinstance(reply, Busy):
                    raise
                break
            granted = yield AwaitRelease(holder, wait)
            if granted is not None:
                return granted  # type: ignore[no-any-return]
            queue_ms = queue_millis(schedule.remaining(), max_block) if queued else 0
            reply = yield TryAcquire(holder, ttl_ms, queue_ms, queued)
            queued = queue_ms > 0
    except GeneratorExit:  # closed, not driven: no more operations can run
        raise
    except BaseException:
        if queued:
            yield from _leave_queue(holder, ttl_ms)
        raise
    return reply


def _leave_queue(holder: str | bytes, ttl_ms: int) -> Flow[None]:
    """Best effort: take ``holder`` out of the queue; release a lease handed to it."""
    try:
        reply = yield TryAcquire(holder, ttl_ms, 0, True)
        if isinstance(reply, int):
            yield Release(reply, holder)
    except FencingError:
        pass
