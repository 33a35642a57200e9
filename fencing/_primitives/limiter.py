"""``Limiter`` and ``AsyncLimiter``: at most ``limit`` admissions per window of ``per``
seconds, counted on the server's clock (invariant 6 of docs/design.md).

An admission holds nothing (no lease, no token): it is a decision the store makes in one
atomic step on its own clock, and the reply carries what the waiter needs: admitted or
not, and if not, in how many seconds (by the store's clock) one frees. ``try_acquire``
is that one step; ``acquire`` sleeps exactly that long and asks again, so it never polls,
and gives up with ``AcquireTimeout`` as soon as the store says nothing frees before its
deadline. The flow is written once and driven blocking or asyncio (``_flow``).

Windows (docs/limits.md has the accuracy table):

- ``"fixed"``: a window starts at its first admission and lasts ``per``; it admits
  ``limit``, then nothing until it ends (the next request starts the next window).
- ``"sliding"``: at most ``limit`` admissions in any interval of length ``per``: the
  store keeps the times of the last ``limit`` admissions (a log) and admits when the
  oldest of them is ``per`` old.

A store implements ``admit`` (``Admits`` / ``AsyncAdmits``), and may prepare the decision
alone (``PreparesAdmits``) where building the ``Admission`` and the call is a measurable
part of a request: on Redis it is (docs/performance.md). Imports the flow drivers and
the protocol's ``Call`` step, the errors and the checks.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._base.errors import AcquireTimeout, FenceUnavailable
from .._base.flow import Flow, run_async, run_sync
from .._base.metrics import admission_refused, waiting
from .._base.owned import Owner
from .._base.validate import check_count, check_name, check_period, check_timeout
from .._lease.protocol import Call

#: The windows a limiter may have.
WINDOWS = ("sliding", "fixed")
#: The most admissions per window: the integers that Redis's Lua numbers (doubles) hold
#: exactly; a fixed window is one counter, so this is no cost.
MAX_LIMIT = 2**53 - 1
#: The most admissions per sliding window: its log keeps the time of each of the last
#: ``limit`` admissions of a busy name (on Redis about 10 bytes each: 1,000,000 take 10 MB,
#: this many 100 MB), so a typo of a few digits must not become gigabytes.
MAX_SLIDING_LIMIT = 10_000_000
#: How ``acquire`` waits for a store that cannot be reached (not up yet, restarting):
#: the first wait, doubling up to the last, within the caller's ``timeout``.
UNAVAILABLE_FIRST_WAIT = 0.05
UNAVAILABLE_MAX_WAIT = 1.0


@dataclass(frozen=True)
class Admission:
    """A store's decision on one request, made in one atomic step on its clock.

    - ``admitted``: whether the request was admitted;
    - ``retry_in``: when refused, seconds (by the store's clock) until one admission
      frees; 0 when admitted;
    - ``at``: the store's time of the decision in seconds (Redis: ``TIME``, since the
      epoch; memory: its monotonic clock), for tests and logs; never compared with the
      client's clock.
    """

    admitted: bool
    retry_in: float
    at: float


@dataclass(frozen=True)
class LimitUse:
    """A limiter's use now, read on the store's clock without admitting anything.

    - ``used``: the admissions that count now (sliding: those of the last ``per``;
      fixed: those of the current window, 0 once it ended);
    - ``resets_in``: seconds (by the store's clock) until ``used`` goes down: sliding,
      when the oldest counted admission turns ``per`` old; fixed, when the window ends;
      ``None`` when nothing counts;
    - ``at``: the store's time of the reading, as ``Admission.at``.
    """

    used: int
    resets_in: float | None
    at: float


@runtime_checkable
class InspectsLimits(Protocol):
    """Capability: read a limiter's use without admitting (``fencing status --limiter``)."""

    def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """The use of the limiter ``name`` (window ``window`` of ``per_ms``) now."""
        ...


@runtime_checkable
class AsyncInspectsLimits(Protocol):
    """The asyncio ``InspectsLimits``."""

    async def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """See ``InspectsLimits.limit_use``."""
        ...


class Admits(Protocol):
    """A store of rate limits: ``admit`` decides one request of the limiter ``name``."""

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """Admit one request if the window allows it, in one atomic step."""
        ...


class AsyncAdmits(Protocol):
    """The asyncio ``Admits``."""

    async def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """See ``Admits.admit``."""
        ...


@runtime_checkable
class PreparesAdmits(Protocol):
    """Capability: ``admitter``, the decisions of one limiter prepared once (its arguments,
    and what the store derives from them, bound): a call that makes one request, as
    ``admit``, and returns only whether it was admitted, all ``try_acquire`` needs. A
    store without it is asked ``admit``."""

    def admitter(self, name: str, limit: int, per_ms: int, window: str) -> Callable[[], bool]:
        """One request of the limiter ``name`` per call: whether it was admitted."""
        ...


@runtime_checkable
class AsyncPreparesAdmits(Protocol):
    """The asyncio ``PreparesAdmits``."""

    def admitter(
        self, name: str, limit: int, per_ms: int, window: str
    ) -> Callable[[], Awaitable[bool]]:
        """See ``PreparesAdmits.admitter``."""
        ...


def check_window(window: object) -> str:
    """``"sliding"`` or ``"fixed"``."""
    if not isinstance(window, str):
        raise TypeError(f"window must be a str, not {type(window).__name__}")
    if window not in WINDOWS:
        raise ValueError(f"unknown window {window!r}: use 'sliding' or 'fixed'")
    return window


S = TypeVar("S")


def check_store(store: S, *, awaits: bool) -> S:
    """``store``, if its ``admit`` is a coroutine function exactly when ``awaits``; else a
    ``TypeError``. A blocking limiter on an asyncio store would otherwise take the
    coroutine of its prepared decision for an admission: a coroutine is true."""
    admit = getattr(store, "admit", None)
    if not callable(admit) or inspect.iscoroutinefunction(admit) != awaits:
        needed = "an async admit() (AsyncAdmits)" if awaits else "a blocking admit() (Admits)"
        raise TypeError(f"{store!r} cannot admit: this limiter needs a store with {needed}")
    return store


class Stores:
    """The port of a limiter's acquire flow: its store and a way to sleep. As ``Port``,
    its methods return the store's reply (an awaitable for an asyncio store), so one
    class serves both drivers."""

    __slots__ = ("args", "sleep", "store")

    def __init__(
        self, store: Any, args: tuple[str, int, int, str], sleep: Callable[[float], object]
    ) -> None:
        self.store = store
        self.args = args
        self.sleep = sleep

    def admit(self) -> Any:
        """One ``admit`` of the limiter's request."""
        return self.store.admit(*self.args)


class BaseLimiter:
    """What both limiters share: the checks and the acquire flow; no I/O."""

    store: object  # the subclass's: ``Admits``, or ``AsyncAdmits``

    def __init__(
        self, name: str, limit: int, per: float, window: str, monotonic: Callable[[], float]
    ) -> None:
        self.name = check_name(name)
        self.limit = check_count(limit, "limit", MAX_LIMIT)
        self.per = check_period(per)
        self.window = check_window(window)
        if self.window == "sliding" and self.limit > MAX_SLIDING_LIMIT:
            raise ValueError(
                f"limit must be from 1 to {MAX_SLIDING_LIMIT:,} for a sliding window (it keeps "
                f"the time of each of its last `limit` admissions), got {limit:,}: use "
                "window='fixed' (one counter) for more"
            )
        self._args = (self.name, self.limit, max(1, round(self.per * 1000)), self.window)
        self._monotonic = monotonic

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, limit={self.limit}, per={self.per}, "
            f"window={self.window!r})"
        )

    def _noted(self, reply: Admission) -> Admission:
        """``reply``, a refusal counted (``fencing.admissions.refused``)."""
        if not reply.admitted:
            self._refused()
        return reply

    def _refused(self) -> bool:
        """Count a refused request; False (what ``try_acquire`` returns then)."""
        admission_refused(self.store, self.name, self.window)
        return False

    def _acquire_flow(self, timeout: float | None) -> Flow[Call[Any], Admission]:
        """Ask; when refused, sleep as long as the reply says and ask again; at the
        deadline (or once the reply says nothing frees before it) ``AcquireTimeout``.

        A store that cannot be reached (``FenceUnavailable``: not up yet, restarting) is
        asked again after 0.05 s, doubling to 1 s, until the deadline, where the last try's
        ``FenceUnavailable`` is raised (``timeout=0``: at once)."""
        deadline = None if timeout is None else self._monotonic() + timeout
        unavailable_wait = UNAVAILABLE_FIRST_WAIT
        while True:
            admit: Call[Admission] = Call("admit")
            try:
                yield admit
            except FenceUnavailable:
                left = None if deadline is None else deadline - self._monotonic()
                if left is not None and left <= 0:
                    raise
                yield Call(
                    "sleep", unavailable_wait if left is None else min(unavailable_wait, left)
                )
                unavailable_wait = min(2 * unavailable_wait, UNAVAILABLE_MAX_WAIT)
                continue
            reply = admit.result
            if reply.admitted:
                return reply
            wait = max(reply.retry_in, 0.001)
            if deadline is not None and self._monotonic() + wait > deadline:
                raise AcquireTimeout(self.name, timeout, "limiter")
            yield Call("sleep", wait)


