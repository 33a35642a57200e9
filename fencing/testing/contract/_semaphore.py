"""``SemaphoreContract`` and ``AsyncSemaphoreContract``: the promises of a semaphore of N
permits, checked through ``fencing.Semaphore`` / ``fencing.aio.Semaphore``.

A permit is (slot, token). What is checked: N permits are N distinct slots of
``range(N)`` and the N+1st acquirer waits; each slot's tokens strictly increase across
release and expiry; a waiter gets a permit once a holder releases; renew and release of
a permit no longer held raise ``LeaseLost``; ``hold()`` keeps a permit past its ttl;
racing threads (or tasks) are never more than N at once nor two on one slot; bad input
is refused with ``TypeError``/``ValueError`` and nothing taken, and so is a name that
Redis cannot use (one that starts with ``}``), on every backend, so that a name works on
all of them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from ... import AcquireTimeout, LeaseLost
from ..._primitives.semaphore import AsyncSemaphore, Permit, Semaphore, slot_name
from ._drive import ASYNCIO, BLOCKING, Driven, Scenario
from ._helpers import _refuses, assert_increasing, assert_token_of
from ._terms import LeaseTerms

#: ``make_semaphore(name, permits, ttl)``: a fresh blocking semaphore on the backend.
MakeSemaphore = Callable[[str, int, float], Semaphore]
#: ``make_semaphore(name, permits, ttl)``: a fresh asyncio semaphore on the backend.
MakeAsyncSemaphore = Callable[[str, int, float], AsyncSemaphore]
_Semaphore = Semaphore | AsyncSemaphore
_MakeSemaphore = Callable[[str, int, float], _Semaphore]

#: Refused ``permits`` (of a semaphore) and ``limit`` (of a limiter).
BAD_COUNTS: list[tuple[Any, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (True, TypeError),
    (1.0, TypeError),
    ("2", TypeError),
    (None, TypeError),
]


class _Slots:
    """What racers report: holders now and at most, per slot and in all, and each slot's
    tokens in the order its holders got in. Thread-safe; tasks may share it too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside: dict[int, int] = defaultdict(int)
        self.most_in_a_slot = 0
        self.most = 0
        self.order: dict[int, list[int]] = defaultdict(list)

    def enter(self, permit: Permit) -> None:
        with self._lock:
            self._inside[permit.slot] += 1
            self.most_in_a_slot = max(self.most_in_a_slot, self._inside[permit.slot])
            self.most = max(self.most, sum(self._inside.values()))
            self.order[permit.slot].append(permit.token)

    def leave(self, permit: Permit) -> None:
        with self._lock:
            self._inside[permit.slot] -= 1

    def check(self, errors: Sequence[BaseException], permits: int, acquisitions: int) -> None:
        assert not errors, f"racers failed: {errors!r}"
        assert self.most <= permits, f"{self.most} holders at once with {permits} permits"
        assert self.most_in_a_slot == 1, f"{self.most_in_a_slot} holders of one slot at once"
        got = sum(map(len, self.order.values()))
        assert got == acquisitions, f"{got} of {acquisitions} acquisitions"
        for slot, tokens in self.order.items():
            assert 0 <= slot < permits, f"slot {slot} of a semaphore of {permits} permits"
            assert_increasing(tokens, f"tokens of slot {slot} in acquisition order")


def _check_lowered(slots: _Slots, errors: Sequence[BaseException], room: int) -> None:
    """What racers of a lower ``permits`` report while a wider client keeps a slot above
    theirs: never more than ``room`` of them at once, one per slot, someone got in."""
    assert not errors, f"racers failed: {errors!r}"
    assert slots.most <= room, f"{slots.most} new holders at once with room for {room}"
    assert slots.most_in_a_slot == 1, f"{slots.most_in_a_slot} holders of one slot at once"
    assert sum(map(len, slots.order.values())) > 0, "no racer ever got a permit"


