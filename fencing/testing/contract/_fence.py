"""``FenceContract`` and ``AsyncFenceContract``: the promises of an issuer, through
``fencing.Fence`` and ``fencing.aio.Fence``.

Each check is one scenario (see ``_drive``), run blocking by ``FenceContract`` and
asyncio by ``AsyncFenceContract``; threads in the one are tasks in the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import pytest

from ... import AcquireTimeout, Fence, FenceToken, LeaseLost
from ..._lease.async_fence import AsyncFence
from ._drive import ASYNCIO, BLOCKING, Driven, Scenario
from ._helpers import (
    BAD_NAMES,
    BAD_TIMEOUTS,
    BAD_TOKENS,
    BAD_TTLS,
    MakeAsyncFence,
    MakeFence,
    _assert_after,
    _assert_waited,
    _holder_of,
    _millis,
    _not_the_lease,
    _Occupancy,
    _refuses,
    _tries,
    _waiting,
    _waits_seen,
    _wrong_leases,
    assert_increasing,
    assert_token_of,
)
from ._terms import LeaseTerms

_Fence = Fence | AsyncFence
_MakeFence = Callable[[str, float], _Fence]


def _taken(fence: _Fence) -> Scenario[bool]:
    """Whether ``fence`` could take its lease at once (given back at once if so)."""
    try:
        token = yield fence.acquire(timeout=0)
    except AcquireTimeout:
        return False
    yield fence.release(token)
    return True


def _refused(fence: _Fence) -> Scenario[None]:
    """Fail unless ``fence``'s lease is held by someone: ``acquire(timeout=0)`` refused."""
    with pytest.raises(AcquireTimeout):
        yield fence.acquire(timeout=0)


