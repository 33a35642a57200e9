"""MemoryFence: the in-process issuer has real lease and token semantics."""

from __future__ import annotations

import threading
import time

import pytest

import fencing
from fencing import MemoryIssuer


def test_tokens_increase_across_release_and_expiry() -> None:
    fence = fencing.MemoryFence("m:1", ttl=0.05, issuer=MemoryIssuer())
    first = fence.acquire()
    fence.release(first)
    second = fence.acquire()
    time.sleep(0.08)  # let it expire
    third = fence.acquire(timeout=0)
    assert first < second < third
    assert isinstance(third, fencing.FenceToken) and third.name == "m:1"


def test_lease_is_exclusive_and_timeout_zero_tries_once() -> None:
    issuer = MemoryIssuer()
    holder = fencing.MemoryFence("m:2", ttl=5, issuer=issuer)
    other = fencing.MemoryFence("m:2", ttl=5, issuer=issuer)
    token = holder.acquire()
    with pytest.raises(fencing.AcquireTimeout):
        other.acquire(timeout=0)
    started = time.monotonic()
    with pytest.raises(fencing.AcquireTimeout):
        other.acquire(timeout=0.1)
    assert time.monotonic() - started >= 0.1
    holder.release(token)
    assert other.acquire(timeout=0) > token


def test_waiter_is_woken_by_release() -> None:
    issuer = MemoryIssuer()
    fence = fencing.MemoryFence("m:3", ttl=30, issuer=issuer)
    token = fence.acquire()
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(fence.acquire(timeout=10)))
    waiter.start()
    time.sleep(0.05)
    assert not got
    fence.release(token)
    waiter.join(2)
    assert got and got[0] > token


def test_renew_and_release_only_by_the_exact_holder() -> None:
    issuer = MemoryIssuer()
    fence = fencing.MemoryFence("m:4", ttl=0.05, issuer=issuer)
    token = fence.acquire()
    fence.renew(token, ttl=0.05)
    time.sleep(0.08)
    newer = fencing.MemoryFence("m:4", ttl=5, issuer=issuer).acquire(timeout=0)
    with pytest.raises(fencing.LeaseLost):
        fence.renew(token)
    with pytest.raises(fencing.LeaseLost):
        fence.release(token)
    with pytest.raises(fencing.LeaseLost):
        fence.release(newer)  # never issued by this fence object
    with pytest.raises(fencing.AcquireTimeout):
        fence.acquire(timeout=0)  # the newer lease is untouched


def test_hold_renews_in_background_and_reports_loss() -> None:
    issuer = MemoryIssuer()
    fence = fencing.MemoryFence("m:5", ttl=0.06, issuer=issuer)
    hold = fence.hold()
    with hold as token:
        time.sleep(0.2)  # > 3 ttls: only renewal keeps the lease
        assert not hold.lost
        with pytest.raises(fencing.AcquireTimeout):
            fencing.MemoryFence("m:5", issuer=issuer).acquire(timeout=0)
    assert fence.acquire(timeout=0) > token

    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost), hold as token:
        fence.release(token)  # simulate loss: the lease disappears under the holder
        time.sleep(0.1)
        assert hold.lost


def test_tokens_unique_and_increasing_across_threads() -> None:
    issuer = MemoryIssuer()
    fence = fencing.MemoryFence("m:6", ttl=0.01, issuer=issuer)
    seen: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(250):
            token = fence.acquire(timeout=5)
            with lock:
                seen.append(token)
            fence.release(token)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 1000
    assert seen == sorted(seen) and len(set(seen)) == 1000


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": ""}, ValueError),
        ({"name": 5}, TypeError),
        ({"name": "x" * 300}, ValueError),
        ({"name": "n", "ttl": 0}, ValueError),
        ({"name": "n", "ttl": float("nan")}, ValueError),
        ({"name": "n", "ttl": True}, TypeError),
        ({"name": "n", "ttl": "1"}, TypeError),
    ],
)
def test_bad_construction(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        fencing.MemoryFence(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("token", "error"),
    [(True, TypeError), ("1", TypeError), (1.0, TypeError), (None, TypeError), (-1, ValueError)],
)
def test_bad_tokens_change_nothing(token: object, error: type[Exception]) -> None:
    fence = fencing.MemoryFence("m:7", ttl=5, issuer=MemoryIssuer())
    held = fence.acquire()
    with pytest.raises(error):
        fence.release(token)  # type: ignore[arg-type]
    fence.renew(held)  # still ours
    with pytest.raises(ValueError):
        fence.renew(fencing.FenceToken(int(held), "other"))


async def test_async_memory_fence_hold() -> None:
    from fencing._memory import AsyncMemoryFence

    issuer = MemoryIssuer()
    fence = AsyncMemoryFence("m:8", ttl=0.06, issuer=issuer)
    hold = fence.hold()
    async with hold as token:
        import asyncio

        await asyncio.sleep(0.2)
        assert not hold.lost
    assert await fence.acquire(timeout=0) > token
