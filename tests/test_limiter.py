"""Rate limiters beyond the public ``LimiterContract`` (test_contract_limiters.py, which
every store passes): what needs several processes, a skewed clock, a virtual clock or one
store's insides.

The cross-process check runs real processes against one Redis, one SQLite file and one
PostgreSQL, and reads the admission times the store returned (``Admission.at``: Redis
``TIME``, the database's clock), never the clients' clocks; it asserts counts only. A
client whose clock libfaketime puts an hour behind shares the limit of Redis and
PostgreSQL with a client on time. The memory limiter is checked on a virtual clock,
where "sleeps until the moment one frees" is exact and costs no time.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from limiting import (
    CONTROL_PER,
    LIMIT,
    PER,
    WINDOWS,
    client_clock_admissions,
    hammer,
    limiters,
    most_in_a_fixed_window,
    most_in_any_interval,
)
from processes import CONTEXT
from sqlalchemy import create_engine
from waiting import PATIENCE, wait_until

import fencing
import fencing.aio
from fencing import Admission, LimitUse, MemoryIssuer
from fencing._primitives.limiter import MAX_LIMIT, MAX_SLIDING_LIMIT, Admits, Limiter
from fencing.redis._limits import parse_admission
from fencing.sql import create_tables
from fencing.testing.servers import PostgresServer, RedisServer, faketime_environment
from fencing.testing.simulation import VirtualClock


def test_the_checks_see_one_admission_too_many() -> None:
    """The controls: six admissions inside one ``per`` are caught by both checks."""
    six = [0.0, 0.1, 0.2, 0.3, 0.4, 0.79]
    assert most_in_any_interval(six, PER) == 6
    assert most_in_a_fixed_window(six, PER) == 6
    assert most_in_any_interval([0.0, 0.8, 1.6], PER) == 1
    assert most_in_a_fixed_window([*six[:5], 0.8, 0.81], PER) == 5


def _hammer(urls: list[str], names: dict[str, str], seconds: float, out: Any) -> None:
    """A client process: for ``seconds`` (its own clock, only to stop), take admissions
    from every limiter (both windows on each store of ``urls``); report the store's time
    of each admission, per store and window."""
    ready = limiters(urls, names)
    end = time.monotonic() + seconds
    out.put(hammer(ready, lambda got: time.monotonic() >= end))


@pytest.fixture
def store_urls(
    redis_server: RedisServer, postgres_server: PostgresServer, tmp_path: Path
) -> list[str]:
    """The stores of rate limits with a server clock, the session's Redis and its
    PostgreSQL (with the SDK's tables, as ``fencing migrate`` makes them), and a fresh
    SQLite file between them, whose clock is its host's."""
    url = postgres_server.url
    engine = create_engine(url)
    create_tables(engine)
    engine.dispose()
    return [f"redis://127.0.0.1:{redis_server.port}", f"sqlite:///{tmp_path / 'limits.db'}", url]


#: How long each hammering process takes admissions (its own clock): a few windows.
HAMMERING = 3.0


def test_processes_hammering_a_store_never_get_more_than_the_limit(
    store_urls: list[str],
) -> None:
    """Four processes take admissions from both windows of every store (one start of the
    processes for all three); by the stores' times, the limit holds in every window."""
    names = {window: f"limit:{window}:{random.random()}" for window in WINDOWS}
    out = CONTEXT.Queue()
    workers = [
        CONTEXT.Process(target=_hammer, args=(store_urls, names, HAMMERING, out)) for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    reports = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    for index in range(len(store_urls)):
        fixed = [at for report in reports for at in report[f"{index}:fixed"]]
        sliding = [at for report in reports for at in report[f"{index}:sliding"]]
        assert fixed and sliding, store_urls[index]
        assert most_in_a_fixed_window(fixed, PER) <= LIMIT, store_urls[index]
        assert most_in_any_interval(sliding, PER) <= LIMIT, store_urls[index]


#: The skewed client's offset, and how near it its clock must be seen (at its start).
OFFSET, OFFSET_SECONDS, TOLERANCE = "-1h", -3600.0, 300.0
CLIENT = Path(__file__).resolve().parent / "limiting.py"
#: Admissions the skewed client takes of each limiter: it starts once the client on time
#: is filling the windows, so it waits for these, among the other's.
SKEWED_ADMISSIONS = 3


def test_a_client_an_hour_off_admits_no_more_than_the_others(
    store_urls: list[str], tmp_path: Path
) -> None:
    """Time comes only from the server: one client process runs under libfaketime with
    its wall clock an hour behind (checked: it prints its ``time.time()``) and takes
    admissions from both windows on Redis and PostgreSQL, while a client of this process,
    on time, takes admissions from the same limiters. By the stores' times (Redis
    ``TIME``, PostgreSQL's ``clock_timestamp()``) every fixed window and every interval
    of ``per`` admitted at most ``limit`` over both clients together: the skewed client
    took nothing the limit did not leave it.

    The control, in the same run: a moving window on the client's clock, as the ``limits``
    library keeps it on Redis. The skewed client takes its admissions first, filed an
    hour back; then this process, on time, drops them from the window and is admitted
    ``limit`` times more: more than ``limit`` within one window by Redis ``TIME``.

    A SQLite file has no server clock: its writers read their own host's clock inside
    the file's write lock, so it assumes the processes of one host, which share one
    clock (docs/limits.md); it is left out here."""
    urls = [store_urls[0], store_urls[2]]
    offset_file = tmp_path / "faketime.rc"
    offset_file.write_text(OFFSET + "\n")
    name = f"skew:{random.random()}"
    skewed = subprocess.Popen(
        [sys.executable, str(CLIENT), str(SKEWED_ADMISSIONS), name, *urls],
        stdout=subprocess.PIPE,
        text=True,
        env=faketime_environment(str(offset_file)),
    )
    finished = threading.Event()
    on_time: dict[str, list[float]] = {}

    def client_on_time() -> None:
        names = {window: f"{name}:{window}" for window in WINDOWS}
        on_time.update(hammer(limiters(urls, names), lambda _: finished.is_set()))

    runner = threading.Thread(target=client_on_time)
    runner.start()
    try:
        out, _ = skewed.communicate(timeout=PATIENCE)
    finally:
        finished.set()
        runner.join(PATIENCE)
    assert skewed.returncode == 0
    clock, control, report = out.splitlines()
    # the child's clock, against this process's: an hour behind, not minutes (faketime took)
    assert float(clock) - time.time() < OFFSET_SECONDS + TOLERANCE, "faketime did not take"
    theirs: dict[str, list[float]] = json.loads(report)
    for key, times in theirs.items():
        assert len(times) >= SKEWED_ADMISSIONS and on_time[key], key
        check = most_in_a_fixed_window if key.endswith("fixed") else most_in_any_interval
        assert check(times + on_time[key], PER) <= LIMIT, key
    skewed_control: list[float] = json.loads(control)
    assert len(skewed_control) == SKEWED_ADMISSIONS, skewed_control
    key = f"{name}:client-clock"
    on_time_control = client_clock_admissions(urls[0], key, LIMIT, CONTROL_PER, 2 * LIMIT)
    assert len(on_time_control) == LIMIT, on_time_control
    both = skewed_control + on_time_control
    assert most_in_any_interval(both, CONTROL_PER) == SKEWED_ADMISSIONS + LIMIT, both


class _Counting:
    """A store that counts the requests it decides (for the others, the store it wraps)
    and keeps its decisions."""

    def __init__(self, issuer: Admits) -> None:
        self.issuer = issuer
        self.calls = 0
        self.admitted: list[bool] = []

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        self.calls += 1
        reply = self.issuer.admit(name, limit, per_ms, window)
        self.admitted.append(reply.admitted)
        return reply


def test_a_redis_log_stays_bounded_and_idle_keys_expire(redis_server: RedisServer) -> None:
    """On Redis, a sliding window's log holds its last ``limit`` admission times and at
    most one older (a refusal takes its own entry back; with no trimming it would hold
    one per admission), its key lives at most ``2 per`` past the last admission, and
    both windows' keys are gone once the name idles."""
    backend = fencing.connect(f"redis://127.0.0.1:{redis_server.port}")
    client = backend.issuer.client  # type: ignore[attr-defined]
    name = f"log:{random.random()}"
    keys = {window: f"fencing:{{{name}}}:limit:{window}" for window in WINDOWS}
    limiters = {w: backend.limiter(name, 3, 0.02, w) for w in WINDOWS}
    for _ in range(10):  # from the fourth on, each admission goes into a full log
        for limiter in limiters.values():
            limiter.acquire(timeout=PATIENCE)
            limiter.try_acquire()
        assert client.llen(keys["sliding"]) <= 4
    assert client.pttl(keys["sliding"]) <= 40  # -2 if already gone (a stall)
    wait_until(lambda: not client.exists(*keys.values()), "the idle limiter's keys expire")


@pytest.mark.parametrize("window", ["fixed", "sliding"])
def test_memory_windows_on_a_virtual_clock(window: str) -> None:
    """Random requests and waits: never more than the limit in a window, and a waiting
    ``acquire`` asks exactly twice (refused, slept until the moment one frees, admitted)."""
    clock = VirtualClock()
    store = _Counting(MemoryIssuer(clock=clock))
    limiter = Limiter(store, "api", LIMIT, PER, window, monotonic=clock, sleep=clock.advance)
    rng = random.Random(21)
    admitted: list[float] = []
    for _ in range(2000):
        clock.advance(rng.choice([0, 0, 0.01, 0.05, 0.2]))
        if rng.random() < 0.8:
            reply = limiter.attempt()
            if reply.admitted:
                admitted.append(reply.at)
            continue
        before = store.calls
        first = limiter.attempt()
        reply = first if first.admitted else limiter.acquire()
        admitted.append(reply.at)
        if not first.admitted:
            assert store.calls - before == 3, "acquire polled instead of sleeping once"
            assert reply.at == pytest.approx(first.at + first.retry_in)
    check = most_in_a_fixed_window if window == "fixed" else most_in_any_interval
    assert check(admitted, PER) == LIMIT  # full windows were reached, never exceeded


@pytest.mark.parametrize("window", ["fixed", "sliding"])
def test_use_counts_without_admitting_on_a_virtual_clock(window: str) -> None:
    clock = VirtualClock()
    limiter = MemoryIssuer(clock=clock).limiter("api", 3, 10.0, window)
    assert limiter.use() == LimitUse(0, None, 0.0)
    limiter.try_acquire()
    clock.advance(4)
    limiter.try_acquire()
    assert limiter.use() == LimitUse(2, 6.0, 4.0) == limiter.use()  # reading admits nothing
    clock.advance(6)  # the first admission stops counting (sliding); the window ends (fixed)
    assert limiter.use() == (
        LimitUse(1, 4.0, 10.0) if window == "sliding" else LimitUse(0, None, 10.0)
    )
    with pytest.raises(TypeError, match="cannot report"):
        Limiter(_Counting(MemoryIssuer()), "api", 1, 1.0).use()
    with pytest.raises(TypeError, match="cannot report"):
        asyncio.run(fencing.aio.Limiter(_AsyncCounting(), "api", 1, 1.0).use())


def test_a_limit_beyond_what_its_window_keeps_is_refused() -> None:
    """A sliding log holds one time per admission: above ``MAX_SLIDING_LIMIT`` the error
    says so and points to the fixed window; no window takes more than ``MAX_LIMIT``."""
    issuer = MemoryIssuer()
    assert issuer.limiter("api", MAX_SLIDING_LIMIT, 3600).limit == MAX_SLIDING_LIMIT
    with pytest.raises(ValueError, match=r"10,000,000 for a sliding window.*window='fixed'"):
        issuer.limiter("api", MAX_SLIDING_LIMIT + 1, 3600)
    assert issuer.limiter("api", MAX_SLIDING_LIMIT + 1, 3600, "fixed").try_acquire()
    with pytest.raises(ValueError, match="limit must be from 1 to"):
        issuer.limiter("api", MAX_LIMIT + 1, 3600, "fixed")


def test_asyncio_runs() -> None:
    assert asyncio.run(fencing.aio.Limiter(_AsyncCounting(), "x", 1, 1.0).try_acquire())


def test_a_store_of_the_other_kind_is_refused() -> None:
    """A blocking limiter on an asyncio store (whose decision would be a coroutine, always
    true) and the reverse are a ``TypeError``, before any request."""
    with pytest.raises(TypeError, match="blocking admit"):
        Limiter(_AsyncCounting(), "x", 1, 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async admit"):
        fencing.aio.Limiter(MemoryIssuer(), "x", 1, 1.0)  # type: ignore[arg-type]


class _AsyncCounting:
    async def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        return Admission(True, 0.0, 0.0)


@pytest.mark.parametrize(
    "reply", [None, [1], [1, 0, 1], [b"soon", 1], [0, 2.5], (0, 1), b"101", 1.5, True]
)
def test_a_limiter_reply_that_is_not_one_is_unavailable(reply: Any) -> None:
    """The Redis limiter's reply parser takes the server time (µs) of an admission or
    ``{retry_in µs, now µs}`` of a refusal, and nothing else: any other shape is
    ``FenceUnavailable``, never a guess."""
    with pytest.raises(fencing.FenceUnavailable, match="unexpected reply"):
        parse_admission(reply)
    assert parse_admission([250_000, 2_000_000]) == Admission(False, 0.25, 2.0)
    assert parse_admission([-1, 2_000_000]) == Admission(False, 0.0, 2.0)
    assert parse_admission(3_000_000) == Admission(True, 0.0, 3.0)
