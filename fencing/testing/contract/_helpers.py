"""What the contracts share: the fixtures' types, the tables of bad input, the
assertions that read the outcomes, and threads that report back.

Imports the public package and the ``Mark`` protocol; no pytest.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from ... import AsyncFence, Fence, FenceToken
from ..._marks import Mark
from ..._validate import MAX_TTL

T = TypeVar("T")

#: ``make_fence(name, ttl)``: a fresh blocking fence of that name on the issuer under test.
MakeFence = Callable[[str, float], Fence]
#: ``make_fence(name, ttl)``: a fresh asyncio fence of that name on the issuer under test.
MakeAsyncFence = Callable[[str, float], AsyncFence]
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
    (MAX_TTL + 1, ValueError),  # beyond what Redis can renew (see fencing._validate)
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
