"""``ElectionContract`` and ``AsyncElectionContract``: the promises of a leader election
(``fencing.Election``, ``fencing.aio.Election``) on the issuer under test."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections.abc import Callable
from typing import Any

import pytest

from ... import AcquireTimeout, Election, Leader, LeaseLost, Term
from ..._primitives.election import AsyncElection, AsyncTerm
from ...issuer import AsyncWatchesLease, WatchesLease
from ._helpers import (
    BAD_NAMES,
    BAD_TTLS,
    MakeAsyncElection,
    MakeAsyncFence,
    MakeElection,
    MakeFence,
    _assert_after,
    _Background,
    _holder_of,
    _tries,
    assert_increasing,
    assert_token_of,
)
from ._terms import LeaseTerms

#: Refused candidate values, with the error each must raise.
BAD_VALUES: list[tuple[Any, type[Exception]]] = [
    ("", ValueError),
    (5, TypeError),
    (True, TypeError),
    (None, TypeError),
    (b"a", TypeError),
    ("x" * 33, ValueError),  # fencing._primitives.election.MAX_VALUE
    ("nul\x00", ValueError),
    ("lone \ud800", ValueError),
]


#: The polling period of an observer on an issuer with a watch: far longer than any
#: wait of a test, so a change seen in time came through the engine's watch.
NEVER_POLLED = 600.0
#: The polling period of an observer on an issuer without one.
POLLED = 0.02


def _poll(issuer: object) -> float:
    """How often the contract's observer polls ``issuer``: never in a test's time when it
    has a watch (``WatchesLease``/``AsyncWatchesLease``), so the watch must wake it."""
    return NEVER_POLLED if isinstance(issuer, (WatchesLease, AsyncWatchesLease)) else POLLED


def _reported(
    seen: list[Leader | None], token: object, check: Callable[[], object]
) -> Callable[[], bool]:
    """A wait's condition: the observer reported ``token`` (``None``: anything). ``check``
    comes first: it re-raises the error of an observer that died, failing the test at
    once instead of at the wait's deadline."""

    def condition() -> bool:
        check()
        return any(token is None or (x is not None and x.token == token) for x in seen)

    return condition


def _changes(seen: list[Leader | None]) -> None:
    """Fail unless ``seen`` (what an observer reported) starts and ends with no leader,
    reports every change once, shows the terms of "a" then "b", tokens increasing."""
    assert seen[0] is None and seen[-1] is None, f"observed {seen}"
    assert all(x != y for x, y in itertools.pairwise(seen)), f"a change reported twice: {seen}"
    terms = [leader for leader in seen if leader is not None]
    assert [leader.value for leader in terms] == ["a", "b"], f"observed {seen}"
    _assert_after(terms[1].token, terms[0].token, "the first term's ")


