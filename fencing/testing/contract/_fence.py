"""``FenceContract``: the promises of a blocking issuer, through ``fencing.Fence``."""

from __future__ import annotations

import contextlib
import threading
import time
from functools import partial
from typing import Any

import pytest

from ... import AcquireTimeout, Fence, FenceToken, LeaseLost
from ._helpers import (
    BAD_NAMES,
    BAD_TIMEOUTS,
    BAD_TOKENS,
    BAD_TTLS,
    MakeFence,
    _assert_after,
    _assert_waited,
    _Background,
    _holder_of,
    _ids,
    _millis,
    _not_the_lease,
    _Occupancy,
    _run_threads,
    _tries,
    _waiting,
    _waits_seen,
    _wrong_leases,
    assert_increasing,
    assert_token_of,
)
from ._terms import LeaseTerms


def _taken(fence: Fence) -> bool:
    """Whether ``fence`` could take its lease at once (given back at once if so)."""
    try:
        fence.release(fence.acquire(timeout=0))
    except AcquireTimeout:
        return False
    return True


class FenceContract(LeaseTerms):
    """The promises of a blocking issuer, checked through ``fencing.Fence``.

    Subclass it (the subclass's name must start with ``Test``) and provide the
    ``make_fence`` fixture: ``make_fence(name, ttl)`` returns a fresh ``Fence`` of that
    name; fences of one name must share leases and tokens.
    """

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Provided by the subclass: ``make_fence(name, ttl)`` -> a fresh ``Fence``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    # -- tokens ------------------------------------------------------------------------

    def test_tokens_increase_across_release(self, make_fence: MakeFence) -> None:
        """Each acquisition, by any fence object of the name, gets a larger token."""
        name = self.fresh_name("release")
        one, two = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        tokens: list[int] = []
        for fence in (one, two, one, one, two):
            token = fence.acquire(timeout=0)
            assert_token_of(token, name)
            fence.release(token)
            tokens.append(token)
        assert_increasing(tokens)

    def test_expired_lease_lets_the_next_holder_in(self, make_fence: MakeFence) -> None:
        """Past its ttl an unrenewed lease goes to the next holder with a higher token,
        and its old holder can neither renew nor release it any more."""
        name = self.fresh_name("expiry")
        old, new = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        granted = time.monotonic()
        token = old.acquire(timeout=0)
        if not self.expires_while_held:
            self._assert_still_held_past_ttl(make_fence, name)
            old.renew(token)
            old.release(token)
            newer = new.acquire(timeout=0)
            _assert_after(newer, token)
            new.release(newer)
            return
        newer = new.acquire(timeout=self.patience)
        _assert_waited(granted, self.short_ttl, f"a {self.short_ttl}s lease ended")
        _assert_after(newer, token, "the expired ")
        with pytest.raises(LeaseLost):
            old.renew(token)
        with pytest.raises(LeaseLost):
            old.release(token)
        with pytest.raises(AcquireTimeout):  # the old holder's attempts left the new lease
            make_fence(name, self.long_ttl).acquire(timeout=0)
        new.renew(newer)
        new.release(newer)

    def test_crashed_holder_is_followed_by_a_higher_token(self, make_fence: MakeFence) -> None:
        """A holder that dies without releasing (a thread that ends holding the lease)
        blocks others only until its lease expires; the next token is higher."""
        name = self.fresh_name("crash")

        def crash() -> tuple[Fence, FenceToken]:
            fence = make_fence(name, self.short_ttl)
            # and never a release; a free name, so the patience only lets an engine
            # retry a round the machine was too slow for (Redlock: one that outlasted
            # the short ttl's validity)
            return fence, fence.acquire(timeout=self.patience)

        ghost, token = _Background(crash).result(self.patience)
        successor = make_fence(name, self.long_ttl)
        if self.expires_while_held:
            newer = successor.acquire(timeout=self.patience)
        else:
            self._assert_still_held_past_ttl(make_fence, name)
            self.end_session(ghost)  # what the dead holder's end does on this engine
            newer = successor.acquire(timeout=self.patience)
        _assert_after(newer, token, "the crashed holder's ")
        successor.release(newer)

    def _assert_still_held_past_ttl(self, make_fence: MakeFence, name: str) -> None:
        """For engines whose leases live as long as their holder's session."""
        time.sleep(2 * self.short_ttl)
        with pytest.raises(AcquireTimeout):
            make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- exclusion and timeouts --------------------------------------------------------

    def test_lease_is_exclusive_and_timeout_zero_tries_once(self, make_fence: MakeFence) -> None:
        """While a lease is held, ``acquire(timeout=0)`` by anyone, the holder's own fence
        object included, raises ``AcquireTimeout`` and takes nothing from the holder."""
        name = self.fresh_name("exclusive")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        with pytest.raises(AcquireTimeout) as info:
            other.acquire(timeout=0)
        assert isinstance(info.value, TimeoutError) and info.value.name == name
        with pytest.raises(AcquireTimeout):
            holder.acquire(timeout=0)  # a fence is a lock, not a reentrant one
        holder.renew(token)
        holder.release(token)
        newer = other.acquire(timeout=0)
        _assert_after(newer, token)
        other.release(newer)

    def test_timeout_waits_at_least_that_long(self, make_fence: MakeFence) -> None:
        """``acquire(timeout=t)`` on a held lease gives up with ``AcquireTimeout`` only
        after ``t`` seconds."""
        name = self.fresh_name("timeout")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        wait = self.short_ttl
        started = time.monotonic()
        with pytest.raises(AcquireTimeout) as info:
            other.acquire(timeout=wait)
        _assert_waited(started, wait, f"a {wait}s timeout gave up")
        assert info.value.timeout == wait
        holder.renew(token)  # the waiter took nothing from the holder
        holder.release(token)

    @pytest.mark.parametrize("timeout", ["none", "inf", "number"])
    def test_waiter_gets_the_lease_when_the_holder_releases(
        self, make_fence: MakeFence, timeout: str
    ) -> None:
        """``acquire(timeout=None)`` (or ``math.inf``, or a long enough number) waits while
        the lease is held and takes it, with a higher token, once the holder releases:
        the waiter was refused (it logged that it waits) and the holder's release found
        the lease still its own (else ``LeaseLost``)."""
        name = self.fresh_name(f"wait-{timeout}")
        holder, waiter = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        with _waits_seen(name) as waits:
            wait = _Background(lambda: waiter.acquire(timeout=_waiting(timeout, self.patience)))
            self.wait_until(lambda: waits.is_set() or not wait.running(), "the waiter's try")
            assert waits.is_set(), "acquire returned while the lease was held"
        holder.release(token)
        newer = wait.result(self.patience)
        _assert_after(newer, token)
        waiter.release(newer)

    # -- renew and release -------------------------------------------------------------

    def test_renew_extends_the_lease(self, make_fence: MakeFence) -> None:
        """After ``renew(token, ttl)`` the lease outlives the ttl it was granted with."""
        name = self.fresh_name("renew")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        for attempt in self.in_time("a renew of a fresh lease"):
            with attempt:
                token = fence.acquire(timeout=0)
                fence.renew(token, ttl=self.long_ttl)
        time.sleep(2 * self.short_ttl)  # past the ttl it was granted with
        with pytest.raises(AcquireTimeout):
            other.acquire(timeout=0)
        fence.renew(token, ttl=self.long_ttl)
        fence.release(token)
        newer = other.acquire(timeout=0)
        _assert_after(newer, token)
        other.release(newer)

    def test_renew_and_release_only_by_the_exact_holder(self, make_fence: MakeFence) -> None:
        """Renew and release act only for the lease's holder: another fence object, a
        token never granted, a released lease or someone else's lease raise
        ``LeaseLost``; and the issuer itself refuses a wrong holder id or token."""
        name = self.fresh_name("holder")
        holder, stranger = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        for fence, wrong in _not_the_lease(holder, stranger, token):
            for act in (fence.renew, fence.release):
                with pytest.raises(LeaseLost):
                    act(wrong)
        with pytest.raises(AcquireTimeout):  # none of those calls changed the lease
            stranger.acquire(timeout=0)
        holder.renew(int(token))  # a plain int names the same lease
        holder.release(token)
        for act in (holder.release, holder.renew):  # a released lease
            with pytest.raises(LeaseLost):
                act(token)
        newer = stranger.acquire(timeout=0)
        for act in (holder.renew, holder.release):  # someone else's lease
            with pytest.raises(LeaseLost):
                act(newer)
        stranger.renew(newer)
        stranger.release(newer)

    def test_issuer_compares_holder_and_token(self, make_fence: MakeFence) -> None:
        """At the issuer itself, renew and release need both the holder id and the token
        of the lease: either one alone changes nothing."""
        name = self.fresh_name("issuer")
        fence = make_fence(name, self.long_ttl)
        issuer = fence.issuer
        token = issuer.try_acquire(name, "holder-a", _millis(self.long_ttl))
        assert isinstance(token, int), f"try_acquire on a free lease returned {token!r}"
        for wrong_token, wrong_holder in _wrong_leases(token, "holder-a"):
            assert issuer.renew(name, wrong_token, wrong_holder, 1) is False
            assert issuer.release(name, wrong_token, wrong_holder) is False
        time.sleep(0.01)  # a wrongly applied 1 ms renew would have ended the lease by now
        with pytest.raises(AcquireTimeout):
            fence.acquire(timeout=0)
        assert issuer.renew(name, token, "holder-a", _millis(self.long_ttl)) is True
        assert issuer.release(name, token, "holder-a") is True
        newer = fence.acquire(timeout=0)
        _assert_after(newer, token)
        fence.release(newer)

    def test_token_of_another_fence_is_refused(self, make_fence: MakeFence) -> None:
        """A token issued for another fence name raises ``ValueError`` and changes nothing."""
        name, elsewhere = self.fresh_name("mine"), self.fresh_name("theirs")
        fence, theirs = make_fence(name, self.long_ttl), make_fence(elsewhere, self.long_ttl)
        token, foreign = fence.acquire(timeout=0), theirs.acquire(timeout=0)
        for act in (fence.renew, fence.release):
            with pytest.raises(ValueError):
                act(foreign)
            with pytest.raises(ValueError):
                act(FenceToken(int(token), elsewhere))
        with pytest.raises(AcquireTimeout):
            make_fence(elsewhere, self.long_ttl).acquire(timeout=0)
        fence.renew(token)
        theirs.renew(foreign)
        fence.release(token)
        theirs.release(foreign)

    # -- hold --------------------------------------------------------------------------

    def test_hold_keeps_the_lease_past_its_ttl(self, make_fence: MakeFence) -> None:
        """``hold()`` renews in the background: the lease outlives several ttls, the hold
        is not lost, and leaving releases it. A renewer that the machine stalled past the
        ttl loses the lease, as it must: that try says nothing, and the check is tried
        again (a hold that never keeps its lease fails it after ``patience``)."""
        name = self.fresh_name("hold")
        fence, other = make_fence(name, self.renewal_ttl), make_fence(name, self.long_ttl)
        for _ in _tries(self.patience, "a hold that kept its lease past its ttl"):
            hold = fence.hold()
            try:
                with hold as token:
                    assert_token_of(token, name)
                    assert hold.token == token
                    time.sleep(2.2 * self.renewal_ttl)
                    taken = _taken(other)
            except LeaseLost:
                continue  # its renewer was stalled past the ttl
            if not taken and not hold.lost:
                break
        newer = other.acquire(timeout=0)  # released on leaving
        _assert_after(newer, token)
        other.release(newer)

    def test_hold_surfaces_a_lost_lease(self, make_fence: MakeFence) -> None:
        """A hold whose lease expired and went to another holder raises ``LeaseLost`` on
        leaving, and leaves the new holder's lease alone; a later hold starts afresh.
        Where leases live as long as sessions, the hold's session ends instead, and its
        renewals must mark it ``lost`` while it is still inside the block."""
        name = self.fresh_name("lost")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        if self.expires_while_held:
            hold = fence.hold(auto_renew=False)
            with pytest.raises(LeaseLost) as info, hold as token:
                newer = other.acquire(timeout=self.patience)  # after the expiry
        else:
            hold = fence.hold()
            with pytest.raises(LeaseLost) as info, hold as token:
                self.end_session(fence)
                newer = other.acquire(timeout=self.patience)
                self.wait_until(lambda: hold.lost, "the hold's renewal to find the lease lost")
        assert info.value.token == token
        _assert_after(newer, token)
        with pytest.raises(AcquireTimeout):  # leaving did not touch the new lease
            make_fence(name, self.long_ttl).acquire(timeout=0)
        other.release(newer)
        for attempt in self.in_time("a second hold, taken and left"):
            with attempt:
                again = fence.hold(auto_renew=False)  # lost only if its own lease is
                with again:
                    assert not again.lost
        assert not again.lost

    # -- lost-lease signals ------------------------------------------------------------

    def end_behind_its_back(self, fence: Fence, token: int) -> None:
        """End ``fence``'s lease ``token`` at the issuer, with the holder id the fence
        recorded, as an operator's ``release --force`` would: no expiry to wait for.
        (Nothing to do once the fence forgot it: its renewal found it lost already.)"""
        holder = _holder_of(fence, token)
        if holder is not None:
            fence.issuer.release(fence.name, int(token), holder)

    def test_hold_signals_a_lost_lease(self, make_fence: MakeFence) -> None:
        """When a hold's lease ends behind its back, its renewal finds it lost:
        ``wait_lost`` returns True, each ``on_lost`` callback runs once, in the renewal
        thread, with a ``LeaseLost`` naming the token; one registered afterwards runs at
        once; leaving raises ``LeaseLost``; the next holder gets a higher token."""
        name = self.fresh_name("signal")
        fence = make_fence(name, self.short_ttl)  # renewed every ttl/3: a loss is found soon
        calls: list[tuple[LeaseLost, threading.Thread]] = []

        def record(error: LeaseLost) -> None:
            calls.append((error, threading.current_thread()))

        hold = fence.hold(on_lost=record)
        with pytest.raises(LeaseLost) as info, hold as token:
            hold.on_lost(record)  # registered on the entered hold as well
            self.end_behind_its_back(fence, token)
            assert hold.wait_lost(self.patience), f"wait_lost gave up after {self.patience}s"
            assert hold.lost
        assert info.value.token == token
        assert len(calls) == 2, f"{len(calls)} callback calls, not one per callback"
        for error, _ in calls:
            assert isinstance(error, LeaseLost) and (error.name, error.token) == (name, token)
        # the second ran at once, in this thread, if the loss was found before it came
        assert calls[0][1] is not threading.current_thread(), "on_lost ran outside the renewer"
        late: list[LeaseLost] = []
        hold.on_lost(late.append)  # after the loss: at once, with the same error
        assert late == [calls[0][0]], f"a late on_lost got {late}"
        assert hold.wait_lost(0)
        successor = make_fence(name, self.long_ttl)
        newer = successor.acquire(timeout=self.patience)
        _assert_after(newer, token, "the lost ")
        successor.release(newer)

    # -- reentrancy --------------------------------------------------------------------

    def test_reentrant_acquire_keeps_the_token_and_counts(self, make_fence: MakeFence) -> None:
        """On a reentrant fence (``Fence(issuer, name, ttl, reentrant=True)`` on the
        issuer under test) the holding thread's second ``acquire`` returns the same
        token; each ``release`` counts down and the lease ends at the last one. Another
        thread sharing that fence object, and another fence, wait as usual meanwhile."""
        name = self.fresh_name("reentrant")
        other = make_fence(name, self.long_ttl)
        fence = Fence(other.issuer, name, self.long_ttl, reentrant=True)
        token = fence.acquire(timeout=0)
        again = fence.acquire(timeout=0)  # no wait, no new lease
        assert again == token and again.name == name, f"reentered with {again}, not {token}"
        with pytest.raises(AcquireTimeout):  # the owner is the thread, not the object
            _Background(lambda: fence.acquire(timeout=0)).result(self.patience)
        fence.release(token)  # one of two: the lease stays
        with pytest.raises(AcquireTimeout):
            other.acquire(timeout=0)
        fence.renew(token)
        fence.release(token)  # the last: the lease ends
        newer = other.acquire(timeout=0)
        _assert_after(newer, token)
        with pytest.raises(LeaseLost):  # nothing left to count down
            fence.release(token)
        other.release(newer)
        fresh = fence.acquire(timeout=0)  # a new lease, counted from one again
        _assert_after(fresh, newer)
        fence.release(fresh)
        other.release(other.acquire(timeout=0))

    # -- bad input ---------------------------------------------------------------------

    @pytest.mark.parametrize(("name", "error"), BAD_NAMES, ids=_ids(BAD_NAMES))
    def test_bad_name_is_refused(
        self, make_fence: MakeFence, name: Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            make_fence(name, self.long_ttl)

    @pytest.mark.parametrize(("ttl", "error"), BAD_TTLS, ids=_ids(BAD_TTLS))
    def test_bad_ttl_is_refused_with_nothing_taken(
        self, make_fence: MakeFence, ttl: Any, error: type[Exception]
    ) -> None:
        """A bad ttl is refused by the fence and by ``renew``; the lease stays as it was."""
        name = self.fresh_name("ttl")
        with pytest.raises(error):
            make_fence(name, ttl)
        fence = make_fence(name, self.long_ttl)
        token = fence.acquire(timeout=0)
        with pytest.raises(error):
            fence.renew(token, ttl=ttl)
        with pytest.raises(AcquireTimeout):
            make_fence(name, self.long_ttl).acquire(timeout=0)
        fence.release(token)
        make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("timeout", "error"), BAD_TIMEOUTS, ids=_ids(BAD_TIMEOUTS))
    def test_bad_timeout_is_refused_with_nothing_taken(
        self, make_fence: MakeFence, timeout: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("timeout")
        fence = make_fence(name, self.long_ttl)
        with pytest.raises(error):
            fence.acquire(timeout=timeout)
        make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("token", "error"), BAD_TOKENS, ids=_ids(BAD_TOKENS))
    def test_bad_token_is_refused_with_nothing_changed(
        self, make_fence: MakeFence, token: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("token")
        fence = make_fence(name, self.long_ttl)
        held = fence.acquire(timeout=0)
        with pytest.raises(error):
            fence.renew(token)
        with pytest.raises(error):
            fence.release(token)
        with pytest.raises(AcquireTimeout):
            make_fence(name, self.long_ttl).acquire(timeout=0)
        fence.release(held)
        make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- racing ------------------------------------------------------------------------

    def test_racing_threads_are_never_two_holders(self, make_fence: MakeFence) -> None:
        """Threads that take and release one lease over and over are never inside at the
        same time, and their tokens increase in the order they got the lease. Pairs of
        threads share a fence object, as threads may share a ``threading.Lock``."""
        name = self.fresh_name("race")
        lease = _Occupancy()
        fences = [make_fence(name, self.long_ttl) for _ in range((self.racers + 1) // 2)]

        def race(fence: Fence) -> None:
            for _ in range(self.rounds):
                # no engine promises a racer its turn (Redlock's and SQL's waiters back
                # off, and a Redlock round refused on a loaded machine may leave its
                # partial locks until they expire): a timeout is tried again while the
                # race may still end in time; exclusion and order are what is checked
                for _ in _tries(self.patience * 3, "a racer's turn"):
                    with contextlib.suppress(AcquireTimeout):
                        token = fence.acquire(timeout=self.patience)
                        break
                lease.enter(token)
                time.sleep(0.001)  # a window for a second holder to show
                lease.leave()
                fence.release(token)

        racers = [partial(race, fences[i % len(fences)]) for i in range(self.racers)]
        errors = _run_threads(racers, self.patience * 4)
        lease.check(errors, self.racers * self.rounds)
