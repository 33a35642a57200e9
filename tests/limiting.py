"""Helpers of the rate limiter tests: a client that takes admissions and reports the
store's time of each (``Admission.at``: Redis ``TIME``, the database's clock), never its
own clock's; and the checks that count admissions per window by those times.

``python limiting.py ADMISSIONS NAME URL...``: prints its own wall clock
(``time.time()``) on the first line, so that the test sees how far off it runs (under
libfaketime), then takes admissions from the limiters ``NAME`` (both windows, ``LIMIT``
per ``PER`` seconds) of every store of ``URL...`` in turn until it has ``ADMISSIONS`` of
each, and prints one JSON object: per ``"<url index>:<window>"``, the store's times. First
it takes ``ADMISSIONS`` of the control, a moving window on its own clock of ``LIMIT`` per
``CONTROL_PER`` on the first store (a Redis, ``client_clock_admissions``), and prints
their Redis times as a JSON list.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence

import redis
from waiting import PATIENCE

import fencing
from fencing._primitives.limiter import Limiter

LIMIT, PER = 5, 0.8
WINDOWS = ("fixed", "sliding")
#: The control's window: long enough that the skewed client's admissions and the next
#: client's fall in one window however slowly the test runs.
CONTROL_PER = 600.0


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
            store = backend.limiter(name, limit=LIMIT, per=PER, window=window).store
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


#: The control: a moving window on the client's clock, kept on Redis as the ``limits``
#: library keeps its moving window (a sorted set of admissions scored by the client's
#: ``time.time()``), which is what fencing's limiters do not do.
#: KEYS[1]: the window's sorted set. ARGV[1]: the client's time (us); ARGV[2]: ``per``
#: (us); ARGV[3]: the limit; ARGV[4]: a member unique to this request.
#: Returns {1 if admitted else 0, the seconds and microseconds of Redis ``TIME``}: the
#: server's time of the decision, so that the checks count by one clock.
CLIENT_CLOCK_WINDOW = """
local now, per = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - per)
local time = redis.call('TIME')
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return {0, time[1], time[2]}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
return {1, time[1], time[2]}
"""


def client_clock_admissions(url: str, key: str, limit: int, per: float, most: int) -> list[float]:
    """Ask the client-clock moving window ``key`` (``limit`` per ``per`` seconds) on the
    Redis at ``url`` until it refuses, or ``most`` times; the Redis times of the
    admissions. A client whose clock runs behind scores its admissions in the past, where
    a client on time drops them from the window: together they get more than ``limit``."""
    client = redis.Redis.from_url(url)
    window = client.register_script(CLIENT_CLOCK_WINDOW)
    got: list[float] = []
    for request in range(most):
        args: list[int | str] = [
            round(time.time() * 1e6),
            round(per * 1e6),
            limit,
            f"{time.time()}:{request}",
        ]
        admitted, seconds, micros = window(keys=[key], args=args)
        if not admitted:
            break
        got.append(int(seconds) + int(micros) / 1e6)
    client.close()
    return got


def main(admissions: int, name: str, urls: Sequence[str]) -> None:
    print(time.time(), flush=True)
    control = client_clock_admissions(
        urls[0], f"{name}:client-clock", LIMIT, CONTROL_PER, admissions
    )
    print(json.dumps(control), flush=True)
    names = {window: f"{name}:{window}" for window in WINDOWS}
    got = hammer(
        limiters(urls, names, timed_wait),
        lambda got: all(len(times) >= admissions for times in got.values()),
    )
    print(json.dumps(got), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
