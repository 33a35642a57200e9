"""``LimiterContract``: the promises of a rate limiter (docs/limits.md), each written once
and run twice, through ``fencing.Limiter`` and through ``fencing.aio.Limiter``.

What is checked, in both windows (``"sliding"`` and ``"fixed"``): at most ``limit``
admissions per window, also for requests that race (threads, or tasks); a refusal says
when one frees, and ``use`` counts without admitting; names and windows are apart; a
waiter is admitted at its first ask once the window frees, after ``per`` by the store's
clock (``Admission.at``), never sooner; ``acquire`` gives up at once, with one request,
when the store says nothing frees before its deadline; bad input is refused before any
request, with nothing admitted; the largest limits are kept exactly; blocking and
asyncio limiters of one name share its windows.

A scenario is one coroutine: ``_done`` awaits what an asyncio limiter's call returns and
passes a blocking one's result through, and racers run as tasks of the test's loop
(asyncio) or each in a thread of its own (blocking).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, ClassVar, TypeVar

import pytest

from ... import AcquireTimeout
from ..._primitives.limiter import (
    MAX_LIMIT,
    MAX_SLIDING_LIMIT,
    WINDOWS,
    Admission,
    AsyncLimiter,
    Limiter,
)
from ._helpers import BAD_NAMES, BAD_TIMEOUTS, _tries
from ._semaphore import BAD_COUNTS
from ._terms import LeaseTerms

T = TypeVar("T")

#: ``make_limiter(name, limit, per, window)``: a fresh blocking limiter on the store.
MakeLimiter = Callable[[str, int, float, str], Limiter]
#: ``make_async_limiter(name, limit, per, window)``: a fresh asyncio limiter on the same
#: store (called inside the test's event loop).
MakeAsyncLimiter = Callable[[str, int, float, str], AsyncLimiter]
_MakeEither = Callable[[str, int, float, str], "Limiter | AsyncLimiter"]

#: Seconds by which a store may round a window's end: to its next whole millisecond
#: (Redis keeps a key's expiry, the end of a fixed window, in milliseconds).
ROUNDING = 0.001

#: Refused ``per`` (the window's length in seconds).
BAD_PERS: list[tuple[Any, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (True, TypeError),
    ("1", TypeError),
]
#: Refused ``window``.
BAD_WINDOWS: list[tuple[Any, type[Exception]]] = [
    ("rolling", ValueError),
    ("", ValueError),
    (None, TypeError),
    (1, TypeError),
]


async def _done(outcome: T | Awaitable[T]) -> T:
    """The outcome of a limiter's call: awaited for an asyncio limiter, as is for a
    blocking one."""
    if inspect.isawaitable(outcome):
        return await outcome
    return outcome


def _blocking(limiter: Limiter | AsyncLimiter) -> bool:
    return not isinstance(limiter, AsyncLimiter)


async def _race(
    limiters: Sequence[Limiter | AsyncLimiter],
    racer: Callable[[Limiter | AsyncLimiter], Coroutine[Any, Any, T]],
) -> list[T]:
    """``racer(limiter)`` for every limiter at once: asyncio limiters as tasks of this
    loop, blocking ones each in a thread of its own (with its own loop to run the
    scenario's coroutine, whose calls then block that thread only)."""
    return list(
        await asyncio.gather(
            *(
                asyncio.to_thread(asyncio.run, racer(limiter))
                if _blocking(limiter)
                else racer(limiter)
                for limiter in limiters
            )
        )
    )


class _Counting:
    """A blocking store that keeps whether each request it decided was admitted."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.admitted: list[bool] = []

    def _noted(self, reply: Admission) -> Admission:
        self.admitted.append(reply.admitted)
        return reply

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        return self._noted(self.store.admit(name, limit, per_ms, window))


class _AsyncCounting(_Counting):
    """The asyncio ``_Counting``: only the call to its store differs."""

    async def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:  # type: ignore[override]
        return self._noted(await self.store.admit(name, limit, per_ms, window))


def _counted(limiter: Limiter | AsyncLimiter) -> tuple[Limiter | AsyncLimiter, list[bool]]:
    """The same limiter on its store behind a ``_Counting`` one, and the decisions list."""
    args = (limiter.name, limiter.limit, limiter.per, limiter.window)
    if isinstance(limiter, AsyncLimiter):
        store = _AsyncCounting(limiter.store)
        return AsyncLimiter(store, *args), store.admitted
    blocking = _Counting(limiter.store)
    return Limiter(blocking, *args), blocking.admitted


def _bad_arguments() -> list[tuple[dict[str, Any], type[Exception]]]:
    """``(arguments, error)``: what a limiter refuses to be made with."""
    return [
        *(({"name": value}, error) for value, error in BAD_NAMES),
        *(({"limit": value}, error) for value, error in BAD_COUNTS),
        *(({"per": value}, error) for value, error in BAD_PERS),
        *(({"window": value}, error) for value, error in BAD_WINDOWS),
        ({"limit": MAX_LIMIT + 1, "window": "fixed"}, ValueError),
        ({"limit": MAX_SLIDING_LIMIT + 1, "window": "sliding"}, ValueError),
    ]


class LimiterContract:
    """The promises of a rate limiter on a store. Provide ``make_limiter(name, limit,
    per, window)`` returning a fresh ``fencing.Limiter`` and ``make_async_limiter(...)``
    returning a ``fencing.aio.Limiter`` on the same store; every call with the same name
    must reach the same windows (as separate processes would). Each check runs once per
    kind of limiter (``[blocking]``, ``[asyncio]``); its tests are coroutines (run them
    with pytest-asyncio in auto mode, or mark the class ``asyncio``)."""

    #: Capability. True (the default): the store reports a limiter's use (``use()``,
    #: ``InspectsLimits``); False: the checks read only admissions.
    reports_use: ClassVar[bool] = True
    #: Seconds: the window of a limiter whose window a test never waits out.
    long_per: ClassVar[float] = 30.0
    #: Seconds: the window a waiter waits out.
    short_per: ClassVar[float] = 0.2
    #: The racing check: this many racers, each asking this often, for ``race_limit``.
    limit_racers: ClassVar[int] = 4
    limit_asks: ClassVar[int] = 3
    race_limit: ClassVar[int] = 5
    #: Seconds: how long something that must happen is waited for (a limit, not a timing).
    patience: ClassVar[float] = 30.0

    fresh_name = staticmethod(LeaseTerms.fresh_name)

    @pytest.fixture
    def make_limiter(self) -> MakeLimiter:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_limiter fixture")

    @pytest.fixture
    def make_async_limiter(self) -> MakeAsyncLimiter:
        """Provided by the subclass."""
        raise NotImplementedError(
            f"{type(self).__name__} must provide a make_async_limiter fixture"
        )

    @pytest.fixture(params=["blocking", "asyncio"])
    def limiter_of(
        self,
        request: pytest.FixtureRequest,
        make_limiter: MakeLimiter,
        make_async_limiter: MakeAsyncLimiter,
    ) -> _MakeEither:
        """The kind of limiter a check runs with, made as ``make_limiter`` makes it."""
        return make_limiter if request.param == "blocking" else make_async_limiter

    async def test_at_most_limit_admissions_per_window(self, limiter_of: _MakeEither) -> None:
        for window in WINDOWS:
            name, per = self.fresh_name(f"limit-{window}"), self.long_per
            limiter = limiter_of(name, 3, per, window)
            admitted = [await _done(limiter.try_acquire()) for _ in range(3)]
            assert admitted == [True] * 3, f"{window}: {admitted} for the first 3 of 3"
            refused = await _done(limiter.attempt())
            assert not refused.admitted, f"{window}: a 4th admission of 3"
            frees = refused.retry_in
            assert 0 < frees <= per + ROUNDING, f"{window}: frees in {frees}s, per {per}s"
            another = limiter_of(name, 3, per, window)  # the same windows, as another process
            assert not await _done(another.try_acquire()), f"{window}: another object got in"
            if self.reports_use:
                use = await _done(limiter.use())
                assert use.used == 3, f"{window}: used {use.used} of 3"
                assert use.resets_in is not None and 0 < use.resets_in <= per + ROUNDING, use
                assert (await _done(limiter.use())).used == 3, "reading the use admitted"
            other = limiter_of(name + ":other", 3, per, window)
            assert await _done(other.try_acquire()), f"{window}: names are not apart"
        both = [limiter_of(self.fresh_name("windows"), 1, self.long_per, w) for w in WINDOWS]
        assert [await _done(limiter.try_acquire()) for limiter in both] == [True, True], (
            "the windows of one name are not apart"
        )

    @pytest.mark.parametrize("window", WINDOWS)
    async def test_a_waiter_is_admitted_at_its_first_ask_once_the_window_frees(
        self, limiter_of: _MakeEither, window: str
    ) -> None:
        """``acquire`` on a full window asks, is refused, sleeps the ``retry_in`` the store
        named and is admitted at its next ask (or the one after, on a loaded machine: see
        below), ``per`` after the window's first admission by the store's clock. (A stall
        that outlasts the window lets the first ask in: the round is tried again, for the
        count only.)"""
        per = self.short_per
        for _ in _tries(self.patience, f"a full {window} window"):
            made = limiter_of(self.fresh_name(f"resume-{window}"), 2, per, window)
            limiter, decisions = _counted(made)
            first = await _done(limiter.attempt())
            second = await _done(limiter.attempt())
            assert first.admitted and second.admitted, f"{window}: refused at first"
            del decisions[:]
            reply = await _done(limiter.acquire(timeout=self.patience))
            assert reply.admitted
            assert reply.at - first.at >= per - ROUNDING, (
                f"{window}: admitted {reply.at - first.at:.4f}s after the window's first "
                f"admission by the store's clock, within its {per}s"
            )
            if decisions != [True]:
                # One wait, or two: Redis decides a key's expiry by the time its script
                # started, the wait by TIME read inside it, and a server descheduled in
                # between (a loaded machine) names a wait that ends a little early.
                assert decisions in ([False, True], [False, False, True]), (
                    f"{window}: asks {decisions}, not one wait"
                )
                return

    async def test_acquire_gives_up_at_once_when_nothing_frees_in_time(
        self, limiter_of: _MakeEither
    ) -> None:
        for window in WINDOWS:
            made = limiter_of(self.fresh_name(f"deadline-{window}"), 1, self.long_per, window)
            limiter, decisions = _counted(made)
            assert await _done(limiter.try_acquire())
            for timeout in (0, 1.0):
                del decisions[:]
                with pytest.raises(AcquireTimeout):
                    await _done(limiter.acquire(timeout=timeout))
                assert decisions == [False], (
                    f"{window}: {decisions} with timeout {timeout}: waited, although the "
                    f"store said nothing frees for {self.long_per}s"
                )

    async def test_racing_requests_never_exceed_the_limit(self, limiter_of: _MakeEither) -> None:
        for window in WINDOWS:
            name = self.fresh_name(f"race-{window}")
            limiters = [
                limiter_of(name, self.race_limit, self.long_per, window)
                for _ in range(self.limit_racers)
            ]

            async def asks(limiter: Limiter | AsyncLimiter) -> list[bool]:
                return [await _done(limiter.try_acquire()) for _ in range(self.limit_asks)]

            admitted = sum(sum(got) for got in await _race(limiters, asks))
            assert admitted == self.race_limit, (
                f"{window}: {admitted} of {self.limit_racers * self.limit_asks} racing "
                f"requests admitted, with a limit of {self.race_limit}"
            )

    async def test_bad_input_is_refused_with_nothing_admitted(
        self, limiter_of: _MakeEither
    ) -> None:
        good: dict[str, Any] = {
            "name": self.fresh_name("bad"),
            "limit": 1,
            "per": self.long_per,
            "window": "fixed",
        }
        for arguments, error in _bad_arguments():
            with pytest.raises(error):
                limiter_of(*{**good, **arguments}.values())
        limiter = limiter_of(*good.values())
        for timeout, error in BAD_TIMEOUTS:
            with pytest.raises(error):
                await _done(limiter.acquire(timeout=timeout))
        assert await _done(limiter.try_acquire()), "a refused call admitted something"
        assert not await _done(limiter.try_acquire())

    async def test_the_largest_limits_are_kept_exactly(self, limiter_of: _MakeEither) -> None:
        """A million per hour in a sliding window, and a fixed window's counter up to
        ``MAX_LIMIT`` (2^53 - 1): each admits and counts its first requests."""
        name = self.fresh_name("big")
        for window, limit in (("sliding", 1_000_000), ("fixed", MAX_LIMIT)):
            limiter = limiter_of(name, limit, 3600.0, window)
            assert await _done(limiter.try_acquire()) and await _done(limiter.try_acquire())
            if self.reports_use:
                used = (await _done(limiter.use())).used
                assert used == 2, f"{window}: used {used} of 2"

    async def test_blocking_and_asyncio_share_the_windows(
        self, make_limiter: MakeLimiter, make_async_limiter: MakeAsyncLimiter
    ) -> None:
        for window in WINDOWS:
            name = self.fresh_name(f"shared-{window}")
            blocking = make_limiter(name, 2, self.long_per, window)
            aio = make_async_limiter(name, 2, self.long_per, window)
            assert blocking.try_acquire() and await aio.try_acquire()
            assert not await aio.try_acquire(), f"{window}: asyncio got a 3rd of 2"
            assert not blocking.try_acquire(), f"{window}: blocking got a 3rd of 2"
            if self.reports_use:
                assert (await aio.use()).used == 2 == blocking.use().used


__all__ = [
    "BAD_PERS",
    "BAD_WINDOWS",
    "LimiterContract",
    "MakeAsyncLimiter",
    "MakeLimiter",
]
