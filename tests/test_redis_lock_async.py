"""``fencing.aio.FencedLock``: redis-py's asyncio ``Lock`` API plus fence tokens, and safe
under task cancellation.

redis-py's own asyncio lock tests run against it in ``scripts/peer-suite.sh``. Here: the
fence token, the keys shared with the blocking lock, the hand-off, and cancellation at
many points of ``release`` (redis-py#3847: a cancelled release must not leave the lock
held) and of ``acquire`` (a cancelled acquire must not leave the lock held, or a place
in the queue that a release would hand the lock to).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis
import redis.asyncio
import redis.asyncio.lock
from fail_fast import failing_fast_async
from waiting import NEVER, PATIENCE, await_until, joined

import fencing
import fencing.aio
import fencing.redis.aio
from fencing.testing.servers import RedisServer, free_port

NAME = "invoice:9"
QUEUE = ("fencing:{invoice:9}:lock:queue", "fencing:{invoice:9}:lock:waiting")
#: Cancel after this many turns of the event loop, for each count up to it: from before
#: the call started to after it finished, through every await in between.
TURNS = 40
#: LOST: on CPython 3.11, ``asyncio.wait_for`` swallows a cancellation that arrives as
#: the awaited call completes (fixed in 3.12), and redis-py sends every command through
#: it: the task goes on as if never cancelled (seen with a bare ``get`` loop too). So a
#: test cancels again, at the next turns, until the cancellation lands.


@pytest_asyncio.fixture
async def aclient(
    redis_client: redis.Redis, redis_server: RedisServer
) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis(port=redis_server.port)
    yield client
    await client.aclose()


def alock(client: redis.asyncio.Redis, **kwargs: object) -> fencing.aio.FencedLock:
    made = client.lock(NAME, lock_class=fencing.aio.FencedLock, **kwargs)  # type: ignore[arg-type]
    assert isinstance(made, fencing.aio.FencedLock)
    assert isinstance(made, redis.asyncio.lock.Lock)
    return made


def test_exported_from_fencing_aio_and_fencing_redis_aio() -> None:
    assert fencing.aio.FencedLock is fencing.redis.aio.FencedLock
    assert "FencedLock" in fencing.aio.__all__ and "FencedLock" in fencing.redis.aio.__all__


async def test_acquire_release_and_fence_token(
    aclient: redis.asyncio.Redis, redis_client: redis.Redis
) -> None:
    first = alock(aclient, timeout=10)
    assert first.fence_token is None and not await first.locked()
    assert await first.acquire(blocking=False)
    token = first.fence_token
    assert isinstance(token, fencing.FenceToken) and token.name == NAME
    assert await aclient.get(NAME) == first.local.token and await first.owned()
    blocking = redis_client.lock(NAME, timeout=10, lock_class=fencing.FencedLock)
    assert blocking.acquire(blocking=False) is False  # one lease for both kinds
    await first.release()
    assert first.fence_token is None and await aclient.get(NAME) is None
    assert blocking.acquire(blocking=False)
    assert blocking.fence_token is not None and blocking.fence_token > token
    assert not await alock(aclient).acquire(blocking=False)
    second = blocking.fence_token
    blocking.release()
    async with alock(aclient, timeout=10) as entered:
        assert entered.fence_token is not None and entered.fence_token > second


async def test_a_waiter_is_handed_the_lock_by_a_release(
    aclient: redis.asyncio.Redis, redis_client: redis.Redis
) -> None:
    holder = redis_client.lock(NAME, timeout=30, thread_local=False, lock_class=fencing.FencedLock)
    assert holder.acquire(blocking=False)
    # a poller would sleep longer than the test waits: only the release can serve it
    waiter = alock(aclient, timeout=30, sleep=NEVER)
    acquiring = asyncio.create_task(waiter.acquire())

    async def queued() -> bool:
        return bool(await aclient.exists(QUEUE[0]))

    await await_until(queued, "the waiter queues")
    await asyncio.to_thread(holder.release)
    assert await asyncio.wait_for(acquiring, PATIENCE) is True
    assert waiter.fence_token is not None and holder.fence_token is None
    await waiter.release()


async def _cancel_after(turns: int, call: asyncio.Task[object]) -> bool:
    """Cancel ``call`` after ``turns`` turns of the loop (again while it runs on: see
    LOST); True if it ended cancelled, False if it finished first."""
    for _ in range(turns):
        await asyncio.sleep(0)
    while not call.done():
        call.cancel()
        await asyncio.sleep(0)
    with contextlib.suppress(asyncio.CancelledError):
        await call
    return call.cancelled()


async def test_a_cancelled_release_never_leaves_the_lock_held(
    aclient: redis.asyncio.Redis,
) -> None:
    mid_call = 0
    for turns in range(TURNS):
        lock = alock(aclient, timeout=30)
        assert await lock.acquire(blocking=False)
        release = asyncio.create_task(lock.release())
        cancelled = await _cancel_after(turns, release)
        if lock.local.token is not None:  # cancelled before it began: still ours, retry
            assert turns == 0 and cancelled and await lock.owned()
            await lock.release()
        elif cancelled:
            mid_call += 1
        assert await aclient.get(NAME) is None, f"held after a cancel at turn {turns}"
        assert lock.fence_token is None
    assert mid_call > 0  # some cancellations did land in the middle of the release


async def test_a_release_cancelled_again_and_again_still_finishes(
    aclient: redis.asyncio.Redis,
) -> None:
    lock = alock(aclient, timeout=30)
    assert await lock.acquire(blocking=False)
    release = asyncio.create_task(lock.release())
    await asyncio.sleep(0)  # started: its script call is under way
    for _ in range(5):
        release.cancel()
        await asyncio.sleep(0)
    with pytest.raises(asyncio.CancelledError):
        await release
    assert await aclient.get(NAME) is None and lock.local.token is None


async def test_a_cancelled_acquire_leaves_no_lock_and_no_place_in_the_queue(
    aclient: redis.asyncio.Redis, redis_client: redis.Redis
) -> None:
    for turns in range(TURNS):  # uncontended: the lock may be taken by a lost reply
        lock = alock(aclient, timeout=30)
        acquire = asyncio.create_task(lock.acquire())
        if not await _cancel_after(turns, acquire):
            assert acquire.result() is True
            await lock.release()
        assert await aclient.get(NAME) is None, f"held after a cancel at turn {turns}"
    holder = redis_client.lock(NAME, timeout=30, lock_class=fencing.FencedLock)
    for turns in range(TURNS):  # contended: the waiter queues, then is cancelled
        assert holder.acquire(blocking=False)
        waiter = alock(aclient, timeout=30)
        acquire = asyncio.create_task(waiter.acquire())
        assert await _cancel_after(turns, acquire), (turns, acquire)
        assert await aclient.exists(*QUEUE) == 0, f"queued after a cancel at turn {turns}"
        holder.release()  # nobody to hand it to
        assert await aclient.get(NAME) is None


async def test_no_timeout_polls_every_sleep_and_never_queues(
    aclient: redis.asyncio.Redis, redis_client: redis.Redis
) -> None:
    holder = redis_client.lock(NAME, thread_local=False, lock_class=fencing.FencedLock)
    assert holder.acquire(blocking=False)
    waiter = alock(aclient, sleep=0.02)
    await aclient.config_resetstat()
    acquiring = asyncio.create_task(waiter.acquire())

    async def polled() -> bool:  # several attempts made
        stats = await aclient.info("commandstats")
        return int(stats.get("cmdstat_evalsha", {}).get("calls", 0)) >= 3

    await await_until(polled, "the waiter tries several times")
    assert not acquiring.done() and await aclient.exists(*QUEUE) == 0
    await asyncio.to_thread(holder.release)
    assert await asyncio.wait_for(acquiring, PATIENCE) is True
    assert await aclient.pttl(NAME) == -1
    await waiter.release()


async def test_bad_input_is_refused_before_any_io() -> None:
    client = failing_fast_async(free_port(), 0.2)
    with pytest.raises(TypeError):
        fencing.aio.FencedLock(redis.Redis(), "x")  # a blocking client
    with pytest.raises(TypeError):
        client.lock(b"bytes", lock_class=fencing.aio.FencedLock)
    for kwargs in ({"timeout": -1}, {"sleep": float("nan")}, {"blocking_timeout": -2}):
        with pytest.raises(ValueError):
            client.lock("x", lock_class=fencing.aio.FencedLock, **kwargs)
    made = alock(client, timeout=5)
    with pytest.raises(ValueError):
        await made.acquire(blocking_timeout=-1)
    with pytest.raises(redis.exceptions.ConnectionError):  # only now does it do I/O
        await made.acquire(blocking=False)
    await client.aclose()


def test_threads_see_their_own_tokens(redis_client: redis.Redis, redis_server: RedisServer) -> None:
    async def take(lock: fencing.aio.FencedLock) -> object:
        assert await lock.acquire(blocking=False)
        seen: list[object] = []
        worker = threading.Thread(target=lambda: seen.append(lock.fence_token))
        worker.start()
        joined(worker)
        await lock.release()
        return seen[0]

    async def scenario() -> object:
        client = redis.asyncio.Redis(port=redis_server.port)
        try:
            return await take(alock(client, timeout=5))
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) is None  # thread_local: another thread sees nothing
