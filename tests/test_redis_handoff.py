"""Direct hand-off: a release gives the lease and a fresh token to the first queued waiter.

A busy acquire attempt queues its holder id (``fencing:{<name>}:queue`` and
``:waiting``, until a deadline on the server's clock); the release pops the first
waiter still within its deadline, sets the lease to it and pushes the token to its
``wake:<holder>`` key, which the waiter BLPOPs. These tests check the scripts step by
step (queueing, order, expired places, missed wake-ups, leaving the queue), that an
uncontended release writes nothing more, that waiters who give up or are cancelled
leave no place behind, and that blocked waiters (RedisFence, two in a row, FencedLock,
asyncio) are served by the release: they block longer between attempts than the test
waits (``waiting.woken_only``), so only the hand-off can serve them in time. Nothing
here is timed: each test waits for what it needs (a waiter queued, a place expired).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import cast

import pytest
import redis
import redis.asyncio
from waiting import NEVER, PATIENCE, await_until, joined, wait_until, woken_only

import fencing
import fencing.aio
from fencing import FencedLock, RedisFence, RedisIssuer
from fencing.issuer import Busy
from fencing.redis._scripts import fence_keys
from fencing.testing.servers import RedisServer


def queue_keys(name: str) -> tuple[str, str]:
    return f"fencing:{{{name}}}:queue", f"fencing:{{{name}}}:waiting"


def lease_of(client: redis.Redis, name: str) -> bytes | None:
    value = client.get(f"fencing:{{{name}}}:lease")
    assert value is None or isinstance(value, bytes)
    return value


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def queued(client: redis.Redis, queue: str | bytes, waiters: int = 1) -> None:
    """Wait until ``waiters`` are in ``queue`` (their first attempt found the lease busy)."""
    wait_until(lambda: client.llen(queue) == waiters, f"{waiters} waiter(s) queued")


def acquire_and_note(lock: FencedLock, woke: list[bool]) -> None:
    woke.append(lock.acquire())


def test_uncontended_cycles_write_no_queue(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "quiet", ttl=30)
    lock = redis_client.lock("quiet", timeout=30, lock_class=FencedLock)
    fence.release(fence.acquire())  # scripts loaded
    redis_client.config_resetstat()
    for _ in range(5):
        fence.release(fence.acquire())
        assert lock.acquire(blocking=False)
        lock.release()
    stats = redis_client.info("commandstats")
    assert "cmdstat_rpush" not in stats and "cmdstat_hset" not in stats
    assert redis_client.keys("fencing:{quiet}:*") == [b"fencing:{quiet}:counter"]


def test_busy_attempt_queues_once_and_release_hands_over(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    first = issuer.try_acquire("q", "h1", 60_000)
    assert isinstance(first, int)
    queue, waiting = queue_keys("q")
    assert isinstance(
        issuer.try_acquire_queued("q", "h2", 20_000, 0, False), Busy
    )  # timeout=0: no place
    assert redis_client.exists(queue, waiting) == 0
    assert lease_of(redis_client, "q") == b"%d:h1" % first  # and no mark
    for again in (False, True):  # a later attempt refreshes the place, keeps its rank
        assert isinstance(issuer.try_acquire_queued("q", "h2", 20_000, 60_000, again), Busy)
    assert redis_client.lrange(queue, 0, -1) == [b"h2"]
    deadline, ttl, idle = cast(bytes, redis_client.hget(waiting, "h2")).split(b":")
    now_ms = server_ms(redis_client)
    assert now_ms < int(deadline) <= now_ms + 60_000  # on the server's clock
    assert ttl == b"20000" and idle == b"%d" % issuer.flows._idle_ms
    assert 30_000 < redis_client.pttl(queue) <= 60_000
    assert lease_of(redis_client, "q") == b"+%d:h1" % first  # marked: release serves the queue
    assert 30_000 < redis_client.pttl("fencing:{q}:lease") <= 60_000  # the mark kept the ttl
    assert issuer.renew("q", first, "h1", 30_000) and not issuer.renew("q", first, "x", 30_000)
    assert issuer.release("q", first, "h1")
    handed = int(redis_client.lpop(fence_keys("q").wake("h2")))  # type: ignore[arg-type]
    assert handed > first
    assert lease_of(redis_client, "q") == b"%d:h2" % handed
    assert 0 < redis_client.pttl("fencing:{q}:lease") <= 20_000  # the waiter's own ttl
    assert int(redis_client.get("fencing:{q}:counter") or 0) == handed
    assert redis_client.exists(queue, waiting) == 0
    assert issuer.release("q", handed, "h2")
    assert lease_of(redis_client, "q") is None


def test_release_serves_waiters_in_arrival_order(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    token = issuer.try_acquire("fifo", "h0", 30_000)
    assert isinstance(token, int)
    for holder in ("a", "b", "c"):
        assert isinstance(issuer.try_acquire_queued("fifo", holder, 30_000, 5000, False), Busy)
    assert isinstance(issuer.try_acquire_queued("fifo", "a", 30_000, 5000, True), Busy)  # no jump
    order, holder = [], "h0"
    for _ in range(3):
        assert issuer.release("fifo", token, holder)
        granted, _, owner = (lease_of(redis_client, "fifo") or b"").partition(b":")
        holder = owner.decode()
        order.append(holder)
        token = int(granted)
    assert order == ["a", "b", "c"]
    assert not (lease_of(redis_client, "fifo") or b"").startswith(b"+")  # nobody left


def test_release_skips_places_past_their_deadline(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    token = issuer.try_acquire("late", "h0", 30_000)
    assert isinstance(token, int)
    assert isinstance(
        issuer.try_acquire_queued("late", "gone", 30_000, 50, False), Busy
    )  # a dead waiter
    place = cast(bytes, redis_client.hget(queue_keys("late")[1], "gone"))
    gone_at = int(place.split(b":")[0])
    wait_until(lambda: server_ms(redis_client) > gone_at, "the place passes its deadline")
    assert isinstance(issuer.try_acquire_queued("late", "alive", 30_000, 5000, False), Busy)
    assert issuer.release("late", token, "h0")
    assert (lease_of(redis_client, "late") or b"").endswith(b":alive")
    assert redis_client.exists(fence_keys("late").wake("gone")) == 0


def test_missed_wake_up_is_found_at_the_next_attempt(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    token = issuer.try_acquire("miss", "h0", 30_000)
    assert isinstance(token, int)
    assert isinstance(issuer.try_acquire_queued("miss", "w", 30_000, 5000, False), Busy)
    assert issuer.release("miss", token, "h0")  # handed to w, which is not listening
    again = issuer.try_acquire_queued("miss", "w", 30_000, 5000, True)
    assert isinstance(again, int) and again > token
    assert redis_client.exists(fence_keys("miss").wake("w")) == 0  # consumed
    assert issuer.await_handoff("miss", "w", 0.05) is None


def test_leaving_the_queue_takes_the_place_away(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    token = issuer.try_acquire("leave", "h0", 30_000)
    assert isinstance(token, int)
    assert isinstance(issuer.try_acquire_queued("leave", "w", 30_000, 5000, False), Busy)
    assert isinstance(issuer.try_acquire_queued("leave", "w", 30_000, 0, True), Busy)
    assert redis_client.exists(*queue_keys("leave")) == 0
    assert issuer.release("leave", token, "h0")
    assert lease_of(redis_client, "leave") is None  # nobody left to hand it to


def test_a_waiter_that_times_out_leaves_no_place(redis_client: redis.Redis) -> None:
    holder = RedisFence(redis_client, "timeout", ttl=30)
    token = holder.acquire()
    with pytest.raises(fencing.AcquireTimeout):
        RedisFence(redis_client, "timeout").acquire(timeout=0.3)
    assert redis_client.exists(*queue_keys("timeout")) == 0
    holder.release(token)
    assert lease_of(redis_client, "timeout") is None


def test_a_cancelled_async_waiter_leaves_no_place(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        client = redis.asyncio.Redis(port=redis_server.port)
        try:
            holder = fencing.aio.RedisFence(client, "cancel", ttl=600)  # outlives any load
            token = await holder.acquire()
            waiter = asyncio.create_task(fencing.aio.RedisFence(client, "cancel").acquire())

            async def queued() -> bool:
                return bool(await client.llen(queue_keys("cancel")[0]) == 1)

            await await_until(queued, "the waiter queued")
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter

            async def left() -> bool:  # the cancelled waiter gives its place back
                return bool(await client.exists(*queue_keys("cancel")) == 0)

            await await_until(left, "the cancelled waiter left the queue")
            await holder.release(token)
            assert await client.get("fencing:{cancel}:lease") is None
        finally:
            await client.aclose()

    asyncio.run(scenario())


def test_keys_are_built_once_and_bounded() -> None:
    assert fence_keys("k") is fence_keys("k")
    assert fence_keys("k").wake("h") == b"fencing:{k}:wake:h"
    assert fence_keys("k").wake("\xe9") == b"fencing:{k}:wake:\xe9"  # latin-1: bytes kept
    assert fence_keys.cache_info().maxsize is not None


def test_blocked_waiter_is_woken_by_release_not_by_the_fallback(
    redis_client: redis.Redis,
) -> None:
    holder = RedisFence(redis_client, "prompt", ttl=30)
    token = holder.acquire()
    got: list[int] = []
    waiter = RedisFence(redis_client, "prompt", ttl=30)
    woken_only(waiter)  # its fallback would come after the test's patience
    thread = threading.Thread(target=lambda: got.append(waiter.acquire()), daemon=True)
    thread.start()
    queued(redis_client, queue_keys("prompt")[0])
    assert not got  # blocked
    holder.release(token)
    joined(thread)
    assert got and got[0] > token
    assert lease_of(redis_client, "prompt") == b"%d:" % got[0] + waiter._holders[got[0]].encode()


def test_two_waiters_are_each_woken_by_a_release(redis_client: redis.Redis) -> None:
    holder = RedisFence(redis_client, "two", ttl=30)
    token = holder.acquire()
    events: list[tuple[str, int]] = []
    guard = threading.Lock()

    def wait_hold_release() -> None:
        fence = RedisFence(redis_client, "two", ttl=30)
        woken_only(fence)  # only a release's hand-off can serve it within the patience
        got = fence.acquire()
        with guard:
            events.append(("got", got))
        with guard:
            events.append(("released", got))
        fence.release(got)

    threads = [threading.Thread(target=wait_hold_release, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    queued(redis_client, queue_keys("two")[0], waiters=2)
    assert not events  # both blocked
    holder.release(token)
    joined(*threads)
    kinds = [e[0] for e in events]
    assert kinds == ["got", "released", "got", "released"]  # never two holders at once
    first, second = events[0][1], events[2][1]
    assert token < first < second
    assert redis_client.exists(*queue_keys("two")) == 0  # both served, nobody left


def handed_over(client: redis.Redis, name: str, release: Callable[[], object]) -> FencedLock:
    """Block a ``FencedLock`` waiter on ``name`` (each wait ``NEVER``, longer than the
    test waits), then ``release``.

    Returns the waiter once it holds: served within the patience, so by the hand-off.
    """
    waiter: FencedLock = client.lock(
        name, timeout=30, sleep=NEVER, thread_local=False, lock_class=FencedLock
    )
    woke: list[bool] = []
    thread = threading.Thread(target=acquire_and_note, args=(waiter, woke), daemon=True)
    thread.start()
    queued(client, f"fencing:{{{name}}}:lock:queue")
    assert not woke
    release()
    joined(thread)
    assert woke == [True]
    return waiter


def test_fenced_lock_waiter_is_woken_by_release(redis_client: redis.Redis) -> None:
    holder = redis_client.lock("lockwake", timeout=30, lock_class=FencedLock)
    assert holder.acquire(blocking=False)
    waiter = handed_over(redis_client, "lockwake", holder.release)
    assert waiter.owned()
    waiter.release()


def test_async_waiter_is_woken_by_release(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    async def scenario() -> None:
        client = redis.asyncio.Redis(port=redis_server.port)
        try:
            holder = fencing.aio.RedisFence(client, "awake2", ttl=30)
            token = await holder.acquire()
            other = redis.asyncio.Redis(port=redis_server.port)
            waiter = fencing.aio.RedisFence(other, "awake2")
            woken_only(waiter)  # its fallback would come after the test's patience
            acquiring = asyncio.create_task(waiter.acquire())

            async def queued() -> bool:
                return bool(await client.llen(queue_keys("awake2")[0]) == 1)

            await await_until(queued, "the waiter queued")
            assert not acquiring.done()
            await holder.release(token)
            got = await asyncio.wait_for(acquiring, PATIENCE)
            assert got > token
            await waiter.release(got)
            await other.aclose()
        finally:
            await client.aclose()

    asyncio.run(scenario())


def test_a_waiter_taking_an_expired_lease_keeps_the_queue_served(
    redis_client: redis.Redis,
) -> None:
    issuer = RedisIssuer(redis_client)
    assert isinstance(issuer.try_acquire("expired", "h0", 100), int)  # a holder that dies
    for holder in ("a", "b"):
        assert isinstance(issuer.try_acquire_queued("expired", holder, 30_000, 60_000, False), Busy)
    lease = "fencing:{expired}:lease"
    wait_until(lambda: redis_client.exists(lease) == 0, "the dead holder's lease expires")
    token = issuer.try_acquire_queued("expired", "a", 30_000, 60_000, True)
    assert isinstance(token, int)
    assert lease_of(redis_client, "expired") == b"+%d:a" % token  # b still waits
    assert redis_client.lrange(queue_keys("expired")[0], 0, -1) == [b"b"]
    assert issuer.release("expired", token, "a")
    assert (lease_of(redis_client, "expired") or b"").endswith(b":b")


def test_a_lease_without_expiry_is_not_handed_over(redis_client: redis.Redis) -> None:
    holder = redis_client.lock("forever", timeout=None, lock_class=FencedLock)
    assert holder.acquire(blocking=False)
    waiter = redis_client.lock(
        "forever", timeout=None, sleep=0.05, thread_local=False, lock_class=FencedLock
    )
    redis_client.config_resetstat()
    woke: list[bool] = []
    thread = threading.Thread(target=acquire_and_note, args=(waiter, woke), daemon=True)
    thread.start()

    def attempts() -> int:
        return int(redis_client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))

    wait_until(lambda: attempts() >= 3, "the waiter tries several times")
    lock_queue = ("fencing:{forever}:lock:queue", "fencing:{forever}:lock:waiting")
    assert redis_client.exists(*lock_queue) == 0  # it polls, never queued
    holder.release()
    joined(thread)
    assert woke == [True] and waiter.owned()
    assert redis_client.pttl("forever") == -1  # still its own, no expiry
    waiter.release()