class Limiter(BaseLimiter):
    """At most ``limit`` admissions per ``per`` seconds on a blocking store (see the module
    docstring); ``backend.limiter(name, limit=5, per=1.0)`` on what ``fencing.connect``
    returns, or ``MemoryIssuer().limiter(...)``."""

    def __init__(
        self,
        store: Admits,
        name: str,
        limit: int,
        per: float,
        window: str = "sliding",
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(name, limit, per, window, monotonic)
        self.store: Admits = check_store(store, awaits=False)
        self._port = Stores(store, self._args, sleep)
        self._admitted: Callable[[], bool] = (
            store.admitter(*self._args) if isinstance(store, PreparesAdmits) else self._admit
        )

    def attempt(self) -> Admission:
        """One request, decided by the store: the whole ``Admission``."""
        return self._noted(self.store.admit(*self._args))

    def try_acquire(self) -> bool:
        """Admit one request now if the window allows it; never waits."""
        return self._admitted() or self._refused()

    def _admit(self) -> bool:
        """The ``admitter`` of a store without one."""
        return self.store.admit(*self._args).admitted

    def use(self) -> LimitUse:
        """How many admissions count now and when that goes down, by the store's clock;
        admits nothing (memory, Redis and SQL stores; ``TypeError`` on a store without
        ``limit_use``)."""
        if not isinstance(self.store, InspectsLimits):
            raise TypeError(f"{type(self.store).__name__} cannot report a limiter's use")
        return self.store.limit_use(self.name, self._args[2], self.window)

    def acquire(self, timeout: float | None = None) -> Admission:
        """Wait for an admission: sleeps until the moment the store says one frees.

        ``timeout``: ``None`` waits for ever, a number at most that long; ``0`` tries once.
        ``AcquireTimeout`` once no admission came (or can come) in time. A store that
        cannot be reached is asked again (0.05 s, doubling to 1 s) until the deadline,
        then ``FenceUnavailable``: a client started before its store waits for it.
        """
        wait = check_timeout(timeout)
        with waiting("limiter", self.store, self.name, self.window):
            return run_sync(self._acquire_flow(wait), self._port)


class AsyncLimiter(BaseLimiter, Owner):
    """The asyncio ``Limiter`` (``fencing.aio.Limiter``): the same windows in the same
    store as a blocking limiter of that name; ``aclose`` as ``AsyncFence.aclose``."""

    def __init__(
        self, store: AsyncAdmits, name: str, limit: int, per: float, window: str = "sliding"
    ) -> None:
        super().__init__(name, limit, per, window, time.monotonic)
        self.store: AsyncAdmits = check_store(store, awaits=True)
        self._port = Stores(store, self._args, asyncio.sleep)
        self._admitted: Callable[[], Awaitable[bool]] = (
            store.admitter(*self._args) if isinstance(store, AsyncPreparesAdmits) else self._admit
        )

    async def attempt(self) -> Admission:
        """See ``Limiter.attempt``."""
        return self._noted(await self.store.admit(*self._args))

    async def try_acquire(self) -> bool:
        """See ``Limiter.try_acquire``."""
        return await self._admitted() or self._refused()

    async def _admit(self) -> bool:
        """See ``Limiter._admit``."""
        return (await self.store.admit(*self._args)).admitted

    async def use(self) -> LimitUse:
        """See ``Limiter.use`` (memory, Redis and SQL stores)."""
        if not isinstance(self.store, AsyncInspectsLimits):
            raise TypeError(f"{type(self.store).__name__} cannot report a limiter's use")
        return await self.store.limit_use(self.name, self._args[2], self.window)

    async def acquire(self, timeout: float | None = None) -> Admission:
        """See ``Limiter.acquire``."""
        wait = check_timeout(timeout)
        with waiting("limiter", self.store, self.name, self.window):
            return await run_async(self._acquire_flow(wait), self._port)
