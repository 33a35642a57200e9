"""Reentrant fences (issue 22): the owner's second acquire keeps the token and counts.

The contract (``test_reentrant_acquire_keeps_the_token_and_counts``) checks the promise
on every backend; these are the cases around it, on the memory issuer: no issuer call
on a reentrant acquire or a counted-down release, nested holds, a lost lease that
forgets its count, tasks as owners, every backend's constructor option, bad input.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
import redis
import redis.asyncio
from kazoo.client import KazooClient
from waiting import PATIENCE, joined

import fencing
import fencing.aio
from fencing.etcd import EtcdFence
from fencing.zookeeper import ZooKeeperFence


class Counting(fencing.MemoryIssuer):
    """The memory issuer, counting the calls a fence makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | fencing.Busy:
        self.calls += 1
        return super().try_acquire(name, holder, ttl_ms)

    def release(self, name: str, token: int, holder: str) -> bool:
        self.calls += 1
        return super().release(name, token, holder)


def test_reentrant_acquire_and_counted_release_ask_the_issuer_nothing() -> None:
    issuer = Counting()
    fence = fencing.MemoryFence("count", ttl=30, issuer=issuer, reentrant=True)
    token = fence.acquire()
    assert issuer.calls == 1
    for _ in range(100):
        assert fence.acquire(timeout=0) is token
    for _ in range(100):
        fence.release(token)
    assert issuer.calls == 1 and issuer.status("count").held
    fence.release(token)  # the last release ends the lease at the issuer
    assert issuer.calls == 2 and not issuer.status("count").held


def test_a_plain_fence_is_not_reentrant() -> None:
    fence = fencing.MemoryFence("plain", ttl=30, issuer=fencing.MemoryIssuer())
    assert fence.reentrant is False
    token = fence.acquire()
    with pytest.raises(fencing.AcquireTimeout):
        fence.acquire(timeout=0)
    fence.release(token)


def test_nested_holds_share_the_token_and_the_outer_one_releases() -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("nested", ttl=30, issuer=issuer, reentrant=True)
    with fence.hold() as outer:
        with fence.hold() as inner:
            assert inner == outer
        assert issuer.status("nested").held  # the inner hold only counted down
    assert not issuer.status("nested").held


def test_a_waiting_thread_gets_the_lease_after_the_last_release() -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("threads", ttl=30, issuer=issuer, reentrant=True)
    token = fence.acquire()
    fence.acquire()
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(fence.acquire(timeout=PATIENCE)))
    waiter.start()
    fence.release(token)
    assert issuer.status("threads").token == token  # one release of two: still ours
    fence.release(token)
    joined(waiter)
    assert got and got[0] > token


def test_a_lost_lease_forgets_its_count() -> None:
    """Once the lease is found lost (here by a renew), the owner's next acquire asks the
    issuer again and gets a newer token, rather than the lost one."""
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("lost", ttl=30, issuer=issuer, reentrant=True)
    token = fence.acquire()
    fence.acquire()
    issuer.force_release("lost")
    with pytest.raises(fencing.LeaseLost):
        fence.renew(token)
    with pytest.raises(fencing.LeaseLost):
        fence.release(token)
    newer = fence.acquire(timeout=0)
    assert newer > token
    fence.release(newer)


async def test_the_owner_is_the_task() -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.aio.MemoryFence("tasks", ttl=30, issuer=issuer, reentrant=True)
    token = await fence.acquire()
    assert await fence.acquire(timeout=0) is token
    with pytest.raises(fencing.AcquireTimeout):  # a child task is another owner
        await asyncio.wait_for(asyncio.create_task(fence.acquire(timeout=0)), PATIENCE)
    await fence.release(token)
    assert issuer.status("tasks").held
    await fence.release(token)
    assert not issuer.status("tasks").held
    async with fence.hold() as outer, fence.hold() as inner:
        assert inner == outer
    assert not issuer.status("tasks").held


def test_every_backend_takes_the_option(tmp_path: Path) -> None:
    """No I/O: the clients are never started or asked anything."""
    backend = fencing.connect(f"sqlite:///{tmp_path / 'f.db'}")
    fences: list[fencing.Fence | fencing.aio.Fence] = [
        backend.fence("a", 5, reentrant=True),
        backend.aio_fence("a", 5, reentrant=True),
        fencing.RedisFence(redis.Redis(port=1), "a", reentrant=True),
        fencing.aio.RedisFence(redis.asyncio.Redis(port=1), "a", reentrant=True),
        EtcdFence("etcd://127.0.0.1:1", "a", reentrant=True),
        ZooKeeperFence(KazooClient(hosts="127.0.0.1:1"), "a", reentrant=True),
        fencing.aio.MemoryFence("a", reentrant=True),
    ]
    assert all(fence.reentrant for fence in fences)
    assert not backend.fence("a").reentrant


@pytest.mark.parametrize("reentrant", [1, "yes", None])
def test_a_bad_reentrant_is_refused(reentrant: object) -> None:
    issuer = fencing.MemoryIssuer()
    with pytest.raises(TypeError):
        fencing.MemoryFence("bad", issuer=issuer, reentrant=reentrant)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fencing.aio.MemoryFence("bad", issuer=issuer, reentrant=reentrant)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fencing.Fence(issuer, "bad", reentrant=reentrant)  # type: ignore[arg-type]
