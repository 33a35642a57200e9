"""``ElectionContract`` and ``AsyncElectionContract``: the promises of a leader election
(``fencing.Election``, ``fencing.aio.Election``) on the issuer under test."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from ... import AcquireTimeout, Election, Fence, Leader, LeaseLost, Term
from ..._lease.async_fence import AsyncFence
from ..._primitives.election import AsyncElection, AsyncTerm
from ...issuer import AsyncWatchesLease, WatchesLease
from ._drive import ASYNCIO, BLOCKING, Driven, Scenario
from ._helpers import (
    BAD_NAMES,
    BAD_TTLS,
    MakeAsyncFence,
    MakeFence,
    _assert_after,
    _holder_of,
    assert_increasing,
    assert_token_of,
)
from ._terms import LeaseTerms

_MakeFence = Callable[[str, float], "Fence | AsyncFence"]
_MakeElection = Callable[[str, float], "Election | AsyncElection"]

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


class _ElectionScenarios(Driven, LeaseTerms):
    """The checks of both election contracts, each a scenario of its driver. Provide
    the ``make_fence`` fixture of the fence contract of the same kind (the elections are
    made on its fences' issuer, which must have ``status``: ``fencing.issuer.Inspects``),
    or override ``make_election(name, ttl)`` itself."""

    #: The election class of the driver's kind.
    election_class: ClassVar[type[Election] | type[AsyncElection]]
    #: Keywords of ``campaign`` refused (only asyncio's ``cancel_on_loss``), with errors.
    bad_campaign_keywords: ClassVar[tuple[tuple[dict[str, Any], type[Exception]], ...]] = ()
    #: Whether ``run`` cancels its function when the term is lost (asyncio: its task),
    #: rather than waiting for it to return (blocking).
    run_cancels: ClassVar[bool] = False

    @pytest.fixture
    def make_election(self, make_fence: _MakeFence) -> _MakeElection:
        """``make_election(name, ttl)``: an election on a fresh fence's issuer."""
        return lambda name, ttl: self.election_class(make_fence(name, ttl).issuer, name, ttl)  # type: ignore[arg-type]

    @staticmethod
    def end_behind_its_back(term: Term | AsyncTerm) -> Scenario[None]:
        """End ``term``'s lease at the issuer (see ``FenceContract.end_behind_its_back``)."""
        fence = term._hold._fence
        holder = _holder_of(fence, term.token)
        if holder is not None:
            yield fence.issuer.release(fence.name, int(term.token), holder)

    def test_one_term_at_a_time_and_resign_hands_over(
        self, make_election: _MakeElection
    ) -> Scenario[None]:
        """A leader's term excludes every other candidate; ``leader()``, from another
        election object, shows its value and token; ``resign`` hands over at once (the
        waiting candidate is elected long before the resigned term's ttl), with a higher
        token; leaving the new term's ``with`` block resigns it."""
        name = self.fresh_name("election")
        forever = 10 * self.patience  # a term that could only end by resigning
        one, two = make_election(name, forever), make_election(name, forever)
        assert (yield two.leader()) is None, "a leader in a new election"
        first = yield one.campaign("a", timeout=0)
        assert_token_of(first.token, name)
        assert first.value == "a" and not first.lost
        leader = yield two.leader()
        assert leader == Leader("a", first.token), f"leader {leader}"
        with pytest.raises(AcquireTimeout):
            yield two.campaign("b", timeout=0)

        def campaign() -> Scenario[Term | AsyncTerm]:
            term: Term | AsyncTerm = yield two.campaign("b", timeout=self.patience)
            return term

        waiting = self.drive.start(campaign())
        yield first.resign()
        second = yield waiting.result(self.patience)
        _assert_after(second.token, first.token, "the resigned term's ")
        leader = yield one.leader()
        assert leader == Leader("b", second.token), f"leader {leader}"

        def live(_: object) -> Scenario[None]:
            assert not second.lost
            yield from ()

        yield from self.drive.within(second, live)
        leader = yield one.leader()
        assert leader is None, f"leader {leader} after resigning"
        yield first.resign()  # a second resign changes nothing
        assert (yield one.leader()) is None

    def test_a_lost_term_is_signalled_and_replaced(
        self, make_election: _MakeElection
    ) -> Scenario[None]:
        """A term whose lease ends behind its back is found lost by its renewal: its
        ``on_lost`` runs once, ``wait_lost`` returns True, the next candidate is elected
        with a higher token, and leaving the lost term raises ``LeaseLost``."""
        name = self.fresh_name("lost-term")
        one, two = make_election(name, self.short_ttl), make_election(name, self.long_ttl)
        term = yield one.campaign("a", timeout=0)
        calls: list[LeaseLost] = []
        term.on_lost(calls.append)
        yield from self.end_behind_its_back(term)
        assert (yield term.wait_lost(self.patience)), f"wait_lost gave up after {self.patience}s"
        assert term.lost and len(calls) == 1 and calls[0].token == term.token, f"{calls}"
        successor = yield two.campaign("b", timeout=self.patience)
        _assert_after(successor.token, term.token, "the lost term's ")
        leader = yield one.leader()
        assert leader == Leader("b", successor.token), f"leader {leader}"
        with pytest.raises(LeaseLost):
            yield from self.drive.within(term)
        yield successor.resign()

    def test_observers_see_every_change(self, make_election: _MakeElection) -> Scenario[None]:
        """``observe()`` reports no leader, then each term, in order, and no leader
        again, each change once. On an issuer with a watch (``WatchesLease``) the
        observer polls only every 600 s: the watch must wake it (a Redis server must
        publish keyspace notifications, see ``fencing.redis._watch``)."""
        name = self.fresh_name("observe")
        watcher, one = make_election(name, self.long_ttl), make_election(name, self.long_ttl)
        seen: list[Leader | None] = []

        def watch() -> Scenario[None]:
            changes = watcher.observe(poll=_poll(watcher.issuer))
            while not (seen and seen[-1] is None and any(_of_b(x) for x in seen)):
                seen.append((yield self.drive.next(changes)))
            yield self.drive.close(changes)

        observer = self.drive.start(watch())

        def reported(token: object) -> Callable[[], bool]:
            return _reported(seen, token, observer.check)

        yield from self.drive.until(reported(None), "the observer's first look", self.patience)
        first = yield one.campaign("a", timeout=0)
        yield from self.drive.until(reported(first.token), "term a seen", self.patience)
        yield first.resign()
        second = yield one.campaign("b", timeout=self.patience)
        yield from self.drive.until(reported(second.token), "term b seen", self.patience)
        yield second.resign()
        yield observer.result(self.patience)
        _changes(seen)

    def runs_again_after_a_loss(self, make_election: _MakeElection) -> Scenario[None]:
        """``run(fn, value)`` calls ``fn`` with a term; once that term is lost (blocking:
        ``fn`` returns; asyncio: ``fn``'s task is cancelled) it campaigns again and calls
        ``fn`` with a newer term; a ``fn`` that returns on a live term ends ``run`` with
        its result, the term resigned."""
        name = self.fresh_name("run")
        election = make_election(name, self.short_ttl)
        terms: list[Term | AsyncTerm] = []
        returned_lost: list[bool] = []

        def lead(term: Term | AsyncTerm) -> Scenario[str]:
            terms.append(term)
            if len(terms) > 1:
                return "led"
            yield from self.end_behind_its_back(term)
            if self.run_cancels:
                yield self.drive.sleep(self.patience)  # cancelled long before
            else:
                assert (yield term.wait_lost(self.patience))
            returned_lost.append(True)
            return "lost"

        result = yield election.run(self.drive.callback(lead), "a")
        assert result == "led", f"run returned {result!r}"
        # two terms; more only if a stalled machine let a later one expire as well
        assert len(terms) >= 2, f"{len(terms)} terms"
        assert_increasing([term.token for term in terms], "term tokens")
        if self.run_cancels:
            assert not returned_lost, "fn ran on past the loss of its term"
        leader = yield election.leader()
        assert leader is None, f"leader {leader} after run"

    def test_bad_input_is_refused_with_nothing_taken(
        self, make_election: _MakeElection, make_fence: _MakeFence
    ) -> Scenario[None]:
        name = self.fresh_name("bad")
        election = make_election(name, self.long_ttl)
        lead = self.drive.callback(_never_called)
        for value, error in BAD_VALUES:
            with pytest.raises(error):
                yield election.campaign(value)
            with pytest.raises(error):
                yield election.run(lead, value)
        for timeout, error in [(-1, ValueError), (math.nan, ValueError), ("x", TypeError)]:
            with pytest.raises(error):
                yield election.campaign("a", timeout=timeout)  # type: ignore[arg-type]
        for keywords, error in self.bad_campaign_keywords:
            with pytest.raises(error):
                yield election.campaign("a", **keywords)
        for poll, error in [(0, ValueError), (None, ValueError), ("x", TypeError)]:
            with pytest.raises(error):
                election.observe(poll=poll)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            yield election.run("not callable", "a")  # type: ignore[arg-type]
        issuer = make_fence(name, self.long_ttl).issuer
        for bad_name, error in BAD_NAMES:
            with pytest.raises(error):
                self.election_class(issuer, bad_name, self.long_ttl)  # type: ignore[arg-type]
        for ttl, error in BAD_TTLS:
            with pytest.raises(error):
                self.election_class(issuer, name, ttl)  # type: ignore[arg-type]
        assert (yield election.leader()) is None, "a refused call took the lead"
        yield (yield election.campaign("a", timeout=0)).resign()


def _of_b(leader: Leader | None) -> bool:
    return leader is not None and leader.value == "b"


def _never_called(term: object) -> Scenario[None]:
    """A ``run`` function for calls refused before they campaign."""
    raise AssertionError(f"a refused run called its function with {term}")
    yield


class ElectionContract(_ElectionScenarios):
    """The promises of ``fencing.Election`` on a blocking issuer: one term at a time,
    term tokens strictly increasing, ``resign`` handing over at once, a lost term
    signalled and replaced, observers seeing every change in order, ``run`` campaigning
    again after a loss, and bad input refused with nothing taken.

    Provide the ``make_fence`` fixture of ``FenceContract`` (the elections are made on
    its fences' issuer, which must have ``status``: ``fencing.issuer.Inspects``), or
    override ``make_election(name, ttl)`` itself.
    """

    drive = BLOCKING
    election_class = Election

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Provided by the subclass, as for ``FenceContract``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    test_run_campaigns_again_after_a_loss = BLOCKING.test(
        _ElectionScenarios.runs_again_after_a_loss
    )


class AsyncElectionContract(_ElectionScenarios):
    """The promises of ``fencing.aio.Election`` (see ``ElectionContract``); ``run``'s
    task is cancelled when its term is lost. Provide ``make_fence`` as for
    ``AsyncFenceContract``."""

    drive = ASYNCIO
    election_class = AsyncElection
    bad_campaign_keywords = (({"cancel_on_loss": 1}, TypeError),)
    run_cancels = True

    @pytest.fixture
    def make_fence(self) -> MakeAsyncFence:
        """Provided by the subclass, as for ``AsyncFenceContract``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    test_run_cancels_a_lost_term_and_campaigns_again = ASYNCIO.test(
        _ElectionScenarios.runs_again_after_a_loss
    )
