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
from typing import Any, Protocol, TypeVar

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

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        """Take the free or expired lease and return the new token, else ``Busy``."""

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        """Extend the lease to ``ttl_ms`` if ``token``/``holder`` still hold it."""

    def release(self, name: str, token: int, holder: str) -> bool:
        """End the lease if ``token``/``holder`` still hold it; wake a waiter."""

    def await_release(self, name: str, seconds: float) -> None:
        """Block up to ``seconds``, returning early when the lease may be free."""


class AsyncIssuer(Protocol):
    """The asyncio twin of ``Issuer``: the same calls as coroutines."""

    wakes_on_release: bool

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy: ...

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool: ...

    async def release(self, name: str, token: int, holder: str) -> bool: ...

    async def await_release(self, name: str, seconds: float) -> None: ...


@dataclass(frozen=True)
class TryAcquire:
    holder: str
    ttl_ms: int

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.try_acquire(name, self.holder, self.ttl_ms)


@dataclass(frozen=True)
class Renew:
    token: int
    holder: str
    ttl_ms: int

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.renew(name, self.token, self.holder, self.ttl_ms)


@dataclass(frozen=True)
class Release:
    token: int
    holder: str

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.release(name, self.token, self.holder)


@dataclass(frozen=True)
class AwaitRelease:
    seconds: float

    def call(self, issuer: Any, name: str) -> Any:
        return issuer.await_release(name, self.seconds)


@dataclass(frozen=True)
class Sleep:
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

    def throw(self, error: FencingError) -> None:
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
    """Drive ``flow`` with blocking calls. ``sleep(s)`` returns True to stop the flow."""
    stepper = _Stepper(flow)
    while (op := stepper.op) is not None:
        try:
            reply = sleep(op.seconds) if isinstance(op, Sleep) else op.call(issuer, name)
        except FencingError as exc:
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
    """Drive ``flow`` with awaited calls; the asyncio twin of ``run_sync``."""
    stepper = _Stepper(flow)
    while (op := stepper.op) is not None:
        try:
            reply = await (sleep(op.seconds) if isinstance(op, Sleep) else op.call(issuer, name))
        except FencingError as exc:
            stepper.throw(exc)
            continue
        stepper.send(reply)
    return stepper.result  # type: ignore[no-any-return]


class WaitSchedule:
    """How long a blocked ``acquire`` waits before its next attempt.

    With an issuer that wakes waiters on release, a waiter blocks until the release
    signal, the lease's expiry, or ``MAX_BLOCK`` (so a lost wake-up only delays). Without
    one, it backs off exponentially with full jitter so that waiters do not stampede.
    The deadline always wins: once it has passed, ``next_wait`` raises ``AcquireTimeout``.
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
    ) -> None:
        self._name = name
        self._timeout = timeout
        self._wakes = wakes_on_release
        self._clock = clock
        self._rng = rng
        self._deadline = None if timeout is None else clock() + timeout
        self._backoff = self.FIRST_BACKOFF

    def next_wait(self, busy: Busy) -> float:
        remaining = None if self._deadline is None else self._deadline - self._clock()
        if remaining is not None and remaining <= 0:
            raise AcquireTimeout(self._name, self._timeout)
        if self._wakes:
            wait = self.MAX_BLOCK
        else:
            wait = self._backoff * (0.5 + self._rng() / 2)
            self._backoff = min(self._backoff * 2, self.MAX_BACKOFF)
        if busy.expires_in is not None:
            wait = min(wait, busy.expires_in + 0.001)
        if remaining is not None:
            wait = min(wait, remaining)
        return max(wait, 0.0)
