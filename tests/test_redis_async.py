"""fencing.aio.RedisFence on redis.asyncio: the sync tests' twins, plus sync/async sharing.

What every issuer promises is the contract's (tests/test_contract_issuers.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis
import redis.asyncio
from fail_fast import failing_fast_async
from waiting import PATIENCE, await_until, woken_only

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
    fence = fencing.aio.RedisFence(aclient, "a:1", ttl=30)
    assert isinstance(fence, fencing.aio.Fence)
    token = await fence.acquire()
    assert isinstance(token, fencing.FenceToken) and token.name == "a:1"
    busy = await AsyncRedisIssuer(aclient).try_acquire("a:1", "other", 1000)
    assert isinstance(busy, Busy) and busy.expires_in is not None and 0 < busy.expires_in <= 30
    with pytest.raises(fencing.AcquireTimeout):
        await fencing.aio.RedisFence(aclient, "a:1").acquire(timeout=0.1)
    await fence.renew(token, ttl=120)
    assert 60_000 < await aclient.pttl(lease_key("a:1")) <= 120_000  # the renewal's ttl
    await fence.release(token)
    assert await fence.acquire(timeout=0) > token


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
    fence = fencing.aio.RedisFence(aclient, "ahold", ttl=5)
    lease = lease_key("ahold")
    hold = fence.hold()
    async with hold as token:
        renewals, last = 0, await aclient.pttl(lease)

        async def renewed_twice() -> bool:
            nonlocal renewals, last
            left = await aclient.pttl(lease)
            renewals += left > last  # only a renewal moves the expiry later
            last = left
            return renewals >= 2

        await await_until(renewed_twice, "the renewal task renews the lease twice")
        assert not hold.lost
        value = await aclient.get(lease)
        assert isinstance(value, bytes) and value.startswith(b"%d:" % token)
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost):
        async with hold:
            await aclient.delete(lease)

            async def lost() -> bool:
                return hold.lost

            await await_until(lost, "the renewal finds the lease lost")


async def test_waiter_tasks_are_handed_the_lease_in_turn(aclient: redis.asyncio.Redis) -> None:
    holder = fencing.aio.RedisFence(aclient, "awake", ttl=30)
    token = await holder.acquire()
    first = fencing.aio.RedisFence(aclient, "awake", ttl=30)
    second = fencing.aio.RedisFence(aclient, "awake", ttl=30)
    woken_only(first)  # each blocks longer than the test waits: only a hand-off serves it
    woken_only(second)

    def queued(waiters: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return bool(await aclient.llen("fencing:{awake}:queue") == waiters)

        return check

    one = asyncio.create_task(first.acquire())
    await await_until(queued(1), "the first waiter queued")
    two = asyncio.create_task(second.acquire())
    await await_until(queued(2), "the second waiter queued behind it")
    assert not one.done() and not two.done()
    await holder.release(token)
    got = await asyncio.wait_for(one, PATIENCE)
    assert got > token and not two.done()
    await first.release(got)
    assert await asyncio.wait_for(two, PATIENCE) > got
    await second.release(await two)


async def test_unavailable_server_then_back(redis_factory: Callable[..., RedisServer]) -> None:
    server = redis_factory()
    client = failing_fast_async(server.port, 1.0)
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
