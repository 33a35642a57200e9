"""The release signal is written only when someone waits, and still wakes every waiter.

A busy acquire attempt sets ``fencing:{<name>}:waiters``; only while it exists does a
release push to ``fencing:{<name>}:signal``. These tests check that an uncontended
release writes no signal, and that blocked waiters (RedisFence, two in a row, FencedLock,
asyncio) are woken by the release itself: well before the 1 s fallback block would end.
"""

from __future__ import annotations

import asyncio
import threading
import time

import redis
import redis.asyncio

import fencing.aio
from fencing import FencedLock, RedisFence, RedisIssuer
from fencing._protocol import Busy
from fencing._redis_scripts import SIGNAL_TTL_MS, WAITER_TTL_MS, fence_keys
from fencing.testing.servers import RedisServer

#: A release wakes a blocked waiter within this (a missed signal: up to 1 s later).
PROMPT = 0.5
#: How long a waiter is left blocked before the release: its 1 s block then still has
#: more than ``PROMPT`` to run, so only the signal can wake it in time.
SETTLE = 0.2


def signal_and_marker(name: str) -> tuple[str, str]:
    return f"fencing:{{{name}}}:signal", f"fencing:{{{name}}}:waiters"


def rpush_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_rpush", {}).get("calls", 0))


def acquire_and_note(lock: FencedLock, woke: list[float]) -> None:
    if lock.acquire(blocking_timeout=20):
        woke.append(time.monotonic())


def test_uncontended_release_writes_no_signal(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "quiet", ttl=30)
    lock = redis_client.lock("quiet", timeout=30, lock_class=FencedLock)
    fence.release(fence.acquire())  # scripts loaded
    redis_client.config_resetstat()
    for _ in range(5):
        fence.release(fence.acquire())
        assert lock.acquire(blocking=False)
        lock.release()
    signal, marker = signal_and_marker("quiet")
    assert rpush_calls(redis_client) == 0
    assert redis_client.exists(signal, marker) == 0
    assert redis_client.exists(f"fencing:{{{'quiet'}}}:lease") == 0


def test_busy_attempt_marks_a_waiter_and_release_signals_once(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    token = issuer.try_acquire("mark", "h1", 30_000)
    assert isinstance(token, int)
    signal, marker = signal_and_marker("mark")
    assert redis_client.exists(marker) == 0
    assert isinstance(issuer.try_acquire("mark", "h2", 30_000), Busy)
    assert 0 < redis_client.pttl(marker) <= WAITER_TTL_MS
    assert issuer.release("mark", token, "h1")
    assert redis_client.llen(signal) == 1  # one release wakes one waiter
    assert 0 < redis_client.pttl(signal) <= SIGNAL_TTL_MS
    assert redis_client.exists(marker) == 1  # kept: a second waiter needs the next signal
    for _ in range(2):  # later releases replace the element, never pile up
        again = issuer.try_acquire("mark", "h3", 30_000)
        assert isinstance(again, int)
        assert issuer.release("mark", again, "h3")
    assert redis_client.llen(signal) == 1
    redis_client.delete(marker, signal)  # as when the marker expires: back to quiet
    last = issuer.try_acquire("mark", "h4", 30_000)
    assert isinstance(last, int) and issuer.release("mark", last, "h4")
    assert redis_client.exists(signal) == 0


def test_keys_are_built_once_and_bounded() -> None:
    assert fence_keys("k") is fence_keys("k")
    assert fence_keys("k").waiters == b"fencing:{k}:waiters"
    assert fence_keys.cache_info().maxsize is not None


def test_blocked_waiter_is_woken_by_release_not_by_the_fallback(
    redis_client: redis.Redis,
) -> None:
    holder = RedisFence(redis_client, "prompt", ttl=30)
    token = holder.acquire()
    got: list[tuple[int, float]] = []
    waiter = RedisFence(redis_client, "prompt", ttl=30)
    thread = threading.Thread(
        target=lambda: got.append((waiter.acquire(timeout=20), time.monotonic()))
    )
    thread.start()
    time.sleep(SETTLE)
    assert not got  # blocked
    released = time.monotonic()
    holder.release(token)
    thread.join(20)
    assert got and got[0][0] > token
    assert got[0][1] - released < PROMPT


def test_two_waiters_are_each_woken_by_a_release(redis_client: redis.Redis) -> None:
    holder = RedisFence(redis_client, "two", ttl=30)
    token = holder.acquire()
    events: list[tuple[str, int, float]] = []
    guard = threading.Lock()

    def wait_hold_release() -> None:
        fence = RedisFence(redis_client, "two", ttl=30)
        got = fence.acquire(timeout=20)
        with guard:
            events.append(("got", got, time.monotonic()))
        time.sleep(0.05)
        with guard:
            events.append(("released", got, time.monotonic()))
        fence.release(got)

    threads = [threading.Thread(target=wait_hold_release) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(SETTLE)
    assert not events  # both blocked
    released = time.monotonic()
    holder.release(token)
    for t in threads:
        t.join(20)
    kinds = [e[0] for e in events]
    assert kinds == ["got", "released", "got", "released"]  # never two holders at once
    first, second = events[0][1], events[2][1]
    assert token < first < second
    assert events[0][2] - released < PROMPT
    # the second waiter was still in the BLPOP it started before the first release; only
    # a signal from the first waiter's release wakes it before that block ends
    assert events[2][2] - events[1][2] < PROMPT


def test_fenced_lock_waiter_is_woken_by_release(redis_client: redis.Redis) -> None:
    holder = redis_client.lock("lockwake", timeout=30, lock_class=FencedLock)
    assert holder.acquire(blocking=False)
    waiter = redis_client.lock(
        "lockwake", timeout=30, sleep=20, thread_local=False, lock_class=FencedLock
    )
    woke: list[float] = []
    thread = threading.Thread(target=acquire_and_note, args=(waiter, woke))
    thread.start()
    time.sleep(SETTLE)
    assert not woke
    released = time.monotonic()
    holder.release()
    thread.join(20)
    assert woke and woke[0] - released < PROMPT
    assert waiter.owned()
    waiter.release()


def test_fenced_lock_and_redis_fence_wake_each_other(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "mixed", ttl=30)
    token = fence.acquire()
    waiter = redis_client.lock(
        "mixed", timeout=30, sleep=20, thread_local=False, lock_class=FencedLock
    )
    woke: list[float] = []
    thread = threading.Thread(target=acquire_and_note, args=(waiter, woke))
    thread.start()
    time.sleep(SETTLE)
    released = time.monotonic()
    fence.release(token)
    thread.join(20)
    assert woke and woke[0] - released < PROMPT
    assert waiter.fence_token is not None and waiter.fence_token > token
    waiter.release()


def test_async_waiter_is_woken_by_release(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    async def scenario() -> float:
        client = redis.asyncio.Redis(port=redis_server.port)
        try:
            holder = fencing.aio.RedisFence(client, "awake2", ttl=30)
            token = await holder.acquire()
            other = redis.asyncio.Redis(port=redis_server.port)
            waiter = fencing.aio.RedisFence(other, "awake2")
            acquiring = asyncio.create_task(waiter.acquire(timeout=20))
            await asyncio.sleep(SETTLE)
            assert not acquiring.done()
            released = time.monotonic()
            await holder.release(token)
            got = await asyncio.wait_for(acquiring, 20)
            delay = time.monotonic() - released
            assert got > token
            await waiter.release(got)
            await other.aclose()
            return delay
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) < PROMPT
