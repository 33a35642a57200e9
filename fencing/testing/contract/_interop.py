"""``InteropContract``: a blocking and an asyncio fence of one name on one issuer are one
fence. They exclude each other, their tokens come from one sequence, a waiter on one side
is let in by a release on the other, and each side's issuer reports the lease the other
side holds (``status``).
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest

from ... import AcquireTimeout
from ..._lease.async_fence import AsyncFence
from ._helpers import MakeAsyncFence, MakeFence, _assert_after, _tries, _waits_seen
from ._terms import LeaseTerms


async def _status_of(fence: AsyncFence, name: str) -> tuple[bool, int | None]:
    """Whether the asyncio fence's issuer reports ``name`` held, and by which token."""
    status = await fence.issuer.status(name)  # type: ignore[attr-defined]
    return status.held, status.token


class InteropContract(LeaseTerms):
    """The promises of one issuer seen through both kinds of fence. Provide
    ``make_fence(name, ttl)`` returning a fresh ``fencing.Fence`` and
    ``make_async_fence(name, ttl)`` returning a ``fencing.aio.Fence`` on the same issuer
    (called inside the test's event loop); its tests are coroutines."""

    #: Capability. True (the default): both issuers report a fence's state (``status``,
    #: ``fencing.issuer.Inspects``); False: the checks read only acquisitions.
    reports_status: ClassVar[bool] = True

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    @pytest.fixture
    def make_async_fence(self) -> MakeAsyncFence:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_async_fence fixture")

    async def test_blocking_and_asyncio_fences_are_one_fence(
        self, make_fence: MakeFence, make_async_fence: MakeAsyncFence
    ) -> None:
        name = self.fresh_name("interop")
        blocking, aio = make_fence(name, self.long_ttl), make_async_fence(name, self.long_ttl)
        first = blocking.acquire(timeout=0)
        with pytest.raises(AcquireTimeout):
            await aio.acquire(timeout=0)
        if self.reports_status:
            seen = await _status_of(aio, name)
            assert seen == (True, first), f"asyncio status {seen} of the blocking lease {first}"
        blocking.release(first)
        second = await aio.acquire(timeout=0)
        _assert_after(second, first, "the blocking fence's ")
        with pytest.raises(AcquireTimeout):
            blocking.acquire(timeout=0)
        if self.reports_status:
            status = blocking.issuer.status(name)  # type: ignore[attr-defined]
            seen = (status.held, status.token)
            assert seen == (True, second), f"blocking status {seen} of the asyncio lease {second}"
        await aio.release(second)
        third = blocking.acquire(timeout=0)
        _assert_after(third, second, "the asyncio fence's ")
        with _waits_seen(name) as waiting:
            waiter = asyncio.ensure_future(aio.acquire(timeout=self.patience))
            for _ in _tries(self.patience, "the asyncio waiter to find the lease busy"):
                if waiting.is_set():
                    break
                assert not waiter.done(), f"the asyncio waiter ended: {waiter}"
                await asyncio.sleep(0.01)
            # from a thread: the waiter may be inside a transaction that the release
            # has to wait for, which needs this loop running
            await asyncio.to_thread(blocking.release, third)
            fourth = await asyncio.wait_for(waiter, self.patience)
        _assert_after(fourth, third, "the blocking fence's ")
        await aio.release(fourth)
