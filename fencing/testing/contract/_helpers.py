"""What the contracts share: the fixtures' types, the tables of bad input, the
assertions that read the outcomes, and threads that report back.

Imports the public package, the ``Mark`` protocol and the ``fencing.acquire`` logger;
no pytest.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

from ... import Election, Fence, FenceToken, LeaseLost
from ..._base.log import acquire_log, guard_log
from ..._base.validate import MAX_TTL
from ..._lease.async_fence import AsyncFence
from ..._primitives.election import AsyncElection
from ..._resource.marks import Mark

T = TypeVar("T")

#: ``make_fence(name, ttl)``: a fresh blocking fence of that name on the issuer under test.
MakeFence = Callable[[str, float], Fence]
#: ``make_fence(name, ttl)``: a fresh asyncio fence of that name on the issuer under test.
MakeAsyncFence = Callable[[str, float], AsyncFence]
#: ``make_election(name, ttl)``: an election of that name on the issuer under test.
MakeElection = Callable[[str, float], Election]
#: ``make_election(name, ttl)``: an asyncio election of that name on the issuer under test.
MakeAsyncElection = Callable[[str, float], AsyncElection]
#: ``make_mark()``: a fresh, empty high-water mark on the backend under test.
MakeMark = Callable[[], Mark]

#: Seconds by which a lower bound on elapsed time may be missed: issuers count lease
#: lifetimes in milliseconds on their own clock, the test reads ``time.monotonic``.
CLOCK_SLACK = 0.05

#: Refused fence names, with the error each must raise.
BAD_NAMES: list[tuple[Any, type[Exception]]] = [
    ("", ValueError),
    (5, TypeError),
    (True, TypeError),
    (None, TypeError),
    (b"name", TypeError),
    ("x" * 257, ValueError),
    ("nul\x00", ValueError),
    ("lone \ud800 surrogate", ValueError),  # cannot be encoded: refused before any I/O
]
#: Refused lease lifetimes (``ttl`` of a fence and of ``renew``).
BAD_TTLS: list[tuple[Any, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (MAX_TTL + 1, ValueError),  # beyond what Redis can renew (see fencing._base.validate)
    (True, TypeError),
    ("1", TypeError),
]


def _waiting(kind: str, patience: float) -> float | None:
    """The ``timeout`` of a waiter: "none" and "inf" wait for ever, else ``patience``."""
    return {"none": None, "inf": math.inf}.get(kind, patience)


#: Refused ``acquire`` timeouts.
BAD_TIMEOUTS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    (math.nan, ValueError),
    ("x", TypeError),
]
#: Refused tokens for ``renew`` and ``release``.
BAD_TOKENS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    (True, TypeError),
    (1.5, TypeError),
    ("1", TypeError),
    (None, TypeError),
]
#: Refused tokens for a guard: also those above the 64-bit range every mark stores.
BAD_MARK_TOKENS: list[tuple[Any, type[Exception]]] = [
    *BAD_TOKENS,
    (2**63, ValueError),
]


def _wrong_leases(token: int, holder: str) -> list[tuple[int, str]]:
    """(token, holder id) pairs that name the lease ``token``/``holder`` only in part."""
    return [(token, f"not-{holder}"), (token + 1, holder)]


def _millis(seconds: float) -> int:
    """Seconds as an issuer's ``ttl_ms``."""
    return round(seconds * 1000)


def _ids(table: Sequence[tuple[Any, type[Exception]]]) -> list[str]:
    return [repr(value) for value, _ in table]


@contextlib.contextmanager
def _refuses(error: type[Exception], what: str) -> Iterator[None]:
    """Fail unless the block raises ``error``; the failure names ``what`` was refused
    (a bad-input check loops over a table of values in one test, so the message, not
    the test's id, says which value got through)."""
    try:
        yield
    except error:
        return
    except Exception as exc:
        raise AssertionError(f"{what}: {exc!r}, not {error.__name__}") from exc
    raise AssertionError(f"{what}: not refused (no {error.__name__})")


def racing_tokens(me: int, racers: int, rounds: int) -> list[int]:
    """Racer ``me``'s tokens: climbing, interleaved with the others', and every fourth one
    replayed from five rounds ago (a paused holder waking up)."""
    return [
        max(0, i * racers + me - 5 * racers) if i % 4 == 3 else i * racers + me
        for i in range(rounds)
    ]


def assert_increasing(tokens: Sequence[int], what: str = "tokens") -> None:
    """Fail unless ``tokens`` are strictly increasing (so also unique)."""
    for earlier, later in itertools.pairwise(tokens):
        assert earlier < later, f"{what} not strictly increasing: {later} after {earlier}"


def assert_token_of(token: object, name: str) -> None:
    """Fail unless ``token`` is a non-negative ``FenceToken`` issued for fence ``name``."""
    assert isinstance(token, FenceToken), f"acquire returned {token!r}, not a FenceToken"
    assert token.name == name, f"token of fence {token.name!r}, expected {name!r}"
    assert token >= 0, f"negative token {token}"


def _assert_after(newer: int, token: int, whose: str = "") -> None:
    """Fail unless ``newer`` is higher than ``token``, ``whose`` lease came before."""
    assert newer > token, f"token {newer} after {whose}{token}"


def _assert_waited(started: float, at_least: float, what: str) -> None:
    """Fail if less than ``at_least`` seconds (less ``CLOCK_SLACK``) passed since
    ``started`` (``time.monotonic``): a lower bound only, which a slow machine never
    breaks."""
    waited = time.monotonic() - started
    assert waited >= at_least - CLOCK_SLACK, f"{what} after {waited:.3f}s, not {at_least}s"


