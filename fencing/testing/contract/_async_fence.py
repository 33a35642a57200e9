"""``AsyncFenceContract``: the promises of an asyncio issuer, through ``fencing.aio.Fence``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from ... import AcquireTimeout, FenceToken, LeaseLost
from ..._lease.async_fence import AsyncFence
from ._helpers import (
    BAD_NAMES,
    BAD_TIMEOUTS,
    BAD_TOKENS,
    BAD_TTLS,
    MakeAsyncFence,
    _assert_after,
    _assert_waited,
    _holder_of,
    _ids,
    _millis,
    _not_the_lease,
    _Occupancy,
    _tries,
    _waiting,
    _waits_seen,
    _wrong_leases,
    assert_increasing,
    assert_token_of,
)
from ._terms import LeaseTerms


async def _taken(fence: AsyncFence) -> bool:
    """See the blocking ``_taken``."""
    try:
        await fence.release(await fence.acquire(timeout=0))
    except AcquireTimeout:
        return False
    return True


class AsyncFenceContract(LeaseTerms):
    """The promises of an asyncio issuer, checked through ``fencing.aio.Fence``.

    The same checks as ``FenceContract``, as coroutines, with tasks where it uses
    threads. Provide ``make_fence(name, ttl)`` returning a fresh ``AsyncFence``.
    """

    @pytest.fixture
    def make_fence(self) -> MakeAsyncFence:
        """Provided by the subclass: ``make_fence(name, ttl)`` -> a fresh ``AsyncFence``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    # -- tokens ------------------------------------------------------------------------

    async def test_tokens_increase_across_release(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_tokens_increase_across_release``."""
        name = self.fresh_name("release")
        one, two = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        tokens: list[int] = []
        for fence in (one, two, one, one, two):
            token = await fence.acquire(timeout=0)
            assert_token_of(token, name)
            await fence.release(token)
            tokens.append(token)
        assert_increasing(tokens)

    async def test_expired_lease_lets_the_next_holder_in(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_expired_lease_lets_the_next_holder_in``."""
        name = self.fresh_name("expiry")
        old, new = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        granted = time.monotonic()
        token = await old.acquire(timeout=0)
        if not self.expires_while_held:
            await self._assert_still_held_past_ttl(make_fence, name)
            await old.renew(token)
            await old.release(token)
            newer = await new.acquire(timeout=0)
            _assert_after(newer, token)
            await new.release(newer)
            return
        newer = await new.acquire(timeout=self.patience)
        _assert_waited(granted, self.short_ttl, f"a {self.short_ttl}s lease ended")
        _assert_after(newer, token, "the expired ")
        with pytest.raises(LeaseLost):
            await old.renew(token)
        with pytest.raises(LeaseLost):
            await old.release(token)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await new.renew(newer)
        await new.release(newer)

    async def test_crashed_holder_is_followed_by_a_higher_token(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """See ``FenceContract.test_crashed_holder_is_followed_by_a_higher_token``; here
        the holder is a task that ends holding the lease."""
        name = self.fresh_name("crash")

        async def crash() -> tuple[AsyncFence, FenceToken]:
            fence = make_fence(name, self.short_ttl)
            # and never a release (for the patience: see the blocking contract)
            return fence, await fence.acquire(timeout=self.patience)

        ghost, token = await asyncio.wait_for(asyncio.create_task(crash()), self.patience)
        successor = make_fence(name, self.long_ttl)
        if self.expires_while_held:
            newer = await successor.acquire(timeout=self.patience)
        else:
            await self._assert_still_held_past_ttl(make_fence, name)
            self.end_session(ghost)  # what the dead holder's end does on this engine
            newer = await successor.acquire(timeout=self.patience)
        _assert_after(newer, token, "the crashed holder's ")
        await successor.release(newer)

    async def await_until(self, condition: Callable[[], bool], what: str) -> None:
        """``wait_until`` without blocking the event loop."""
        for _ in _tries(self.patience, what):
            if condition():
                return
            await asyncio.sleep(0.01)

    async def _assert_still_held_past_ttl(self, make_fence: MakeAsyncFence, name: str) -> None:
        await asyncio.sleep(2 * self.short_ttl)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- exclusion and timeouts --------------------------------------------------------

    async def test_lease_is_exclusive_and_timeout_zero_tries_once(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """See ``FenceContract.test_lease_is_exclusive_and_timeout_zero_tries_once``."""
        name = self.fresh_name("exclusive")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        with pytest.raises(AcquireTimeout) as info:
            await other.acquire(timeout=0)
        assert isinstance(info.value, TimeoutError) and info.value.name == name
        with pytest.raises(AcquireTimeout):
            await holder.acquire(timeout=0)
        await holder.renew(token)
        await holder.release(token)
        newer = await other.acquire(timeout=0)
        _assert_after(newer, token)
        await other.release(newer)

    async def test_timeout_waits_at_least_that_long(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_timeout_waits_at_least_that_long``."""
        name = self.fresh_name("timeout")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        wait = self.short_ttl
        started = time.monotonic()
        with pytest.raises(AcquireTimeout) as info:
            await other.acquire(timeout=wait)
        _assert_waited(started, wait, f"a {wait}s timeout gave up")
        assert info.value.timeout == wait
        await holder.renew(token)
        await holder.release(token)

    @pytest.mark.parametrize("timeout", ["none", "inf", "number"])
    async def test_waiter_gets_the_lease_when_the_holder_releases(
        self, make_fence: MakeAsyncFence, timeout: str
    ) -> None:
        """See ``FenceContract.test_waiter_gets_the_lease_when_the_holder_releases``."""
        name = self.fresh_name(f"wait-{timeout}")
        holder, waiter = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        with _waits_seen(name) as waits:
            wait = asyncio.create_task(waiter.acquire(timeout=_waiting(timeout, self.patience)))
            await self.await_until(lambda: waits.is_set() or wait.done(), "the waiter's try")
            assert waits.is_set(), f"acquire returned while the lease was held: {wait}"
        await holder.release(token)
        newer = await asyncio.wait_for(wait, self.patience)
        _assert_after(newer, token)
        await waiter.release(newer)

    # -- renew and release -------------------------------------------------------------

    async def test_renew_extends_the_lease(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_renew_extends_the_lease``."""
        name = self.fresh_name("renew")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        for attempt in self.in_time("a renew of a fresh lease"):
            with attempt:
                token = await fence.acquire(timeout=0)
                await fence.renew(token, ttl=self.long_ttl)
        await asyncio.sleep(2 * self.short_ttl)
        with pytest.raises(AcquireTimeout):
            await other.acquire(timeout=0)
        await fence.renew(token, ttl=self.long_ttl)
        await fence.release(token)
        newer = await other.acquire(timeout=0)
        _assert_after(newer, token)
        await other.release(newer)

    async def test_renew_and_release_only_by_the_exact_holder(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """See ``FenceContract.test_renew_and_release_only_by_the_exact_holder``."""
        name = self.fresh_name("holder")
        holder, stranger = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        for fence, wrong in _not_the_lease(holder, stranger, token):
            for act in (fence.renew, fence.release):
                with pytest.raises(LeaseLost):
                    await act(wrong)
        with pytest.raises(AcquireTimeout):
            await stranger.acquire(timeout=0)
        await holder.renew(int(token))
        await holder.release(token)
        for act in (holder.release, holder.renew):  # a released lease
            with pytest.raises(LeaseLost):
                await act(token)
        newer = await stranger.acquire(timeout=0)
        for act in (holder.renew, holder.release):  # someone else's lease
            with pytest.raises(LeaseLost):
                await act(newer)
        await stranger.renew(newer)
        await stranger.release(newer)

    async def test_issuer_compares_holder_and_token(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_issuer_compares_holder_and_token``."""
        name = self.fresh_name("issuer")
        fence = make_fence(name, self.long_ttl)
        issuer = fence.issuer
        token = await issuer.try_acquire(name, "holder-a", _millis(self.long_ttl))
        assert isinstance(token, int), f"try_acquire on a free lease returned {token!r}"
        for wrong_token, wrong_holder in _wrong_leases(token, "holder-a"):
            assert await issuer.renew(name, wrong_token, wrong_holder, 1) is False
            assert await issuer.release(name, wrong_token, wrong_holder) is False
        await asyncio.sleep(0.01)
        with pytest.raises(AcquireTimeout):
            await fence.acquire(timeout=0)
        assert await issuer.renew(name, token, "holder-a", _millis(self.long_ttl)) is True
        assert await issuer.release(name, token, "holder-a") is True
        newer = await fence.acquire(timeout=0)
        _assert_after(newer, token)
        await fence.release(newer)

    async def test_token_of_another_fence_is_refused(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_token_of_another_fence_is_refused``."""
        name, elsewhere = self.fresh_name("mine"), self.fresh_name("theirs")
        fence, theirs = make_fence(name, self.long_ttl), make_fence(elsewhere, self.long_ttl)
        token, foreign = await fence.acquire(timeout=0), await theirs.acquire(timeout=0)
        for act in (fence.renew, fence.release):
            with pytest.raises(ValueError):
                await act(foreign)
            with pytest.raises(ValueError):
                await act(FenceToken(int(token), elsewhere))
        with pytest.raises(AcquireTimeout):
            await make_fence(elsewhere, self.long_ttl).acquire(timeout=0)
        await fence.renew(token)
        await theirs.renew(foreign)
        await fence.release(token)
        await theirs.release(foreign)

    # -- hold --------------------------------------------------------------------------

    async def test_hold_keeps_the_lease_past_its_ttl(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_hold_keeps_the_lease_past_its_ttl``; renewal is a task."""
        name = self.fresh_name("hold")
        fence, other = make_fence(name, self.renewal_ttl), make_fence(name, self.long_ttl)
        for _ in _tries(self.patience, "a hold that kept its lease past its ttl"):
            hold = fence.hold()
            try:
                async with hold as token:
                    assert_token_of(token, name)
                    assert hold.token == token
                    await asyncio.sleep(2.2 * self.renewal_ttl)
                    taken = await _taken(other)
            except LeaseLost:
                continue  # its renewer was stalled past the ttl
            if not taken and not hold.lost:
                break
        newer = await other.acquire(timeout=0)
        _assert_after(newer, token)
        await other.release(newer)

    async def test_hold_surfaces_a_lost_lease(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_hold_surfaces_a_lost_lease``."""
        name = self.fresh_name("lost")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        if self.expires_while_held:
            hold = fence.hold(auto_renew=False)
            with pytest.raises(LeaseLost) as info:
                async with hold as token:
                    newer = await other.acquire(timeout=self.patience)
        else:
            hold = fence.hold()
            with pytest.raises(LeaseLost) as info:
                async with hold as token:
                    self.end_session(fence)
                    newer = await other.acquire(timeout=self.patience)
                    await self.await_until(lambda: hold.lost, "the renewal to find it lost")
        assert info.value.token == token
        _assert_after(newer, token)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await other.release(newer)
        for attempt in self.in_time("a second hold, taken and left"):
            with attempt:
                again = fence.hold(auto_renew=False)
                async with again:
                    assert not again.lost
        assert not again.lost

    # -- lost-lease signals ------------------------------------------------------------

    async def end_behind_its_back(self, fence: AsyncFence, token: int) -> None:
        """See ``FenceContract.end_behind_its_back``."""
        holder = _holder_of(fence, token)
        if holder is not None:
            await fence.issuer.release(fence.name, int(token), holder)

    async def test_hold_signals_a_lost_lease(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_hold_signals_a_lost_lease``; the callbacks run in the
        renewal task, and ``await hold.wait_lost()`` waits."""
        name = self.fresh_name("signal")
        fence = make_fence(name, self.short_ttl)
        calls: list[tuple[LeaseLost, asyncio.Task[Any] | None]] = []

        def record(error: LeaseLost) -> None:
            calls.append((error, asyncio.current_task()))

        hold = fence.hold(on_lost=record)
        with pytest.raises(LeaseLost) as info:
            async with hold as token:
                hold.on_lost(record)
                await self.end_behind_its_back(fence, token)
                assert await hold.wait_lost(self.patience), f"gave up after {self.patience}s"
                assert hold.lost
        assert info.value.token == token
        assert len(calls) == 2, f"{len(calls)} callback calls, not one per callback"
        for error, _ in calls:
            assert isinstance(error, LeaseLost) and (error.name, error.token) == (name, token)
        assert calls[0][1] is not asyncio.current_task(), "on_lost ran outside the renewer"
        late: list[LeaseLost] = []
        hold.on_lost(late.append)
        assert late == [calls[0][0]], f"a late on_lost got {late}"
        assert await hold.wait_lost(0)
        successor = make_fence(name, self.long_ttl)
        newer = await successor.acquire(timeout=self.patience)
        _assert_after(newer, token, "the lost ")
        await successor.release(newer)

    async def test_hold_cancels_its_body_when_the_lease_is_lost(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """With ``cancel_on_loss=True`` a lost lease cancels the body of ``async with``
        at its ``await``; the block raises ``LeaseLost`` from that ``CancelledError``, and
        the cancellation is taken back (the test's task is not left cancelling)."""
        name = self.fresh_name("cancel")
        fence = make_fence(name, self.short_ttl)
        hold = fence.hold(cancel_on_loss=True)
        finished = False
        with pytest.raises(LeaseLost) as info:
            async with hold as token:
                await self.end_behind_its_back(fence, token)
                await asyncio.sleep(self.patience)  # cancelled long before
                finished = True
        assert not finished, "the body ran to its end on a lost lease"
        assert isinstance(info.value.__cause__, asyncio.CancelledError), info.value.__cause__
        assert info.value.token == token and hold.lost
        task = asyncio.current_task()
        left = getattr(task, "cancelling", lambda: 0)()  # Python 3.11+
        assert left == 0, f"the test's task is left with {left} cancellations"
        successor = make_fence(name, self.long_ttl)
        newer = await successor.acquire(timeout=self.patience)
        _assert_after(newer, token, "the lost ")
        await successor.release(newer)

    # -- reentrancy --------------------------------------------------------------------

    async def test_reentrant_acquire_keeps_the_token_and_counts(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """See ``FenceContract.test_reentrant_acquire_keeps_the_token_and_counts``; the
        owner is the asyncio task."""
        name = self.fresh_name("reentrant")
        other = make_fence(name, self.long_ttl)
        fence = AsyncFence(other.issuer, name, self.long_ttl, reentrant=True)
        token = await fence.acquire(timeout=0)
        again = await fence.acquire(timeout=0)
        assert again == token and again.name == name, f"reentered with {again}, not {token}"
        with pytest.raises(AcquireTimeout):  # another task sharing the fence object
            await asyncio.wait_for(asyncio.create_task(fence.acquire(timeout=0)), self.patience)
        await fence.release(token)
        with pytest.raises(AcquireTimeout):
            await other.acquire(timeout=0)
        await fence.renew(token)
        await fence.release(token)
        newer = await other.acquire(timeout=0)
        _assert_after(newer, token)
        with pytest.raises(LeaseLost):
            await fence.release(token)
        await other.release(newer)
        fresh = await fence.acquire(timeout=0)
        _assert_after(fresh, newer)
        await fence.release(fresh)
        await other.release(await other.acquire(timeout=0))

    # -- bad input ---------------------------------------------------------------------

    @pytest.mark.parametrize(("name", "error"), BAD_NAMES, ids=_ids(BAD_NAMES))
    async def test_bad_name_is_refused(
        self, make_fence: MakeAsyncFence, name: Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            make_fence(name, self.long_ttl)

    @pytest.mark.parametrize(("ttl", "error"), BAD_TTLS, ids=_ids(BAD_TTLS))
    async def test_bad_ttl_is_refused_with_nothing_taken(
        self, make_fence: MakeAsyncFence, ttl: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("ttl")
        with pytest.raises(error):
            make_fence(name, ttl)
        fence = make_fence(name, self.long_ttl)
        token = await fence.acquire(timeout=0)
        with pytest.raises(error):
            await fence.renew(token, ttl=ttl)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await fence.release(token)
        await make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("timeout", "error"), BAD_TIMEOUTS, ids=_ids(BAD_TIMEOUTS))
    async def test_bad_timeout_is_refused_with_nothing_taken(
        self, make_fence: MakeAsyncFence, timeout: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("timeout")
        fence = make_fence(name, self.long_ttl)
        with pytest.raises(error):
            await fence.acquire(timeout=timeout)
        await make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("token", "error"), BAD_TOKENS, ids=_ids(BAD_TOKENS))
    async def test_bad_token_is_refused_with_nothing_changed(
        self, make_fence: MakeAsyncFence, token: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("token")
        fence = make_fence(name, self.long_ttl)
        held = await fence.acquire(timeout=0)
        with pytest.raises(error):
            await fence.renew(token)
        with pytest.raises(error):
            await fence.release(token)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await fence.release(held)
        await make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- racing ------------------------------------------------------------------------

    async def test_racing_tasks_are_never_two_holders(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_racing_threads_are_never_two_holders``; the tasks
        yield to each other inside the lease, where a second holder would show."""
        name = self.fresh_name("race")
        lease = _Occupancy()
        fences = [make_fence(name, self.long_ttl) for _ in range((self.racers + 1) // 2)]

        async def race(fence: AsyncFence) -> None:
            for _ in range(self.rounds):
                for _ in _tries(self.patience * 3, "a racer's turn"):  # see the blocking one
                    with contextlib.suppress(AcquireTimeout):
                        token = await fence.acquire(timeout=self.patience)
                        break
                lease.enter(token)
                await asyncio.sleep(0.001)
                lease.leave()
                await fence.release(token)

        tasks = [asyncio.create_task(race(fences[i % len(fences)])) for i in range(self.racers)]
        done, pending = await asyncio.wait(tasks, timeout=self.patience * 4)
        for task in pending:
            task.cancel()
        assert not pending, f"{len(pending)} racing tasks still run after {self.patience * 4}s"
        errors = [error for task in done if (error := task.exception()) is not None]
        lease.check(errors, self.racers * self.rounds)
