"""Helpers of the rate limiter tests: a client that takes admissions and reports the
store's time of each (``Admission.at``: Redis ``TIME``, the database's clock), never its
own clock's; and the checks that count admissions per window by those times.

``python limiting.py ADMISSIONS NAME URL...``: prints its own wall clock
(``time.time()``) on the first line, so that the test sees how far off it runs (under
libfaketime), then takes admissions from the limiters ``NAME`` (both windows, ``LIMIT``
per ``PER`` seconds) of every store of ``URL...`` in turn until it has ``ADMISSIONS`` of
each, and prints one JSON object: per ``"<url index>:<window>"``, the store's times.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence

from waiting import PATIENCE

import fencing
from fencing._limiter import Limiter

LIMIT, PER = 5, 0.8
WINDOWS = ("fixed", "sliding")


def _micros(times: Sequence[float], per: float) -> tuple[list[int], int]:
    """Times and ``per`` in whole microseconds, the stores' own unit (no float sums)."""
    return sorted(round(at * 1e6) for at in times), round(per * 1e6)


def most_in_any_interval(times: Sequence[float], seconds: float) -> int:
    """The most admissions in any half-open interval ``[t, t + seconds)``."""
    (ordered, per), most, first = _micros(times, seconds), 0, 0
    for last, at in enumerate(ordered):
        while ordered[first] <= at - per:
            first += 1
        most = max(most, last - first + 1)
    return most


def most_in_a_fixed_window(times: Sequence[float], seconds: float) -> int:
    """The most admissions in one fixed window, each window starting at the first
    admission at or after the end of the one before and lasting ``seconds``."""
    (ordered, per), most, count = _micros(times, seconds), 0, 0
    start: float = -math.inf
    for at in ordered:
        if at >= start + per:
            start, count = at, 0
        count += 1
        most = max(most, count)
    return most


def limiters(
    urls: Sequence[str], names: dict[str, str], sleep: Callable[[float], None] = time.sleep
) -> dict[str, Limiter]:
    """Per ``"<url index>:<window>"``, the limiter ``names[window]`` on that store, waiting
    with ``sleep``."""
    found = {}
    for index, url in enumerate(urls):
        backend = fencing.connect(url)
        for window, name in names.items():
            store = backend.limiter(name, limit=LIMIT, per=PER, window=window).store  # type: ignore[attr-defined]
            found[f"{index}:{window}"] = Limiter(store, name, LIMIT, PER, window, sleep=sleep)
    return found


def timed_wait(seconds: float) -> None:
    """Sleep by a timed wait: under libfaketime 0.9.10 with the monotonic clock left
    alone, ``time.sleep`` fails (``clock_nanosleep`` on ``CLOCK_MONOTONIC`` with an
    absolute deadline returns EINVAL), while a timed wait is not touched."""
    threading.Event().wait(seconds)


def hammer(
    limiters: dict[str, Limiter], done: Callable[[dict[str, list[float]]], bool]
) -> dict[str, list[float]]:
    """Take admissions from every limiter in turn (``attempt``; when refused, ``acquire``,
    which sleeps until the store says one frees), round after round, until ``done(got)``
    after a round; the store's times (so at least one of every limiter)."""
    got: dict[str, list[float]] = {key: [] for key in limiters}
    while True:
        for key, limiter in limiters.items():
            reply = limiter.attempt()
            if not reply.admitted:
                reply = limiter.acquire(timeout=PATIENCE)
            got[key].append(reply.at)
        if done(got):
            return got


def main(admissions: int, name: str, urls: Sequence[str]) -> None:
    print(time.time(), flush=True)
    names = {window: f"{name}:{window}" for window in WINDOWS}
    got = hammer(
        limiters(urls, names, timed_wait),
        lambda got: all(len(times) >= admissions for times in got.values()),
    )
    print(json.dumps(got), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
