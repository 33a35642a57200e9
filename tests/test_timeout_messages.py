"""Each primitive's ``AcquireTimeout`` says what it is and what did not come: a fence's
lease, a semaphore's permit, a limiter's admission, an election's term. Still one
exception type (``except AcquireTimeout``, ``except TimeoutError`` catch them all)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import fencing.aio
from fencing import AcquireTimeout, Election, MemoryFence, MemoryIssuer


def test_each_primitive_names_itself_when_nothing_comes_in_time() -> None:
    issuer = MemoryIssuer()
    fence = MemoryFence("f", ttl=30, issuer=issuer)
    fence.acquire()
    semaphore = issuer.semaphore("s", permits=1, ttl=30)
    semaphore.acquire()
    limiter = issuer.limiter("l", limit=1, per=30)
    limiter.acquire()
    election = Election(issuer, "e", ttl=30)
    term = election.campaign("a")
    expected: list[tuple[Callable[[], object], str]] = [
        (lambda: fence.acquire(timeout=0.01), "fence 'f': lease not acquired within 0.01s"),
        (lambda: semaphore.acquire(timeout=0.01), "semaphore 's': no permit within 0.01s"),
        (lambda: limiter.acquire(timeout=0.01), "limiter 'l': no admission within 0.01s"),
        (lambda: election.campaign("b", timeout=0.01), "election 'e': not elected within 0.01s"),
    ]
    for call, message in expected:
        with pytest.raises(TimeoutError) as caught:
            call()
        assert isinstance(caught.value, AcquireTimeout) and str(caught.value) == message
        assert caught.value.kind == message.partition(" ")[0]
    term.resign()


async def test_the_asyncio_ones_say_the_same() -> None:
    issuer = MemoryIssuer()
    semaphore = issuer.aio_semaphore("s", permits=1, ttl=30)
    await semaphore.acquire()
    limiter = issuer.aio_limiter("l", limit=1, per=30)
    await limiter.acquire()
    with pytest.raises(AcquireTimeout, match=r"^semaphore 's': no permit within 0.01s$"):
        await semaphore.acquire(timeout=0.01)
    with pytest.raises(AcquireTimeout, match=r"^limiter 'l': no admission within 0.01s$"):
        await limiter.acquire(timeout=0.01)
    election = fencing.aio.Election(fencing.aio.MemoryFence("x", issuer=issuer).issuer, "e")
    term = await election.campaign("a")
    with pytest.raises(AcquireTimeout, match=r"^election 'e': not elected within 0.01s$"):
        await election.campaign("b", timeout=0.01)
    await term.resign()
