"""``FencedLock(..., reentrant=True)`` and its asyncio twin (issue 22, reentrancy).

The owner's second acquire returns True with the same fence token and counts; each
release counts down; the lock ends in Redis with the last. Another owner (a thread, a
task, another lock object) waits as usual. A non-reentrant lock is redis-py's.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis
import redis.asyncio
from redis.exceptions import LockError, LockNotOwnedError
from waiting import joined

import fencing
import fencing.aio
from fencing.testing.servers import RedisServer

NAME = "ledger:7"


def test_reentrant_acquire_keeps_the_token_counts_and_ends_at_zero(
    redis_client: redis.Redis,
) -> None:
    # redis-py's lock() passes no extra keyword: a partial carries reentrant=True
    lock_class = functools.partial(fencing.FencedLock, reentrant=True)
    lock = redis_client.lock(NAME, timeout=30, lock_class=lock_class)
    assert isinstance(lock, fencing.FencedLock) and lock.reentrant
    assert lock.acquire(blocking=False)
    token, held = lock.fence_token, redis_client.get(NAME)
    with lock:  # the same owner: True at once, the same token, the same lease
        assert lock.acquire(blocking=False) is True
        assert lock.fence_token == token and redis_client.get(NAME) == held
        assert lock.local.depth == 3
        lock.release()
    assert lock.local.depth == 1 and lock.owned() and lock.fence_token == token
    lock.release()  # the last one: the lease ends in Redis
    assert lock.fence_token is None and not lock.locked()
    with pytest.raises(LockError):
        lock.release()
    assert lock.acquire(blocking=False)  # a new lease, a higher token
    assert token is not None and lock.fence_token is not None and lock.fence_token > token
    lock.release()


def test_other_owners_wait_as_usual(redis_client: redis.Redis) -> None:
    lock = fencing.FencedLock(redis_client, NAME, timeout=30, reentrant=True)
    other = fencing.FencedLock(redis_client, NAME, timeout=30, reentrant=True)
    assert lock.acquire(blocking=False) and lock.acquire(blocking=False)
    assert other.acquire(blocking=False) is False  # another object
    answers: list[bool] = []
    thread = threading.Thread(target=lambda: answers.append(lock.acquire(blocking=False)))
    thread.start()
    joined(thread)
    assert answers == [False]  # another thread, the same object (thread-local token)

    shared = fencing.FencedLock(
        redis_client, "ledger:8", timeout=30, reentrant=True, thread_local=False
    )
    assert shared.acquire(blocking=False)
    thread = threading.Thread(target=lambda: answers.append(shared.acquire(blocking=False)))
    thread.start()
    joined(thread)
    assert answers == [False, False]  # thread_local=False: the owner is still the thread
    assert shared.local.depth == 1
    shared.release()
    lock.release()
    lock.release()
    assert other.acquire(blocking=False)
    other.release()


def test_not_reentrant_by_default_and_a_bool_only(redis_client: redis.Redis) -> None:
    lock = redis_client.lock(NAME, timeout=30, lock_class=fencing.FencedLock)
    assert not lock.reentrant
    assert lock.acquire(blocking=False) and lock.acquire(blocking=False) is False
    lock.release()
    with pytest.raises(TypeError, match="reentrant must be a bool"):
        fencing.FencedLock(redis_client, NAME, reentrant=1)


def test_a_lock_found_lost_forgets_its_count(redis_client: redis.Redis) -> None:
    lock = fencing.FencedLock(redis_client, NAME, timeout=30, reentrant=True)
    assert lock.acquire(blocking=False) and lock.acquire(blocking=False)
    token = lock.fence_token
    redis_client.delete(NAME)  # the lease ended behind its back
    with pytest.raises(LockNotOwnedError):
        lock.extend(5)
    assert lock.fence_token is None and lock.local.depth == 0
    assert lock.acquire(blocking=False)  # asks Redis: a new lease, a higher token
    assert token is not None and lock.fence_token is not None and lock.fence_token > token
    lock.release()


@pytest_asyncio.fixture
async def aclient(redis_server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis(port=redis_server.port)
    await client.flushall()
    yield client
    await client.aclose()


async def test_async_reentrant_owner_is_the_task(aclient: redis.asyncio.Redis) -> None:
    lock_class = functools.partial(fencing.aio.FencedLock, reentrant=True)
    lock = aclient.lock(NAME, timeout=30, lock_class=lock_class)  # type: ignore[arg-type]
    assert isinstance(lock, fencing.aio.FencedLock)
    async with lock:
        token = lock.fence_token
        async with lock:  # the same task: the same token, counted
            assert lock.fence_token == token and lock.local.depth == 2
            # another task on the same object waits as usual
            assert await asyncio.create_task(lock.acquire(blocking=False)) is False
        assert await lock.owned() and lock.local.depth == 1
    assert lock.fence_token is None and not await lock.locked()
    with pytest.raises(TypeError, match="reentrant must be a bool"):
        fencing.aio.FencedLock(aclient, NAME, reentrant="yes")


async def test_async_lock_found_lost_forgets_its_count(aclient: redis.asyncio.Redis) -> None:
    lock = fencing.aio.FencedLock(aclient, NAME, timeout=30, reentrant=True)
    assert await lock.acquire(blocking=False) and await lock.acquire(blocking=False)
    token = lock.fence_token
    await aclient.delete(NAME)
    with pytest.raises(LockNotOwnedError):
        await lock.reacquire()
    assert lock.fence_token is None and lock.local.depth == 0
    assert await lock.acquire(blocking=False)
    assert token is not None and lock.fence_token is not None and lock.fence_token > token
    await lock.release()
