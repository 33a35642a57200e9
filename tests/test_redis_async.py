"""fencing.aio.RedisFence on redis.asyncio: the sync tests' twins, plus sync/async sharing.

What every issuer promises is the contract's (tests/test_contract_issuers.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis
import redis.asyncio
from fail_fast import failing_fast_async

import fencing
import fencing.aio
from fencing.issuer import Busy
from fencing.redis._issuer import AsyncRedisIssuer
from fencing.testing.servers import RedisServer, free_port


@pytest.fixture
async def aclient(
    redis_client: redis.Redis, redis_server: RedisServer
) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis(port=redis_server.port)
    yield client
    await client.aclose()


def lease_key(name: str) -> str:
    return f"fencing:{{{name}}}:lease"


async def test_acquire_renew_release_and_busy(aclient: redis.asyncio.Redis) -> None:
    fence = fencing.aio.RedisFence(aclient, "a:1", ttl=5)
    assert isinstance(fence, fencing.AsyncFence)
    token = await fence.acquire()
    assert isinstance(token, fencing.FenceToken) and token.name == "a:1"
    busy = await AsyncRedisIssuer(aclient).try_acquire("a:1", "other", 1000)
    assert isinstance(busy, Busy) and busy.expires_in is not None and 0 < busy.expires_in <= 5
    with pytest.raises(fencing.AcquireTimeout):
        await fencing.aio.RedisFence(aclient, "a:1").acquire(timeout=0.1)
    await fence.renew(token, ttl=8)
    assert 5000 < await aclient.pttl(lease_key("a:1")) <= 8000
    await fence.release(token)
    assert await fence.acquire(timeout=0) > token


async def test_shares_keys_and_counter_with_sync_fence(
    aclient: redis.asyncio.Redis, redis_client: redis.Redis
) -> None:
    sync = fencing.RedisFence(redis_client, "shared", ttl=5)
    afence = fencing.aio.RedisFence(aclient, "shared", ttl=5)
    first = sync.acquire()
    with pytest.raises(fencing.AcquireTimeout):
        await afence.acquire(timeout=0)
    sync.release(first)
    second = await afence.acquire(timeout=0)
    await afence.release(second)
    assert first < second < sync.acquire(timeout=0)


async def test_script_flush_and_flushall(aclient: redis.asyncio.Redis) -> None:
    fence = fencing.aio.RedisFence(aclient, "flush", ttl=5)
    last = 0
    for _ in range(3):
        await aclient.script_flush()
        token = await fence.acquire()
        await aclient.script_flush()
        await fence.renew(token)
        await aclient.script_flush()
        await fence.release(token)
        await aclient.flushall()
        assert token > last
        last = token


async def test_hold_renews_in_a_task_and_reports_loss(aclient: redis.asyncio.Redis) -> None:
    fence = fencing.aio.RedisFence(aclient, "ahold", ttl=0.3)
    hold = fence.hold()
    async with hold as token:
        await asyncio.sleep(1.0)  # > 3 ttls
        assert not hold.lost
        value = await aclient.get(lease_key("ahold"))
        assert isinstance(value, bytes) and value.startswith(b"%d:" % token)
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost):
        async with hold:
            await aclient.delete(lease_key("ahold"))
            deadline = time.monotonic() + 10
            while not hold.lost and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert hold.lost


async def test_waiter_tasks_are_handed_the_lease_in_turn(aclient: redis.asyncio.Redis) -> None:
    holder = fencing.aio.RedisFence(aclient, "awake", ttl=30)
    token = await holder.acquire()
    first = fencing.aio.RedisFence(aclient, "awake", ttl=30)
    second = fencing.aio.RedisFence(aclient, "awake", ttl=30)
    one = asyncio.create_task(first.acquire(timeout=20))
    await asyncio.sleep(0.1)
    two = asyncio.create_task(second.acquire(timeout=20))
    await asyncio.sleep(0.2)
    assert not one.done() and not two.done()
    started = time.monotonic()
    await holder.release(token)
    got = await asyncio.wait_for(one, 15)
    assert got > token and not two.done()
    await first.release(got)
    assert await asyncio.wait_for(two, 15) > got
    await second.release(await two)
    assert time.monotonic() - started < 15


async def test_unavailable_server_then_back(redis_factory: Callable[..., RedisServer]) -> None:
    server = redis_factory()
    client = failing_fast_async(server.port)
    fence = fencing.aio.RedisFence(client, "adown", ttl=30)
    token = await fence.acquire()
    server.stop()
    with pytest.raises(fencing.FenceUnavailable) as info:
        await fence.acquire(timeout=0)
    assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
    server.start()
    assert await fence.acquire(timeout=0) > token
    server.freeze()
    try:
        with pytest.raises(fencing.FenceUnavailable):
            await fence.acquire(timeout=0)
    finally:
        server.thaw()
    await client.aclose()


async def test_bad_input_is_refused_before_any_io() -> None:
    client = failing_fast_async(free_port(), 0.2)
    with pytest.raises(TypeError):
        fencing.aio.RedisFence(redis.Redis(port=1), "x")  # type: ignore[arg-type]  # a sync client
    with pytest.raises(TypeError):
        fencing.aio.RedisFence(client, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fencing.aio.RedisFence(client, "x", ttl=0)
    with pytest.raises(ValueError):
        fencing.aio.RedisFence(client, "x", counter_idle=-5)
    fence = fencing.aio.RedisFence(client, "x")
    with pytest.raises(ValueError):
        await fence.acquire(timeout=-1)
    with pytest.raises(TypeError):
        await fence.release(True)
    with pytest.raises(fencing.FenceUnavailable):
        await fence.acquire(timeout=0)
    await client.aclose()