class _FenceScenarios(Driven, LeaseTerms):
    """The checks of both fence contracts, each a scenario of its driver."""

    #: The fence class of the driver's kind (for a reentrant fence on the same issuer).
    fence_class: ClassVar[type[Fence] | type[AsyncFence]]

    # -- tokens ------------------------------------------------------------------------

    def test_tokens_increase_across_release(self, make_fence: _MakeFence) -> Scenario[None]:
        """Each acquisition, by any fence object of the name, gets a larger token."""
        name = self.fresh_name("release")
        one, two = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        tokens: list[int] = []
        for fence in (one, two, one, one, two):
            token = yield fence.acquire(timeout=0)
            assert_token_of(token, name)
            yield fence.release(token)
            tokens.append(token)
        assert_increasing(tokens)

    def test_expired_lease_lets_the_next_holder_in(self, make_fence: _MakeFence) -> Scenario[None]:
        """Past its ttl an unrenewed lease goes to the next holder with a higher token,
        and its old holder can neither renew nor release it any more."""
        name = self.fresh_name("expiry")
        old, new = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        granted = time.monotonic()
        token = yield old.acquire(timeout=0)
        if not self.expires_while_held:
            yield from self._assert_still_held_past_ttl(make_fence, name)
            yield old.renew(token)
            yield old.release(token)
            newer = yield new.acquire(timeout=0)
            _assert_after(newer, token)
            yield new.release(newer)
            return
        newer = yield new.acquire(timeout=self.patience)
        _assert_waited(granted, self.short_ttl, f"a {self.short_ttl}s lease ended")
        _assert_after(newer, token, "the expired ")
        with pytest.raises(LeaseLost):
            yield old.renew(token)
        with pytest.raises(LeaseLost):
            yield old.release(token)
        # the old holder's attempts left the new lease
        yield from _refused(make_fence(name, self.long_ttl))
        yield new.renew(newer)
        yield new.release(newer)

    def test_crashed_holder_is_followed_by_a_higher_token(
        self, make_fence: _MakeFence
    ) -> Scenario[None]:
        """A holder that dies without releasing (a thread, or a task, that ends holding
        the lease) blocks others only until its lease expires; the next token is higher."""
        name = self.fresh_name("crash")

        def crash() -> Scenario[tuple[_Fence, FenceToken]]:
            fence = make_fence(name, self.short_ttl)
            # and never a release; a free name, so the patience only lets an engine
            # retry a round the machine was too slow for (Redlock: one that outlasted
            # the short ttl's validity)
            return fence, (yield fence.acquire(timeout=self.patience))

        ghost, token = yield self.drive.start(crash()).result(self.patience)
        successor = make_fence(name, self.long_ttl)
        if not self.expires_while_held:
            yield from self._assert_still_held_past_ttl(make_fence, name)
            self.end_session(ghost)  # what the dead holder's end does on this engine
        newer = yield successor.acquire(timeout=self.patience)
        _assert_after(newer, token, "the crashed holder's ")
        yield successor.release(newer)

    def _assert_still_held_past_ttl(self, make_fence: _MakeFence, name: str) -> Scenario[None]:
        """For engines whose leases live as long as their holder's session: still held
        when twice the ttl it was granted with has passed (the time is what is checked)."""
        yield self.drive.sleep(2 * self.short_ttl)
        yield from _refused(make_fence(name, self.long_ttl))

    def _past_short_ttl(self, make_fence: _MakeFence) -> Scenario[None]:
        """Wait until a lease of ``short_ttl`` granted now has expired at the issuer
        (the next holder got in): by the issuer's own clock, that long has passed since."""
        control = self.fresh_name("control")
        yield make_fence(control, self.short_ttl).acquire(timeout=self.patience)
        next_one = make_fence(control, self.long_ttl)
        yield next_one.release((yield next_one.acquire(timeout=self.patience)))

    # -- exclusion and timeouts --------------------------------------------------------

    def test_lease_is_exclusive_and_timeout_zero_tries_once(
        self, make_fence: _MakeFence
    ) -> Scenario[None]:
        """While a lease is held, ``acquire(timeout=0)`` by anyone, the holder's own fence
        object included, raises ``AcquireTimeout`` and takes nothing from the holder."""
        name = self.fresh_name("exclusive")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = yield holder.acquire(timeout=0)
        with pytest.raises(AcquireTimeout) as info:
            yield other.acquire(timeout=0)
        assert isinstance(info.value, TimeoutError) and info.value.name == name
        yield from _refused(holder)  # a fence is a lock, not a reentrant one
        yield holder.renew(token)
        yield holder.release(token)
        newer = yield other.acquire(timeout=0)
        _assert_after(newer, token)
        yield other.release(newer)

    def test_timeout_waits_at_least_that_long(self, make_fence: _MakeFence) -> Scenario[None]:
        """``acquire(timeout=t)`` on a held lease gives up with ``AcquireTimeout`` only
        after ``t`` seconds."""
        name = self.fresh_name("timeout")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = yield holder.acquire(timeout=0)
        wait = self.short_ttl
        started = time.monotonic()
        with pytest.raises(AcquireTimeout) as info:
            yield other.acquire(timeout=wait)
        _assert_waited(started, wait, f"a {wait}s timeout gave up")
        assert info.value.timeout == wait
        yield holder.renew(token)  # the waiter took nothing from the holder
        yield holder.release(token)

    @pytest.mark.parametrize("timeout", ["none", "inf", "number"])
    def test_waiter_gets_the_lease_when_the_holder_releases(
        self, make_fence: _MakeFence, timeout: str
    ) -> Scenario[None]:
        """``acquire(timeout=None)`` (or ``math.inf``, or a long enough number) waits while
        the lease is held and takes it, with a higher token, once the holder releases:
        the waiter was refused (it logged that it waits) and the holder's release found
        the lease still its own (else ``LeaseLost``)."""
        name = self.fresh_name(f"wait-{timeout}")
        holder, waiter = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = yield holder.acquire(timeout=0)

        def wait() -> Scenario[FenceToken]:
            newer: FenceToken = yield waiter.acquire(timeout=_waiting(timeout, self.patience))
            return newer

        with _waits_seen(name) as waits:
            waiting = self.drive.start(wait())
            tried = lambda: waits.is_set() or not waiting.running()  # noqa: E731
            yield from self.drive.until(tried, "the waiter's try", self.patience)
            assert waits.is_set(), "acquire returned while the lease was held"
        yield holder.release(token)
        newer = yield waiting.result(self.patience)
        _assert_after(newer, token)
        yield waiter.release(newer)

    # -- renew and release -------------------------------------------------------------

    def test_renew_extends_the_lease(self, make_fence: _MakeFence) -> Scenario[None]:
        """After ``renew(token, ttl)`` the lease outlives the ttl it was granted with: a
        lease of that ttl granted after it expired meanwhile, by the issuer's clock."""
        name = self.fresh_name("renew")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        for attempt in self.in_time("a renew of a fresh lease"):
            with attempt:
                token = yield fence.acquire(timeout=0)
                yield fence.renew(token, ttl=self.long_ttl)
        if self.expires_while_held:
            yield from self._past_short_ttl(make_fence)
        yield from _refused(other)
        yield fence.renew(token, ttl=self.long_ttl)
        yield fence.release(token)
        newer = yield other.acquire(timeout=0)
        _assert_after(newer, token)
        yield other.release(newer)

    def test_renew_and_release_only_by_the_exact_holder(
        self, make_fence: _MakeFence
    ) -> Scenario[None]:
        """Renew and release act only for the lease's holder: another fence object, a
        token never granted, a released lease or someone else's lease raise
        ``LeaseLost``; and the issuer itself refuses a wrong holder id or token."""
        name = self.fresh_name("holder")
        holder, stranger = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = yield holder.acquire(timeout=0)
        for fence, wrong in _not_the_lease(holder, stranger, token):
            for act in (fence.renew, fence.release):
                with pytest.raises(LeaseLost):
                    yield act(wrong)
        yield from _refused(stranger)  # none of those calls changed the lease
        yield holder.renew(int(token))  # a plain int names the same lease
        yield holder.release(token)
        for act in (holder.release, holder.renew):  # a released lease
            with pytest.raises(LeaseLost):
                yield act(token)
        newer = yield stranger.acquire(timeout=0)
        for act in (holder.renew, holder.release):  # someone else's lease
            with pytest.raises(LeaseLost):
                yield act(newer)
        yield stranger.renew(newer)
        yield stranger.release(newer)

    def test_issuer_compares_holder_and_token(self, make_fence: _MakeFence) -> Scenario[None]:
        """At the issuer itself, renew and release need both the holder id and the token
        of the lease: either one alone changes nothing (a wrongly applied 1 ms renew
        would have ended the lease once a lease granted after it has expired)."""
        name = self.fresh_name("issuer")
        fence = make_fence(name, self.long_ttl)
        issuer = fence.issuer
        token = yield issuer.try_acquire(name, "holder-a", _millis(self.long_ttl))
        assert isinstance(token, int), f"try_acquire on a free lease returned {token!r}"
        for wrong_token, wrong_holder in _wrong_leases(token, "holder-a"):
            assert (yield issuer.renew(name, wrong_token, wrong_holder, 1)) is False
            assert (yield issuer.release(name, wrong_token, wrong_holder)) is False
        if self.expires_while_held:
            yield from self._past_short_ttl(make_fence)
        yield from _refused(fence)
        assert (yield issuer.renew(name, token, "holder-a", _millis(self.long_ttl))) is True
        assert (yield issuer.release(name, token, "holder-a")) is True
        newer = yield fence.acquire(timeout=0)
        _assert_after(newer, token)
        yield fence.release(newer)

    def test_token_of_another_fence_is_refused(self, make_fence: _MakeFence) -> Scenario[None]:
        """A token issued for another fence name raises ``ValueError`` and changes nothing."""
        name, elsewhere = self.fresh_name("mine"), self.fresh_name("theirs")
        fence, theirs = make_fence(name, self.long_ttl), make_fence(elsewhere, self.long_ttl)
        token = yield fence.acquire(timeout=0)
        foreign = yield theirs.acquire(timeout=0)
        for act in (fence.renew, fence.release):
            with pytest.raises(ValueError):
                yield act(foreign)
            with pytest.raises(ValueError):
                yield act(FenceToken(int(token), elsewhere))
        yield from _refused(make_fence(elsewhere, self.long_ttl))
        yield fence.renew(token)
        yield theirs.renew(foreign)
        yield fence.release(token)
        yield theirs.release(foreign)

    # -- hold --------------------------------------------------------------------------

    def test_hold_keeps_the_lease_past_its_ttl(self, make_fence: _MakeFence) -> Scenario[None]:
        """``hold()`` renews in the background (a thread, or a task): the lease outlives its
        ttl (by half: ``hold_check_ttls``), the hold is not lost, and leaving releases it. A
        renewer that the machine stalled past the ttl loses the lease, as it must: that try
        says nothing, and the check is tried again (a hold that never keeps its lease fails
        it after ``patience``)."""
        name = self.fresh_name("hold")
        fence, other = make_fence(name, self.renewal_ttl), make_fence(name, self.long_ttl)

        token: FenceToken | None = None

        def keep(hold: Any, entered: FenceToken) -> Scenario[bool]:
            nonlocal token
            token = entered
            assert_token_of(token, name)
            assert hold.token == token
            yield self.drive.sleep(self.hold_check_ttls * self.renewal_ttl)
            return (yield from _taken(other))

        for _ in _tries(self.patience, "a hold that kept its lease past its ttl"):
            hold = fence.hold()
            try:
                taken = yield from self.drive.within(hold, partial(keep, hold))
            except LeaseLost:
                continue  # its renewer was stalled past the ttl
            if not taken and not hold.lost:
                break
        assert token is not None
        newer = yield other.acquire(timeout=0)  # released on leaving
        _assert_after(newer, token)
        yield other.release(newer)

    def test_hold_surfaces_a_lost_lease(self, make_fence: _MakeFence) -> Scenario[None]:
        """A hold whose lease expired and went to another holder raises ``LeaseLost`` on
        leaving, and leaves the new holder's lease alone; a later hold starts afresh.
        Where leases live as long as sessions, the hold's session ends instead, and its
        renewals must mark it ``lost`` while it is still inside the block."""
        name = self.fresh_name("lost")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        hold = fence.hold(auto_renew=not self.expires_while_held)

        token: FenceToken | None = None
        newer: FenceToken | None = None

        def overtaken(entered: FenceToken) -> Scenario[None]:
            nonlocal token, newer
            token = entered
            if not self.expires_while_held:
                self.end_session(fence)
            newer = yield other.acquire(timeout=self.patience)  # after the expiry
            if not self.expires_while_held:
                found = lambda: hold.lost  # noqa: E731
                what = "the hold's renewal to find the lease lost"
                yield from self.drive.until(found, what, self.patience)

        with pytest.raises(LeaseLost) as info:
            yield from self.drive.within(hold, overtaken)
        assert token is not None and newer is not None
        assert info.value.token == token
        _assert_after(newer, token)
        yield from _refused(make_fence(name, self.long_ttl))  # leaving left the new lease
        yield other.release(newer)

        def not_lost(_: FenceToken) -> Scenario[None]:
            assert not again.lost
            yield from ()

        for attempt in self.in_time("a second hold, taken and left"):
            with attempt:
                again = fence.hold(auto_renew=False)  # lost only if its own lease is
                yield from self.drive.within(again, not_lost)
        assert not again.lost

    # -- lost-lease signals ------------------------------------------------------------

    def end_behind_its_back(self, fence: _Fence, token: int) -> Scenario[None]:
        """End ``fence``'s lease ``token`` at the issuer, with the holder id the fence
        recorded, as an operator's ``release --force`` would: no expiry to wait for.
        (Nothing to do once the fence forgot it: its renewal found it lost already.)"""
        holder = _holder_of(fence, token)
        if holder is not None:
            yield fence.issuer.release(fence.name, int(token), holder)

    def test_hold_signals_a_lost_lease(self, make_fence: _MakeFence) -> Scenario[None]:
        """When a hold's lease ends behind its back, its renewal finds it lost:
        ``wait_lost`` returns True, each ``on_lost`` callback runs once, in the renewer
        (thread, or task), with a ``LeaseLost`` naming the token; one registered
        afterwards runs at once; leaving raises ``LeaseLost``; the next holder gets a
        higher token."""
        name = self.fresh_name("signal")
        fence = make_fence(name, self.short_ttl)  # renewed every ttl/3: a loss is found soon
        calls: list[tuple[LeaseLost, object]] = []

        def record(error: LeaseLost) -> None:
            calls.append((error, self.drive.current()))

        hold = fence.hold(on_lost=record)
        entered: list[FenceToken] = []

        def lose(token: FenceToken) -> Scenario[None]:
            entered.append(token)
            hold.on_lost(record)  # registered on the entered hold as well
            yield from self.end_behind_its_back(fence, token)
            lost = yield hold.wait_lost(self.patience)
            assert lost, f"wait_lost gave up after {self.patience}s"
            assert hold.lost

        with pytest.raises(LeaseLost) as info:
            yield from self.drive.within(hold, lose)
        [token] = entered
        assert info.value.token == token
        assert len(calls) == 2, f"{len(calls)} callback calls, not one per callback"
        for error, _ in calls:
            assert isinstance(error, LeaseLost) and (error.name, error.token) == (name, token)
        # the second ran at once, in this thread or task, if the loss was found before it
        assert calls[0][1] is not self.drive.current(), "on_lost ran outside the renewer"
        late: list[LeaseLost] = []
        hold.on_lost(late.append)  # after the loss: at once, with the same error
        assert late == [calls[0][0]], f"a late on_lost got {late}"
        assert (yield hold.wait_lost(0))
        successor = make_fence(name, self.long_ttl)
        newer = yield successor.acquire(timeout=self.patience)
        _assert_after(newer, token, "the lost ")
        yield successor.release(newer)

    # -- reentrancy --------------------------------------------------------------------

    def test_reentrant_acquire_keeps_the_token_and_counts(
        self, make_fence: _MakeFence
    ) -> Scenario[None]:
        """On a reentrant fence (``Fence(issuer, name, ttl, reentrant=True)`` on the
        issuer under test) the holding thread's (task's) second ``acquire`` returns the
        same token; each ``release`` counts down and the lease ends at the last one.
        Another thread (task) sharing that fence object, and another fence, wait as
        usual meanwhile."""
        name = self.fresh_name("reentrant")
        other = make_fence(name, self.long_ttl)
        fence = self.fence_class(other.issuer, name, self.long_ttl, reentrant=True)  # type: ignore[arg-type]
        token = yield fence.acquire(timeout=0)
        again = yield fence.acquire(timeout=0)  # no wait, no new lease
        assert again == token and again.name == name, f"reentered with {again}, not {token}"
        with pytest.raises(AcquireTimeout):  # the owner is the thread, not the object
            yield self.drive.start(_refused_at_once(fence)).result(self.patience)
        yield fence.release(token)  # one of two: the lease stays
        yield from _refused(other)
        yield fence.renew(token)
        yield fence.release(token)  # the last: the lease ends
        newer = yield other.acquire(timeout=0)
        _assert_after(newer, token)
        with pytest.raises(LeaseLost):  # nothing left to count down
            yield fence.release(token)
        yield other.release(newer)
        fresh = yield fence.acquire(timeout=0)  # a new lease, counted from one again
        _assert_after(fresh, newer)
        yield fence.release(fresh)
        yield other.release((yield other.acquire(timeout=0)))

    # -- bad input ---------------------------------------------------------------------
    # Each check runs its whole table in one test: one fixture and one lease for all the
    # values, which fail before any I/O (a failure names the value that got through).

    def test_bad_name_is_refused(self, make_fence: _MakeFence) -> Scenario[None]:
        for name, error in BAD_NAMES:
            with _refuses(error, f"name {name!r}"):
                make_fence(name, self.long_ttl)
        yield from ()

    def test_bad_ttl_is_refused_with_nothing_taken(self, make_fence: _MakeFence) -> Scenario[None]:
        """A bad ttl is refused by the fence and by ``renew``; the lease stays as it was."""
        name = self.fresh_name("ttl")
        for ttl, error in BAD_TTLS:
            with _refuses(error, f"a fence's ttl {ttl!r}"):
                make_fence(name, ttl)
        fence = make_fence(name, self.long_ttl)
        token = yield fence.acquire(timeout=0)
        for ttl, error in BAD_TTLS:
            with _refuses(error, f"renew's ttl {ttl!r}"):
                yield fence.renew(token, ttl=ttl)
        yield from _refused(make_fence(name, self.long_ttl))
        yield fence.release(token)
        yield make_fence(name, self.long_ttl).acquire(timeout=0)

    def test_bad_timeout_is_refused_with_nothing_taken(
        self, make_fence: _MakeFence
    ) -> Scenario[None]:
        name = self.fresh_name("timeout")
        fence = make_fence(name, self.long_ttl)
        for timeout, error in BAD_TIMEOUTS:
            with _refuses(error, f"timeout {timeout!r}"):
                yield fence.acquire(timeout=timeout)
        yield make_fence(name, self.long_ttl).acquire(timeout=0)

    def test_bad_token_is_refused_with_nothing_changed(
        self, make_fence: _MakeFence
    ) -> Scenario[None]:
        name = self.fresh_name("token")
        fence = make_fence(name, self.long_ttl)
        held = yield fence.acquire(timeout=0)
        for token, error in BAD_TOKENS:
            with _refuses(error, f"renew's token {token!r}"):
                yield fence.renew(token)
            with _refuses(error, f"release's token {token!r}"):
                yield fence.release(token)
        yield from _refused(make_fence(name, self.long_ttl))
        yield fence.release(held)
        yield make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- racing ------------------------------------------------------------------------

    def racers_are_never_two_holders(self, make_fence: _MakeFence) -> Scenario[None]:
        """Racers (threads, or tasks) that take and release one lease over and over are
        never inside at the same time, and their tokens increase in the order they got
        the lease. Pairs of racers share a fence object, as threads may share a
        ``threading.Lock``."""
        name = self.fresh_name("race")
        lease = _Occupancy()
        fences = [make_fence(name, self.long_ttl) for _ in range((self.racers + 1) // 2)]

        def race(fence: _Fence) -> Scenario[None]:
            for _ in range(self.rounds):
                # no engine promises a racer its turn (Redlock's and SQL's waiters back
                # off, and a Redlock round refused on a loaded machine may leave its
                # partial locks until they expire): a timeout is tried again while the
                # race may still end in time; exclusion and order are what is checked
                for _ in _tries(self.patience * 3, "a racer's turn"):
                    with contextlib.suppress(AcquireTimeout):
                        token = yield fence.acquire(timeout=self.patience)
                        break
                lease.enter(token)
                yield self.drive.sleep(0.001)  # a window for a second holder to show
                lease.leave()
                yield fence.release(token)

        racers = [race(fences[i % len(fences)]) for i in range(self.racers)]
        errors = yield self.drive.race(racers, self.patience * 4)
        lease.check(errors, self.racers * self.rounds)


def _refused_at_once(fence: _Fence) -> Scenario[FenceToken]:
    """``fence.acquire(timeout=0)``, run beside the scenario (another thread or task)."""
    token: FenceToken = yield fence.acquire(timeout=0)
    return token


class FenceContract(_FenceScenarios):
    """The promises of a blocking issuer, checked through ``fencing.Fence``.

    Subclass it (the subclass's name must start with ``Test``) and provide the
    ``make_fence`` fixture: ``make_fence(name, ttl)`` returns a fresh ``Fence`` of that
    name; fences of one name must share leases and tokens.
    """

    drive = BLOCKING
    fence_class = Fence

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Provided by the subclass: ``make_fence(name, ttl)`` -> a fresh ``Fence``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    test_racing_threads_are_never_two_holders = BLOCKING.test(
        _FenceScenarios.racers_are_never_two_holders
    )


class AsyncFenceContract(_FenceScenarios):
    """The promises of an asyncio issuer, checked through ``fencing.aio.Fence``.

    The same checks as ``FenceContract``, as coroutines, with tasks where it uses
    threads; and ``cancel_on_loss``. Provide ``make_fence(name, ttl)`` returning a fresh
    ``AsyncFence`` (the fixture may be async).
    """

    drive = ASYNCIO
    fence_class = AsyncFence

    @pytest.fixture
    def make_fence(self) -> MakeAsyncFence:
        """Provided by the subclass: ``make_fence(name, ttl)`` -> a fresh ``AsyncFence``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    test_racing_tasks_are_never_two_holders = ASYNCIO.test(
        _FenceScenarios.racers_are_never_two_holders
    )

    async def test_hold_cancels_its_body_when_the_lease_is_lost(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """With ``cancel_on_loss=True`` a lost lease cancels the body of ``async with``
        at its ``await``, even one waiting in ``wait_lost`` (woken by the loss in the same
        step as the cancellation, which ``asyncio.wait_for`` before Python 3.12 lost);
        the block raises ``LeaseLost`` from that ``CancelledError``, and the cancellation
        is taken back (the test's task is not left cancelling)."""
        name = self.fresh_name("cancel")
        fence = make_fence(name, self.short_ttl)
        hold = fence.hold(cancel_on_loss=True)
        finished = False
        with pytest.raises(LeaseLost) as info:
            async with hold as token:
                await ASYNCIO.run(self.end_behind_its_back(fence, token))
                await hold.wait_lost(self.patience)  # cancelled as the loss is found
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