class ElectionContract(LeaseTerms):
    """The promises of ``fencing.Election`` on a blocking issuer: one term at a time,
    term tokens strictly increasing, ``resign`` handing over at once, a lost term
    signalled and replaced, observers seeing every change in order, ``run`` campaigning
    again after a loss, and bad input refused with nothing taken.

    Provide the ``make_fence`` fixture of ``FenceContract`` (the elections are made on
    its fences' issuer, which must have ``status``: ``fencing.issuer.Inspects``), or
    override ``make_election(name, ttl)`` itself.
    """

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Provided by the subclass, as for ``FenceContract``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    @pytest.fixture
    def make_election(self, make_fence: MakeFence) -> MakeElection:
        """``make_election(name, ttl)``: an ``Election`` on a fresh fence's issuer."""
        return lambda name, ttl: Election(make_fence(name, ttl).issuer, name, ttl)

    @staticmethod
    def end_behind_its_back(term: Term) -> None:
        """End ``term``'s lease at the issuer (see ``FenceContract.end_behind_its_back``)."""
        fence = term._hold._fence
        holder = _holder_of(fence, term.token)
        if holder is not None:
            fence.issuer.release(fence.name, int(term.token), holder)

    def test_one_term_at_a_time_and_resign_hands_over(self, make_election: MakeElection) -> None:
        """A leader's term excludes every other candidate; ``leader()``, from another
        election object, shows its value and token; ``resign`` hands over at once (the
        waiting candidate is elected long before the resigned term's ttl), with a higher
        token; leaving the new term's ``with`` block resigns it."""
        name = self.fresh_name("election")
        forever = 10 * self.patience  # a term that could only end by resigning
        one, two = make_election(name, forever), make_election(name, forever)
        assert two.leader() is None, "a leader in a new election"
        first = one.campaign("a", timeout=0)
        assert_token_of(first.token, name)
        assert first.value == "a" and not first.lost
        assert two.leader() == Leader("a", first.token), f"leader {two.leader()}"
        with pytest.raises(AcquireTimeout):
            two.campaign("b", timeout=0)
        waiting = _Background(lambda: two.campaign("b", timeout=self.patience))
        first.resign()
        second = waiting.result(self.patience)
        _assert_after(second.token, first.token, "the resigned term's ")
        assert one.leader() == Leader("b", second.token), f"leader {one.leader()}"
        with second:
            assert not second.lost
        assert one.leader() is None, f"leader {one.leader()} after resigning"
        first.resign()  # a second resign changes nothing
        assert one.leader() is None

    def test_a_lost_term_is_signalled_and_replaced(self, make_election: MakeElection) -> None:
        """A term whose lease ends behind its back is found lost by its renewal: its
        ``on_lost`` runs once, ``wait_lost`` returns True, the next candidate is elected
        with a higher token, and leaving the lost term raises ``LeaseLost``."""
        name = self.fresh_name("lost-term")
        one, two = make_election(name, self.short_ttl), make_election(name, self.long_ttl)
        term = one.campaign("a", timeout=0)
        calls: list[LeaseLost] = []
        term.on_lost(calls.append)
        self.end_behind_its_back(term)
        assert term.wait_lost(self.patience), f"wait_lost gave up after {self.patience}s"
        assert term.lost and len(calls) == 1 and calls[0].token == term.token, f"{calls}"
        successor = two.campaign("b", timeout=self.patience)
        _assert_after(successor.token, term.token, "the lost term's ")
        assert one.leader() == Leader("b", successor.token), f"leader {one.leader()}"
        with pytest.raises(LeaseLost), term:
            pass
        successor.resign()

    def test_observers_see_every_change(self, make_election: MakeElection) -> None:
        """``observe()`` reports no leader, then each term, in order, and no leader
        again, each change once. On an issuer with a watch (``WatchesLease``) the
        observer polls only every 600 s: the watch must wake it (a Redis server must
        publish keyspace notifications, see ``fencing.redis._watch``)."""
        name = self.fresh_name("observe")
        watcher, one = make_election(name, self.long_ttl), make_election(name, self.long_ttl)
        seen: list[Leader | None] = []

        def watch() -> None:
            for leader in watcher.observe(poll=_poll(watcher.issuer)):
                seen.append(leader)
                if leader is None and any(x is not None and x.value == "b" for x in seen):
                    return

        observer = _Background(watch)

        def reported(token: object) -> Callable[[], bool]:
            return _reported(seen, token, lambda: observer.running() or observer.result(0))

        self.wait_until(reported(None), "the observer's first look")
        first = one.campaign("a", timeout=0)
        self.wait_until(reported(first.token), "term a seen")
        first.resign()
        second = one.campaign("b", timeout=self.patience)
        self.wait_until(reported(second.token), "term b seen")
        second.resign()
        observer.result(self.patience)
        _changes(seen)

    def test_run_campaigns_again_after_a_loss(self, make_election: MakeElection) -> None:
        """``run(fn, value)`` calls ``fn`` with a term; once that term is lost and ``fn``
        returns, it campaigns again and calls ``fn`` with a newer term; a ``fn`` that
        returns on a live term ends ``run`` with its result, the term resigned."""
        name = self.fresh_name("run")
        election = make_election(name, self.short_ttl)
        terms: list[Term] = []

        def lead(term: Term) -> str:
            terms.append(term)
            if len(terms) == 1:
                self.end_behind_its_back(term)
                assert term.wait_lost(self.patience)
                return "lost"
            return "led"

        assert election.run(lead, "a") == "led"
        # two terms; more only if a stalled machine let a later one expire as well
        assert len(terms) >= 2, f"{len(terms)} terms"
        assert_increasing([term.token for term in terms], "term tokens")
        assert election.leader() is None, f"leader {election.leader()} after run"

    def test_bad_input_is_refused_with_nothing_taken(
        self, make_election: MakeElection, make_fence: MakeFence
    ) -> None:
        name = self.fresh_name("bad")
        election = make_election(name, self.long_ttl)
        for value, error in BAD_VALUES:
            with pytest.raises(error):
                election.campaign(value)
            with pytest.raises(error):
                election.run(lambda term: None, value)
        for timeout, error in [(-1, ValueError), (math.nan, ValueError), ("x", TypeError)]:
            with pytest.raises(error):
                election.campaign("a", timeout=timeout)  # type: ignore[arg-type]
        for poll, error in [(0, ValueError), (None, ValueError), ("x", TypeError)]:
            with pytest.raises(error):
                election.observe(poll=poll)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            election.run("not callable", "a")  # type: ignore[arg-type]
        issuer = make_fence(name, self.long_ttl).issuer
        for bad_name, error in BAD_NAMES:
            with pytest.raises(error):
                Election(issuer, bad_name, self.long_ttl)
        for ttl, error in BAD_TTLS:
            with pytest.raises(error):
                Election(issuer, name, ttl)
        assert election.leader() is None, "a refused call took the lead"
        election.campaign("a", timeout=0).resign()