def _not_the_lease(holder: T, stranger: T, token: int) -> list[tuple[T, int]]:
    """While ``holder`` holds ``token``: (fence, token) pairs whose ``renew`` and
    ``release`` must raise ``LeaseLost`` and change nothing: another fence object,
    which never held that lease, and the holder with a token it was never granted."""
    return [(stranger, token), (holder, token + 1)]


def _holder_of(fence: Fence | AsyncFence, token: int) -> str | None:
    """The holder id ``fence`` recorded for its lease ``token`` (``None`` once it forgot
    it: the lease was found lost already), so that a check can end that lease at the
    issuer behind the fence's back, the way an operator's ``release --force`` ends it."""
    return fence._holders.get(int(token))


def _tries(patience: float, what: str) -> Iterator[None]:
    """The loop of a wait: yields until ``patience`` seconds have passed, then fails the
    test. A limit against hangs, never a timing."""
    deadline = time.monotonic() + patience
    while True:
        yield
        assert time.monotonic() < deadline, f"still waiting for {what} after {patience}s"


class _InTime:
    """One try of steps that need a lease granted in them (of ``ttl`` seconds) to be
    live until their end, as a ``with`` block.

    If the steps pass, the try is ``done``. A ``LeaseLost`` once ``ttl`` may have passed
    since the try began says only that the machine was too slow (the lease may have
    expired, as it should): the try is dropped, and the caller tries again. Any other
    failure, and a ``LeaseLost`` any sooner, fails the test."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.done = False
        self._began = time.monotonic()

    def __enter__(self) -> None:
        self._began = time.monotonic()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if error is None:
            self.done = True
            return False
        too_slow = time.monotonic() - self._began >= self.ttl - CLOCK_SLACK
        return isinstance(error, LeaseLost) and too_slow


def _in_time(ttl: float, patience: float, what: str) -> Iterator[_InTime]:
    """Tries of the steps in a ``with`` block until one runs in time (see ``_InTime``);
    fails the test after ``patience`` seconds::

        for attempt in _in_time(ttl, patience, "a renew"):
            with attempt:
                ...
    """
    for _ in _tries(patience, f"{what} within {ttl}s"):
        attempt = _InTime(ttl)
        yield attempt
        if attempt.done:
            return


class _Occupancy:
    """What racers report: how many hold the lease now and at most, and the tokens in
    the order their holders got in. Thread-safe; tasks of one loop may share it too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self.most = 0
        self.order: list[int] = []

    def enter(self, token: int) -> None:
        with self._lock:
            self._inside += 1
            self.most = max(self.most, self._inside)
            self.order.append(token)

    def leave(self) -> None:
        with self._lock:
            self._inside -= 1

    def check(self, errors: Sequence[BaseException], acquisitions: int) -> None:
        """Never two holders at once, no racer failed, all ``acquisitions`` made, and
        tokens increasing in the order the lease was taken."""
        assert self.most == 1, f"{self.most} holders at once"
        assert not errors, f"racers failed: {errors!r}"
        assert len(self.order) == acquisitions, f"{len(self.order)} of {acquisitions} acquisitions"
        assert_increasing(self.order, "tokens in acquisition order")


class _Seen(logging.Handler):
    """Sets ``seen`` at the first record whose message ``matches``."""

    def __init__(self, matches: Callable[[str], bool]) -> None:
        super().__init__(logging.DEBUG)
        self.matches, self.seen = matches, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.matches(record.getMessage()):
            self.seen.set()


@contextlib.contextmanager
def _seen(log: logging.Logger, matches: Callable[[str], bool]) -> Iterator[threading.Event]:
    """An event set once ``log`` has a debug record whose message ``matches``."""
    handler = _Seen(matches)
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield handler.seen
    finally:
        log.setLevel(level)
        log.removeHandler(handler)


def _waits_seen(name: str) -> contextlib.AbstractContextManager[threading.Event]:
    """An event set once an acquire of ``name`` found the lease busy and started to wait
    (the fence's own debug record): proof that a waiter tried while the lease was held,
    where sleeping a while would only hope for it."""
    return _seen(acquire_log, lambda message: message.startswith(f"fence {name!r}: busy"))


def _mark_waits_seen() -> contextlib.AbstractContextManager[threading.Event]:
    """An event set once a guarded call or claim found the mark held by a running call and
    waits for it (the mark's own debug record, ``waits_for_the_mark``)."""
    return _seen(guard_log, lambda message: message.endswith(": waits for the mark"))


class _Background(Generic[T]):
    """``fn()`` running in a daemon thread; ``result`` waits for it and re-raises its error."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._outcome: list[T] = []
        self._error: Exception | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(self._fn())
        except Exception as exc:
            self._error = exc

    def running(self) -> bool:
        return self.thread.is_alive()

    def result(self, patience: float) -> T:
        """Its return value; fails the test if it still runs after ``patience`` seconds."""
        self.thread.join(patience)
        assert not self.thread.is_alive(), f"a thread still runs after {patience}s"
        if self._error is not None:
            raise self._error
        return self._outcome[0]


def _run_threads(targets: Sequence[Callable[[], None]], patience: float) -> list[Exception]:
    """Run the targets in parallel threads and return what they raised."""
    calls = [_Background(target) for target in targets]
    errors: list[Exception] = []
    for call in calls:
        try:
            call.result(patience)
        except Exception as exc:
            errors.append(exc)
    return errors
