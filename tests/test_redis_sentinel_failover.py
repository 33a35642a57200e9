"""The failover proof (issue 10): a promoted replica that missed the last writes.

A real primary, one replica and three Sentinels (``fencing.testing.servers``). The
replica is frozen and cut off (docs/design.md, *Testing a failover that loses writes*),
tokens are issued on the primary, the primary is SIGKILLed, and Sentinel promotes the
replica. ``RedisFence``'s clock-floored tokens keep increasing across the failover; a
control counter that only ``INCR``s (what Redisson's ``RFencedLock`` does) goes back in
the same run, which shows that the test can fail.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

import pytest
import redis

import fencing
import fencing.aio
from fencing.redis._issuer import AsyncRedisIssuer, RedisIssuer
from fencing.redis._scripts import key_prefix, lease_key
from fencing.testing.servers import SentinelGroup

CONTROL = "control:incr-only-token"


def client_of(fence: fencing.Fence | fencing.aio.Fence) -> Any:
    """The redis-py client under a Redis fence (to close it)."""
    issuer = fence.issuer
    assert isinstance(issuer, (RedisIssuer, AsyncRedisIssuer))
    return issuer.client


def issue(fence: fencing.RedisFence, client: redis.Redis, n: int) -> tuple[list[int], list[int]]:
    """``n`` acquire/release cycles: the fence's tokens and the INCR-only control's."""
    tokens, control = [], []
    for _ in range(n):
        token = fence.acquire(timeout=0)
        fence.release(token)
        tokens.append(int(token))
        control.append(int(client.incr(CONTROL)))  # an INCR-only fence token, as Redisson's
    return tokens, control


def test_tokens_increase_across_a_failover_that_lost_writes(sentinel_group: SentinelGroup) -> None:
    group = sentinel_group
    primary = redis.Redis(port=group.primary.port, socket_timeout=5)
    name = "orders:7"
    counter = (key_prefix(name) + "counter").encode()
    synced, synced_control = issue(fencing.RedisFence(primary, name), primary, 3)
    assert primary.wait(1, 5000) == 1  # the replica has these

    group.freeze_replica()
    lost, lost_control = issue(fencing.RedisFence(primary, name), primary, 3)
    assert int(primary.get(counter) or 0) == lost[-1]
    # a hold taken now, through Sentinel: its lease never reaches the replica
    backend = fencing.connect(group.url + "?socket_timeout=1")
    doomed = backend.fence("doomed", ttl=8)
    hold, async_doomed = doomed.hold(timeout=0), AsyncHolder(backend, "async-doomed")
    with pytest.raises(fencing.LeaseLost, match="lost during hold"), hold, async_doomed:
        group.kill_primary()
        group.thaw_replica()
        group.wait_for_failover()
        assert group.primary_port() == group.replica.port
        deadline = time.monotonic() + 60
        while not (hold.lost and async_doomed.hold.lost):  # the renewals find no lease
            assert time.monotonic() < deadline, "a renewer did not report the lost lease"
            time.sleep(0.05)
    assert "LeaseLost" in async_doomed.outcome and "lost during hold" in async_doomed.outcome
    client_of(doomed).close()

    promoted = redis.Redis(port=group.replica.port, socket_timeout=5)
    # the promoted replica really missed the last writes: its counter is the last synced token
    assert int(promoted.get(counter) or 0) == synced[-1]
    after, after_control = issue(fencing.RedisFence(promoted, name), promoted, 3)
    before = synced + lost
    print(f"tokens before: {before}\ntokens after:  {after}")
    print(f"INCR-only before: {synced_control + lost_control}, after: {after_control}")
    assert min(after) > max(before)
    assert after == sorted(set(after))
    # the control: an INCR-only token repeats (or goes below) one issued before the failover
    assert after_control[0] <= max(lost_control)
    assert set(after_control) & set(lost_control)

    # what that means at the resource: the holder of the last token before the failover
    # writes, then the first holder after it does; a guard keeps them apart only when the
    # second token is higher
    mark = fencing.MemoryMark()
    write = fencing.guard(lambda: None, mark=mark, name="orders")
    write(max(before))
    write(after[0])
    with pytest.raises(fencing.StaleTokenError):
        write(max(before))  # the old holder, late: refused
    repeated = after_control[0]
    control_write = fencing.guard(lambda: None, mark=fencing.MemoryMark(), name="control")
    control_write(repeated)  # the pre-failover holder of INCR token `repeated`
    control_write(repeated)  # and the post-failover one: both accepted, two holders wrote


def test_a_fence_follows_a_failover(sentinel_group: SentinelGroup) -> None:
    """Through ``redis+sentinel://``: a call while the primary is frozen or dead raises
    ``FenceUnavailable`` (after one ``socket_timeout`` at most, never a hang); the call
    after the failover finds the new primary; ``hold()`` keeps a lease that survived."""
    group = sentinel_group
    backend = fencing.connect(group.url + "?socket_timeout=1")
    # leases of 20 s: they outlive a failover on a loaded machine, renewed every 6.7 s
    fence, other = backend.fence("survivor", ttl=20), backend.fence("bystander", ttl=20)
    replicated = fencing.connect(group.url + "?socket_timeout=1&min_replicas=1").fence("w")
    before = int(replicated.acquire(timeout=0))  # the replica acknowledged it
    replicated.release(before)
    promoted = redis.Redis(port=group.replica.port, socket_timeout=5)
    lease, async_lease = lease_key("survivor"), lease_key("async-survivor")
    async_side = AsyncHolder(backend, "async-survivor")
    with fence.hold(timeout=0) as token, async_side:
        deadline = time.monotonic() + 60
        while promoted.get(lease) is None or promoted.get(async_lease) is None:
            assert time.monotonic() < deadline  # replicated (asynchronously)
            time.sleep(0.01)

        group.judge_down_after(600_000)  # no failover while the dead primary is checked
        group.primary.freeze()
        with pytest.raises(fencing.FenceUnavailable) as frozen:
            other.acquire(timeout=0)
        # ended by the socket timeout (no hang, no retry loop)
        assert isinstance(frozen.value.__cause__, redis.exceptions.TimeoutError)
        group.kill_primary()
        with pytest.raises(fencing.FenceUnavailable):
            other.acquire(timeout=0)
        asyncio.run(_unavailable(backend))

        group.judge_down_after(group.down_after_ms)
        group.wait_for_failover()
        left = promoted.pttl(lease), promoted.pttl(async_lease)
        deadline = time.monotonic() + 60
        while promoted.pttl(lease) <= left[0] or promoted.pttl(async_lease) <= left[1]:
            # the renewer thread and the renewal task renewed on the new primary
            assert time.monotonic() < deadline, "no renewal reached the new primary"
            time.sleep(0.05)
        assert cast(bytes, promoted.get(lease)).startswith(b"%d:" % int(token))
        after = int(other.acquire(timeout=5))  # the next call finds the new primary
        assert after > before
        other.release(after)
        asyncio.run(_available(backend))
        # the new primary has no replica left: a lease that needs one is refused
        with pytest.raises(fencing.NotReplicated, match="0 of 1"):
            replicated.acquire(timeout=0)
    # leaving the holds released the leases on the new primary: they survived the failover
    assert promoted.get(lease) is None and promoted.get(async_lease) is None
    assert async_side.outcome == "released", async_side.outcome
    for client in (client_of(fence), client_of(replicated), promoted):
        client.close()


class AsyncHolder:
    """An asyncio ``hold()`` on its own event loop in a thread, through the failover:
    entering starts it and returns once the lease is held; leaving ends the hold and
    keeps how it ended in ``outcome`` ("released", or the error)."""

    def __init__(self, backend: fencing._connect.Backend, name: str) -> None:
        self.fence = backend.aio_fence(name, ttl=20)
        self.hold = self.fence.hold(timeout=0)
        self.held, self.done = threading.Event(), threading.Event()
        self.outcome = "not run"
        self.thread = threading.Thread(target=lambda: asyncio.run(self._hold()))

    async def _hold(self) -> None:
        try:
            async with self.hold:
                self.held.set()
                while not self.done.is_set():
                    await asyncio.sleep(0.02)
            self.outcome = "released"
        except Exception as exc:  # reported by the test
            self.outcome = repr(exc)
        finally:
            self.held.set()
            await self.fence.aclose()

    def __enter__(self) -> None:
        self.thread.start()
        assert self.held.wait(10)

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(15)


async def _unavailable(backend: fencing._connect.Backend) -> None:
    fence = backend.aio_fence("async-bystander")
    with pytest.raises(fencing.FenceUnavailable):
        await fence.acquire(timeout=0)
    await fence.aclose()


async def _available(backend: fencing._connect.Backend) -> None:
    fence = backend.aio_fence("async-bystander")
    await fence.release(await fence.acquire(timeout=5))
    await fence.aclose()