class AsyncElectionContract(LeaseTerms):
    """The promises of ``fencing.aio.Election`` (see ``ElectionContract``); ``run``'s
    task is cancelled when its term is lost. Provide ``make_fence`` as for
    ``AsyncFenceContract``."""

    @pytest.fixture
    def make_fence(self) -> MakeAsyncFence:
        """Provided by the subclass, as for ``AsyncFenceContract``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    @pytest.fixture
    def make_election(self, make_fence: MakeAsyncFence) -> MakeAsyncElection:
        """``make_election(name, ttl)``: an ``AsyncElection`` on a fresh fence's issuer."""
        return lambda name, ttl: AsyncElection(make_fence(name, ttl).issuer, name, ttl)

    @staticmethod
    async def end_behind_its_back(term: AsyncTerm) -> None:
        """See ``ElectionContract.end_behind_its_back``."""
        fence = term._hold._fence
        holder = _holder_of(fence, term.token)
        if holder is not None:
            await fence.issuer.release(fence.name, int(term.token), holder)

    async def await_until(self, condition: Any, what: str) -> None:
        for _ in _tries(self.patience, what):
            if condition():
                return
            await asyncio.sleep(0.01)

    async def test_one_term_at_a_time_and_resign_hands_over(
        self, make_election: MakeAsyncElection
    ) -> None:
        """See ``ElectionContract.test_one_term_at_a_time_and_resign_hands_over``."""
        name = self.fresh_name("election")
        forever = 10 * self.patience
        one, two = make_election(name, forever), make_election(name, forever)
        assert await two.leader() is None, "a leader in a new election"
        first = await one.campaign("a", timeout=0)
        assert_token_of(first.token, name)
        assert first.value == "a" and not first.lost
        assert await two.leader() == Leader("a", first.token)
        with pytest.raises(AcquireTimeout):
            await two.campaign("b", timeout=0)
        waiting = asyncio.create_task(two.campaign("b", timeout=self.patience))
        await first.resign()
        second = await asyncio.wait_for(waiting, self.patience)
        _assert_after(second.token, first.token, "the resigned term's ")
        assert await one.leader() == Leader("b", second.token)
        async with second:
            assert not second.lost
        assert await one.leader() is None, "a leader after resigning"
        await first.resign()
        assert await one.leader() is None

    async def test_a_lost_term_is_signalled_and_replaced(
        self, make_election: MakeAsyncElection
    ) -> None:
        """See ``ElectionContract.test_a_lost_term_is_signalled_and_replaced``."""
        name = self.fresh_name("lost-term")
        one, two = make_election(name, self.short_ttl), make_election(name, self.long_ttl)
        term = await one.campaign("a", timeout=0)
        calls: list[LeaseLost] = []
        term.on_lost(calls.append)
        await self.end_behind_its_back(term)
        assert await term.wait_lost(self.patience), f"gave up after {self.patience}s"
        assert term.lost and len(calls) == 1 and calls[0].token == term.token, f"{calls}"
        successor = await two.campaign("b", timeout=self.patience)
        _assert_after(successor.token, term.token, "the lost term's ")
        assert await one.leader() == Leader("b", successor.token)
        with pytest.raises(LeaseLost):
            async with term:
                pass
        await successor.resign()

    async def test_observers_see_every_change(self, make_election: MakeAsyncElection) -> None:
        """See ``ElectionContract.test_observers_see_every_change``."""
        name = self.fresh_name("observe")
        watcher, one = make_election(name, self.long_ttl), make_election(name, self.long_ttl)
        seen: list[Leader | None] = []

        async def watch() -> None:
            async with contextlib.aclosing(watcher.observe(_poll(watcher.issuer))) as changes:
                async for leader in changes:
                    seen.append(leader)
                    if leader is None and any(x is not None and x.value == "b" for x in seen):
                        return

        observer = asyncio.create_task(watch())

        def reported(token: object) -> Callable[[], bool]:
            return _reported(seen, token, lambda: observer.done() and observer.result())

        await self.await_until(reported(None), "the observer's first look")
        first = await one.campaign("a", timeout=0)
        await self.await_until(reported(first.token), "term a seen")
        await first.resign()
        second = await one.campaign("b", timeout=self.patience)
        await self.await_until(reported(second.token), "term b seen")
        await second.resign()
        await asyncio.wait_for(observer, self.patience)
        _changes(seen)

    async def test_run_cancels_a_lost_term_and_campaigns_again(
        self, make_election: MakeAsyncElection
    ) -> None:
        """``run(fn, value)`` runs ``fn(term)`` in a task that is cancelled when the term
        is lost; it then campaigns again and calls ``fn`` with a newer term."""
        name = self.fresh_name("run")
        election = make_election(name, self.short_ttl)
        terms: list[AsyncTerm] = []

        async def lead(term: AsyncTerm) -> str:
            terms.append(term)
            if len(terms) == 1:
                await self.end_behind_its_back(term)
                await asyncio.sleep(self.patience)  # cancelled long before
                return "slept"
            return "led"

        result = await asyncio.wait_for(election.run(lead, "a"), 2 * self.patience)
        assert result == "led", f"run returned {result!r}"
        assert len(terms) >= 2, f"{len(terms)} terms"
        assert_increasing([term.token for term in terms], "term tokens")
        assert await election.leader() is None

    async def test_bad_input_is_refused_with_nothing_taken(
        self, make_election: MakeAsyncElection, make_fence: MakeAsyncFence
    ) -> None:
        name = self.fresh_name("bad")
        election = make_election(name, self.long_ttl)

        async def lead(term: AsyncTerm) -> None:
            return None

        for value, error in BAD_VALUES:
            with pytest.raises(error):
                await election.campaign(value)
            with pytest.raises(error):
                await election.run(lead, value)
        for timeout, error in [(-1, ValueError), (math.nan, ValueError), ("x", TypeError)]:
            with pytest.raises(error):
                await election.campaign("a", timeout=timeout)  # type: ignore[arg-type]
        for poll, error in [(0, ValueError), (None, ValueError), ("x", TypeError)]:
            with pytest.raises(error):
                election.observe(poll=poll)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await election.run("not callable", "a")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await election.campaign("a", cancel_on_loss=1)  # type: ignore[arg-type]
        issuer = make_fence(name, self.long_ttl).issuer
        for bad_name, error in BAD_NAMES:
            with pytest.raises(error):
                AsyncElection(issuer, bad_name, self.long_ttl)
        for ttl, error in BAD_TTLS:
            with pytest.raises(error):
                AsyncElection(issuer, name, ttl)
        assert await election.leader() is None, "a refused call took the lead"
        await (await election.campaign("a", timeout=0)).resign()