def _check_permits(permits: Sequence[Permit], name: str, count: int) -> None:
    """``permits`` are one of each slot of ``name``, each with its slot's token."""
    assert sorted(p.slot for p in permits) == list(range(count)), (
        f"slots {sorted(p.slot for p in permits)} for {count} permits"
    )
    for permit in permits:
        assert permit.semaphore == name, f"permit of {permit.semaphore!r}, not {name!r}"
        assert_token_of(permit.token, slot_name(name, permit.slot))


class _Renewed(logging.Handler):
    """Collects the fence names of the renewals logged on ``fencing.renew``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.names: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and record.args:
            self.names.add(str(record.args[0]))


@contextlib.contextmanager
def _renewals() -> Iterator[set[str]]:
    """The fence names renewed while in the block (``fencing.renew`` at debug level)."""
    logger = logging.getLogger("fencing.renew")
    handler, level = _Renewed(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.names
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _by_slot(permits: Sequence[Permit]) -> dict[int, int]:
    return {p.slot: int(p.token) for p in permits}


def _assert_higher(before: dict[int, int], after: dict[int, int]) -> None:
    for slot, token in after.items():
        if slot in before:
            assert token > before[slot], f"slot {slot}: token {token} after {before[slot]}"


def _bad_permits(permit: Permit, foreign: Permit) -> list[tuple[Any, type[Exception]]]:
    """Things passed as ``permit`` that must be refused before any I/O."""
    return [
        (permit.token, TypeError),
        (None, TypeError),
        (foreign, ValueError),
        (Permit(permit.semaphore, 5, permit.token), ValueError),
    ]


class _SemaphoreScenarios(Driven, LeaseTerms):
    """The checks of both semaphore contracts, each a scenario of its driver."""

    permits: int = 3
    #: Seconds: the ttl of a permit kept by ``hold()``, renewed every third of it; the
    #: hold check waits for a renewal (the ``fencing.renew`` log), not for the ttl.
    hold_ttl: float = 1.5
    #: The racing check: this many racers (more than ``permits``) take permits this often.
    semaphore_racers: int = 6
    semaphore_rounds: int = 10

    def _acquire_all(
        self, semaphore: _Semaphore, count: int, timeout: float = 0
    ) -> Scenario[list[Permit]]:
        """``count`` permits of ``semaphore``, each acquired with ``timeout``."""
        permits: list[Permit] = []
        for _ in range(count):
            permits.append((yield semaphore.acquire(timeout=timeout)))
        return permits

    def test_permits_are_distinct_slots_and_one_more_waits(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name = self.fresh_name("slots")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        held = yield from self._acquire_all(semaphore, self.permits)
        _check_permits(held, name, self.permits)
        with pytest.raises(AcquireTimeout):
            yield make_semaphore(name, self.permits, self.long_ttl).acquire(timeout=0)
        for permit in held:
            yield semaphore.release(permit)

    def test_tokens_increase_per_slot_across_release_and_expiry(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name = self.fresh_name("tokens")
        one = make_semaphore(name, self.permits, self.long_ttl)
        first = yield from self._acquire_all(one, self.permits)
        for permit in first:
            yield one.release(permit)
        other = make_semaphore(name, self.permits, self.short_ttl)
        second = yield from self._acquire_all(other, self.permits)  # left to expire
        _check_permits(second, name, self.permits)
        _assert_higher(_by_slot(first), _by_slot(second))
        if not self.expires_while_held:  # a lease lives with its session: end the session
            self.end_session(other.fences[0])
        third = yield from self._acquire_all(one, self.permits, self.patience)
        _check_permits(third, name, self.permits)
        _assert_higher(_by_slot(second), _by_slot(third))
        for permit in second:
            with pytest.raises(LeaseLost):
                yield other.release(permit)
        for permit in third:
            yield one.release(permit)

    def test_waiter_gets_a_permit_when_a_holder_releases(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name = self.fresh_name("waiter")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        held = yield from self._acquire_all(semaphore, self.permits)

        def wait() -> Scenario[Permit]:
            permit: Permit = yield make_semaphore(name, self.permits, self.long_ttl).acquire()
            return permit

        waiter = self.drive.start(wait())
        yield self.drive.sleep(0)  # a task starts, a thread may
        yield semaphore.release(held[-1])
        got = yield waiter.result(self.patience)
        assert got.slot == held[-1].slot, f"slot {got.slot} freed, not {held[-1].slot}"
        assert got.token > held[-1].token, f"token {got.token} after {held[-1].token}"

    def test_a_lower_permits_lets_no_new_holder_in_until_the_count_is_under_it(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name = self.fresh_name("lowered")
        wide = make_semaphore(name, 3, self.long_ttl)
        held = sorted((yield from self._acquire_all(wide, 3)), key=lambda p: p.slot)
        narrow = make_semaphore(name, 2, self.long_ttl)
        yield wide.release(held[0])  # slot 0 free, two holders: as many as narrow's permits
        with pytest.raises(AcquireTimeout):
            yield narrow.acquire(timeout=0)
        yield wide.release(held[1])  # one holder (slot 2): narrow may let one in
        permit = yield narrow.acquire(timeout=0)
        assert permit.slot in range(2), f"slot {permit.slot} of a semaphore of 2 permits"
        yield narrow.release(permit)
        yield wide.release(held[2])

    def test_renew_and_release_only_while_held(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name = self.fresh_name("held")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        permit = yield semaphore.acquire(timeout=0)
        yield semaphore.renew(permit, ttl=self.long_ttl)
        yield semaphore.release(permit)
        with pytest.raises(LeaseLost):
            yield semaphore.renew(permit)
        with pytest.raises(LeaseLost):
            yield semaphore.release(permit)

    def test_hold_renews_the_permit_and_releases_it(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name = self.fresh_name("hold")
        semaphore = make_semaphore(name, 1, self.hold_ttl)
        hold = semaphore.hold(timeout=0)

        def renewed_meanwhile(permit: Permit) -> Scenario[Permit]:
            assert hold.permit == permit and hold.token == permit.token
            seen = lambda: permit.token.name in renewed  # noqa: E731
            yield from self.drive.until(seen, "a renewal by hold()", self.patience)
            assert not hold.lost, "hold() lost a permit it was renewing"
            with pytest.raises(AcquireTimeout):
                yield make_semaphore(name, 1, self.long_ttl).acquire(timeout=0)
            return permit

        with _renewals() as renewed:
            permit = yield from self.drive.within(hold, renewed_meanwhile)
        after = yield make_semaphore(name, 1, self.long_ttl).acquire(timeout=0)
        assert after.token > permit.token

    def test_bad_permits_are_refused(self, make_semaphore: _MakeSemaphore) -> Scenario[None]:
        """Each of ``BAD_COUNTS``, in one test (refused before any I/O)."""
        for permits, error in BAD_COUNTS:
            with _refuses(error, f"permits {permits!r}"):
                make_semaphore(self.fresh_name("bad"), permits, self.long_ttl)
        yield from ()

    def test_a_name_that_redis_cannot_use_is_refused_everywhere(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        with pytest.raises(ValueError, match="must not start with"):
            make_semaphore("}" + self.fresh_name("brace"), 2, self.long_ttl)
        yield from ()

    def test_a_permit_of_another_semaphore_is_refused_with_nothing_changed(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name, other = self.fresh_name("mine"), self.fresh_name("theirs")
        semaphore = make_semaphore(name, 1, self.long_ttl)
        theirs = make_semaphore(other, 2, self.long_ttl)
        permit = yield semaphore.acquire(timeout=0)
        foreign = yield theirs.acquire(timeout=0)
        for bad, error in _bad_permits(permit, foreign):
            with pytest.raises(error):
                yield semaphore.release(bad)
            with pytest.raises(error):
                yield semaphore.renew(bad)
        yield semaphore.release(permit)  # still held: nothing was released by the bad calls
        yield theirs.release(foreign)

    def _race(
        self, semaphores: Sequence[_Semaphore], slots: _Slots, timeout: float
    ) -> Scenario[list[Exception]]:
        """``semaphore_racers`` racers (threads, or tasks) over ``semaphores`` in turn,
        each acquiring ``semaphore_rounds`` times with ``timeout`` (a round refused at
        once, with 0, is skipped), holding a moment and releasing, reported to
        ``slots``; their errors."""

        def race(semaphore: _Semaphore) -> Scenario[None]:
            for _ in range(self.semaphore_rounds):
                try:
                    permit = yield semaphore.acquire(timeout=timeout)
                except AcquireTimeout:
                    if timeout:
                        raise
                    continue
                slots.enter(permit)
                yield self.drive.sleep(0.002)  # a window for one holder too many to show
                slots.leave(permit)
                yield semaphore.release(permit)

        racers = [race(semaphores[i % 2]) for i in range(self.semaphore_racers)]
        errors: list[Exception] = yield self.drive.race(racers, self.patience * 4)
        return errors

    def racers_never_exceed_the_permits(self, make_semaphore: _MakeSemaphore) -> Scenario[None]:
        name = self.fresh_name("race")
        slots = _Slots()
        semaphores = [make_semaphore(name, self.permits, self.long_ttl) for _ in range(2)]
        errors = yield from self._race(semaphores, slots, self.patience)
        slots.check(errors, self.permits, self.semaphore_racers * self.semaphore_rounds)

    def racers_of_a_lower_permits_never_exceed_it(
        self, make_semaphore: _MakeSemaphore
    ) -> Scenario[None]:
        name = self.fresh_name("lowered-race")
        wide = make_semaphore(name, self.permits + 1, self.long_ttl)
        held = yield from self._acquire_all(wide, self.permits + 1)
        for permit in held:
            if permit.slot != self.permits:  # keep the one slot the others cannot take
                yield wide.release(permit)
        slots = _Slots()
        semaphores = [make_semaphore(name, self.permits, self.long_ttl) for _ in range(2)]
        errors = yield from self._race(semaphores, slots, 0)
        _check_lowered(slots, errors, self.permits - 1)
        yield wide.release(next(p for p in held if p.slot == self.permits))


class SemaphoreContract(_SemaphoreScenarios):
    """The promises of a semaphore on a blocking backend. Provide ``make_semaphore(name,
    permits, ttl)`` returning a fresh ``fencing.Semaphore``; every call with the same name
    must reach the same slots (the same issuer)."""

    drive = BLOCKING

    @pytest.fixture
    def make_semaphore(self) -> MakeSemaphore:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_semaphore fixture")

    test_racing_threads_never_exceed_the_permits = BLOCKING.test(
        _SemaphoreScenarios.racers_never_exceed_the_permits
    )
    test_racing_threads_of_a_lower_permits_never_exceed_it = BLOCKING.test(
        _SemaphoreScenarios.racers_of_a_lower_permits_never_exceed_it
    )


class AsyncSemaphoreContract(_SemaphoreScenarios):
    """The promises of ``SemaphoreContract`` for ``fencing.aio.Semaphore``, as coroutines,
    with tasks where it uses threads."""

    drive = ASYNCIO

    @pytest.fixture
    def make_semaphore(self) -> MakeAsyncSemaphore:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_semaphore fixture")

    test_racing_tasks_never_exceed_the_permits = ASYNCIO.test(
        _SemaphoreScenarios.racers_never_exceed_the_permits
    )
    test_racing_tasks_of_a_lower_permits_never_exceed_it = ASYNCIO.test(
        _SemaphoreScenarios.racers_of_a_lower_permits_never_exceed_it
    )


__all__ = [
    "BAD_COUNTS",
    "AsyncSemaphoreContract",
    "MakeAsyncSemaphore",
    "MakeSemaphore",
    "SemaphoreContract",
]
