"""A Redis read-write lock's release hands the lock to the writer marked waiting, as a
fence's release hands its lease to its queued waiter (``RW_RELEASE``'s ``hand_over``):
the writer takes the token from the release stream's entry, with no acquire script of
its own; a writer that gave up gets the lease back from its leaving attempt (so its
acquire gives it back); a marker that has expired is handed nothing.

The scripts are driven through the real ``RedisIssuer``'s read-write operations, the
hand-off itself through ``RWLock`` (its writer waiting in a thread).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

import fencing
import fencing.aio
from fencing import Busy, FenceToken
from fencing.issuer import READ, WRITE
from fencing.redis import RedisIssuer
from fencing.redis._rwlock_scripts import rw_keys
from fencing.redis.aio import RedisIssuer as AsyncRedisIssuer
from fencing.testing.servers import RedisServer

pytestmark = pytest.mark.timeout(120)

PATIENCE = 30.0  # seconds
LONG = 60_000  # ms: no lease or marker here ends by itself during a test


class Counting:
    """A ``RedisIssuer`` that counts its write acquires (``RW_ACQUIRE`` scripts)."""

    def __init__(self, issuer: RedisIssuer) -> None:
        self.issuer = issuer
        self.write_acquires = 0

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.issuer, attribute)

    def rw_acquire(self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int) -> Any:
        if mode == WRITE:
            self.write_acquires += 1
        return self.issuer.rw_acquire(name, mode, holder, ttl_ms, queue_ms)


@pytest.fixture
def issuer(redis_server: RedisServer) -> Iterator[RedisIssuer]:
    client = redis.Redis(port=redis_server.port, socket_timeout=300)
    yield RedisIssuer(client)
    client.close()


def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_the_last_readers_release_hands_the_lock_to_the_waiting_writer(
    issuer: RedisIssuer,
) -> None:
    counting = Counting(issuer)
    rw = fencing.RWLock(counting, "rw-handoff", ttl=60)
    rw.write._waiting.max_block = 120.0  # only the release can end the wait early
    read = rw.read.acquire(timeout=0)
    got: list[FenceToken] = []
    writer = threading.Thread(target=lambda: got.append(rw.write.acquire(timeout=120)))
    writer.start()
    until(lambda: issuer.rw_status("rw-handoff").waiting is not None, "the writer waits")
    attempts = counting.write_acquires
    rw.read.release(read)
    writer.join(PATIENCE)
    assert got, "the writer was not woken"
    assert got[0] > read  # a new token, above the epoch
    assert counting.write_acquires == attempts  # taken from the release: no acquire
    rw.write.release(got[0])  # held: a lost lease would raise LeaseLost
    # the control: with no writer waiting, a release hands nothing over
    read = rw.read.acquire(timeout=0)
    rw.read.release(read)
    assert not issuer.rw_status("rw-handoff").held


def test_a_writers_release_hands_the_lock_to_the_marked_writer(issuer: RedisIssuer) -> None:
    name = "rw-handoff-writers"
    first = issuer.rw_acquire(name, WRITE, "w0", LONG, 0)
    assert isinstance(first, int)
    assert isinstance(issuer.rw_acquire(name, WRITE, "w1", 7_000, LONG), Busy)  # marked
    assert issuer.rw_release(name, WRITE, first, "w0")
    status = issuer.rw_status(name)
    assert (status.mode, list(status.holders), status.waiting) == (WRITE, ["w1"], None)
    assert status.token is not None and status.token > first
    left = status.holders["w1"]
    assert left is not None and left <= 7.0  # the ttl the waiter asked for


def test_a_writer_that_gave_up_gets_the_handed_lease_from_its_leaving_attempt(
    issuer: RedisIssuer,
) -> None:
    name = "rw-handoff-left"
    epoch = issuer.rw_acquire(name, READ, "r1", LONG, 0)
    assert isinstance(epoch, int)
    assert isinstance(issuer.rw_acquire(name, WRITE, "w1", LONG, LONG), Busy)
    assert issuer.rw_release(name, READ, epoch, "r1")  # hands the lock to w1
    assert isinstance(issuer.rw_acquire(name, WRITE, "w2", LONG, 0), Busy)
    assert isinstance(issuer.rw_acquire(name, READ, "r2", LONG, 0), Busy)
    # w1's leaving attempt (queue 0, as the fence's leave_queue) returns its lease,
    # which its acquire then releases
    token = issuer.rw_acquire(name, WRITE, "w1", LONG, 0)
    assert isinstance(token, int) and token > epoch
    assert issuer.rw_release(name, WRITE, token, "w1")
    reread = issuer.rw_acquire(name, READ, "r2", LONG, 0)
    assert isinstance(reread, int) and reread > token


def test_an_expired_marker_is_handed_nothing(issuer: RedisIssuer) -> None:
    name = "rw-handoff-expired"
    epoch = issuer.rw_acquire(name, READ, "r1", LONG, 0)
    assert isinstance(epoch, int)
    assert isinstance(issuer.rw_acquire(name, WRITE, "w1", LONG, 1), Busy)  # marked 1 ms
    until(lambda: issuer.rw_status(name).waiting is None, "the marker expires")
    assert issuer.rw_release(name, READ, epoch, "r1")
    assert not issuer.rw_status(name).held


def test_a_marker_without_its_own_ttl_is_handed_nothing(
    issuer: RedisIssuer, redis_client: redis.Redis
) -> None:
    """A marker an older ``RW_ACQUIRE`` set (no ``waiting_ttl``, or one left by another
    writer's marker): its writer would not look for a hand-off, so none is made."""
    name = "rw-handoff-old-marker"
    epoch = issuer.rw_acquire(name, READ, "r1", LONG, 0)
    assert isinstance(epoch, int)
    assert isinstance(issuer.rw_acquire(name, WRITE, "w0", LONG, LONG), Busy)
    lock = rw_keys(name).lock
    redis_client.hset(lock, "waiting", "w1")  # w1 re-marked by an older script
    assert issuer.rw_release(name, READ, epoch, "r1")
    assert not issuer.rw_status(name).held
    redis_client.hdel(lock, "waiting_ttl")  # and a marker with no ttl at all
    written = issuer.rw_acquire(name, WRITE, "w2", LONG, 0)  # free: another writer takes it
    assert isinstance(written, int)
    assert issuer.rw_release(name, WRITE, written, "w2")
    assert not issuer.rw_status(name).held


class AsyncCounting:
    """``Counting`` over an asyncio ``RedisIssuer``."""

    def __init__(self, issuer: AsyncRedisIssuer) -> None:
        self.issuer = issuer
        self.write_acquires = 0

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.issuer, attribute)

    async def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> Any:
        if mode == WRITE:
            self.write_acquires += 1
        return await self.issuer.rw_acquire(name, mode, holder, ttl_ms, queue_ms)


async def test_the_asyncio_writer_takes_the_handed_lock_too(
    redis_server: RedisServer, issuer: RedisIssuer
) -> None:
    client = aioredis.Redis(port=redis_server.port, socket_timeout=300)
    counting = AsyncCounting(AsyncRedisIssuer(client))
    rw = fencing.aio.RWLock(counting, "rw-handoff-aio", ttl=60)
    rw.write._waiting.max_block = 120.0
    try:
        read = await rw.read.acquire(timeout=0)
        writer = asyncio.create_task(rw.write.acquire(timeout=120))
        deadline = time.monotonic() + PATIENCE
        while issuer.rw_status("rw-handoff-aio").waiting is None:  # the blocking issuer's
            assert time.monotonic() < deadline, "never: the writer waits"
            await asyncio.sleep(0.01)
        attempts = counting.write_acquires
        await rw.read.release(read)
        written = await asyncio.wait_for(writer, PATIENCE)
        assert written > read
        assert counting.write_acquires == attempts  # taken from the release: no acquire
        await rw.write.release(written)
    finally:
        await client.aclose()
