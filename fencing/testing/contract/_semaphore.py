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

import asyncio
import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from ... import AcquireTimeout, LeaseLost
from ..._primitives.semaphore import AsyncSemaphore, Permit, Semaphore, slot_name
from ._helpers import (
    _Background,
    _ids,
    _run_threads,
    _tries,
    assert_increasing,
    assert_token_of,
)
from ._terms import LeaseTerms

#: ``make_semaphore(name, permits, ttl)``: a fresh blocking semaphore on the backend.
MakeSemaphore = Callable[[str, int, float], Semaphore]
#: ``make_semaphore(name, permits, ttl)``: a fresh asyncio semaphore on the backend.
MakeAsyncSemaphore = Callable[[str, int, float], AsyncSemaphore]

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


class SemaphoreContract(LeaseTerms):
    """The promises of a semaphore on a blocking backend. Provide ``make_semaphore(name,
    permits, ttl)`` returning a fresh ``fencing.Semaphore``; every call with the same name
    must reach the same slots (the same issuer)."""

    permits: int = 3
    #: Seconds: the ttl of a permit kept by ``hold()``, renewed every third of it; the
    #: hold check waits for a renewal (the ``fencing.renew`` log), not for the ttl.
    hold_ttl: float = 1.5
    #: The racing check: this many threads (more than ``permits``) take permits this often.
    semaphore_racers: int = 6
    semaphore_rounds: int = 10

    @pytest.fixture
    def make_semaphore(self) -> MakeSemaphore:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_semaphore fixture")

    def test_permits_are_distinct_slots_and_one_more_waits(
        self, make_semaphore: MakeSemaphore
    ) -> None:
        name = self.fresh_name("slots")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        held = [semaphore.acquire(timeout=0) for _ in range(self.permits)]
        _check_permits(held, name, self.permits)
        with pytest.raises(AcquireTimeout):
            make_semaphore(name, self.permits, self.long_ttl).acquire(timeout=0)
        for permit in held:
            semaphore.release(permit)

    def test_tokens_increase_per_slot_across_release_and_expiry(
        self, make_semaphore: MakeSemaphore
    ) -> None:
        name = self.fresh_name("tokens")
        one = make_semaphore(name, self.permits, self.long_ttl)
        first = [one.acquire(timeout=0) for _ in range(self.permits)]
        for permit in first:
            one.release(permit)
        other = make_semaphore(name, self.permits, self.short_ttl)
        second = [other.acquire(timeout=0) for _ in range(self.permits)]  # left to expire
        _check_permits(second, name, self.permits)
        _assert_higher(_by_slot(first), _by_slot(second))
        if not self.expires_while_held:  # a lease lives with its session: end the session
            self.end_session(other.fences[0])
        third = [one.acquire(timeout=self.patience) for _ in range(self.permits)]
        _check_permits(third, name, self.permits)
        _assert_higher(_by_slot(second), _by_slot(third))
        for permit in second:
            with pytest.raises(LeaseLost):
                other.release(permit)
        for permit in third:
            one.release(permit)

    def test_waiter_gets_a_permit_when_a_holder_releases(
        self, make_semaphore: MakeSemaphore
    ) -> None:
        name = self.fresh_name("waiter")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        held = [semaphore.acquire(timeout=0) for _ in range(self.permits)]
        waiter = _Background(lambda: make_semaphore(name, self.permits, self.long_ttl).acquire())
        semaphore.release(held[-1])
        got = waiter.result(self.patience)
        assert got.slot == held[-1].slot, f"slot {got.slot} freed, not {held[-1].slot}"
        assert got.token > held[-1].token, f"token {got.token} after {held[-1].token}"

    def test_a_lower_permits_lets_no_new_holder_in_until_the_count_is_under_it(
        self, make_semaphore: MakeSemaphore
    ) -> None:
        name = self.fresh_name("lowered")
        wide = make_semaphore(name, 3, self.long_ttl)
        held = sorted((wide.acquire(timeout=0) for _ in range(3)), key=lambda p: p.slot)
        narrow = make_semaphore(name, 2, self.long_ttl)
        wide.release(held[0])  # slot 0 free, two holders: as many as narrow's permits
        with pytest.raises(AcquireTimeout):
            narrow.acquire(timeout=0)
        wide.release(held[1])  # one holder (slot 2): narrow may let one in
        permit = narrow.acquire(timeout=0)
        assert permit.slot in range(2), f"slot {permit.slot} of a semaphore of 2 permits"
        narrow.release(permit)
        wide.release(held[2])

    def test_renew_and_release_only_while_held(self, make_semaphore: MakeSemaphore) -> None:
        name = self.fresh_name("held")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        permit = semaphore.acquire(timeout=0)
        semaphore.renew(permit, ttl=self.long_ttl)
        semaphore.release(permit)
        with pytest.raises(LeaseLost):
            semaphore.renew(permit)
        with pytest.raises(LeaseLost):
            semaphore.release(permit)

    def test_hold_renews_the_permit_and_releases_it(self, make_semaphore: MakeSemaphore) -> None:
        name = self.fresh_name("hold")
        semaphore = make_semaphore(name, 1, self.hold_ttl)
        hold = semaphore.hold(timeout=0)
        with _renewals() as renewed, hold as permit:
            assert hold.permit == permit and hold.token == permit.token
            self.wait_until(lambda: permit.token.name in renewed, "a renewal by hold()")
            assert not hold.lost, "hold() lost a permit it was renewing"
            with pytest.raises(AcquireTimeout):
                make_semaphore(name, 1, self.long_ttl).acquire(timeout=0)
        after = make_semaphore(name, 1, self.long_ttl).acquire(timeout=0)
        assert after.token > permit.token

    @pytest.mark.parametrize(("permits", "error"), BAD_COUNTS, ids=_ids(BAD_COUNTS))
    def test_bad_permits_are_refused(
        self, make_semaphore: MakeSemaphore, permits: Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            make_semaphore(self.fresh_name("bad"), permits, self.long_ttl)

    def test_a_name_that_redis_cannot_use_is_refused_everywhere(
        self, make_semaphore: MakeSemaphore
    ) -> None:
        with pytest.raises(ValueError, match="must not start with"):
            make_semaphore("}" + self.fresh_name("brace"), 2, self.long_ttl)

    def test_a_permit_of_another_semaphore_is_refused_with_nothing_changed(
        self, make_semaphore: MakeSemaphore
    ) -> None:
        name, other = self.fresh_name("mine"), self.fresh_name("theirs")
        semaphore = make_semaphore(name, 1, self.long_ttl)
        theirs = make_semaphore(other, 2, self.long_ttl)
        permit, foreign = semaphore.acquire(timeout=0), theirs.acquire(timeout=0)
        for bad, error in _bad_permits(permit, foreign):
            with pytest.raises(error):
                semaphore.release(bad)
            with pytest.raises(error):
                semaphore.renew(bad)
        semaphore.release(permit)  # still held: nothing was released by the bad calls
        theirs.release(foreign)

    def _race(
        self, semaphores: Sequence[Semaphore], slots: _Slots, timeout: float
    ) -> Sequence[BaseException]:
        """``semaphore_racers`` threads over ``semaphores`` in turn, each acquiring
        ``semaphore_rounds`` times with ``timeout`` (a round refused at once, with 0, is
        skipped), holding a moment and releasing, reported to ``slots``; their errors."""

        def race(semaphore: Semaphore) -> None:
            for _ in range(self.semaphore_rounds):
                try:
                    permit = semaphore.acquire(timeout=timeout)
                except AcquireTimeout:
                    if timeout:
                        raise
                    continue
                slots.enter(permit)
                time.sleep(0.002)  # a window for one holder too many to show
                slots.leave(permit)
                semaphore.release(permit)

        racers = [(lambda s=semaphores[i % 2]: race(s)) for i in range(self.semaphore_racers)]
        return _run_threads(racers, self.patience * 4)

    def test_racing_threads_never_exceed_the_permits(self, make_semaphore: MakeSemaphore) -> None:
        name = self.fresh_name("race")
        slots = _Slots()
        semaphores = [make_semaphore(name, self.permits, self.long_ttl) for _ in range(2)]
        errors = self._race(semaphores, slots, self.patience)
        slots.check(errors, self.permits, self.semaphore_racers * self.semaphore_rounds)

    def test_racing_threads_of_a_lower_permits_never_exceed_it(
        self, make_semaphore: MakeSemaphore
    ) -> None:
        name = self.fresh_name("lowered-race")
        wide = make_semaphore(name, self.permits + 1, self.long_ttl)
        held = [wide.acquire(timeout=0) for _ in range(self.permits + 1)]
        for permit in held:
            if permit.slot != self.permits:  # keep the one slot the others cannot take
                wide.release(permit)
        slots = _Slots()
        semaphores = [make_semaphore(name, self.permits, self.long_ttl) for _ in range(2)]
        _check_lowered(slots, self._race(semaphores, slots, 0), self.permits - 1)
        wide.release(next(p for p in held if p.slot == self.permits))


def _bad_permits(permit: Permit, foreign: Permit) -> list[tuple[Any, type[Exception]]]:
    """Things passed as ``permit`` that must be refused before any I/O."""
    return [
        (permit.token, TypeError),
        (None, TypeError),
        (foreign, ValueError),
        (Permit(permit.semaphore, 5, permit.token), ValueError),
    ]


class AsyncSemaphoreContract(LeaseTerms):
    """The promises of ``SemaphoreContract`` for ``fencing.aio.Semaphore``, as coroutines,
    with tasks where it uses threads."""

    permits: int = 3
    hold_ttl: float = 1.5
    semaphore_racers: int = 6
    semaphore_rounds: int = 10

    @pytest.fixture
    def make_semaphore(self) -> MakeAsyncSemaphore:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_semaphore fixture")

    async def test_permits_are_distinct_slots_and_one_more_waits(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("slots")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        held = [await semaphore.acquire(timeout=0) for _ in range(self.permits)]
        _check_permits(held, name, self.permits)
        with pytest.raises(AcquireTimeout):
            await make_semaphore(name, self.permits, self.long_ttl).acquire(timeout=0)
        for permit in held:
            await semaphore.release(permit)

    async def test_tokens_increase_per_slot_across_release_and_expiry(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("tokens")
        one = make_semaphore(name, self.permits, self.long_ttl)
        first = [await one.acquire(timeout=0) for _ in range(self.permits)]
        for permit in first:
            await one.release(permit)
        other = make_semaphore(name, self.permits, self.short_ttl)
        second = [await other.acquire(timeout=0) for _ in range(self.permits)]
        _check_permits(second, name, self.permits)
        _assert_higher(_by_slot(first), _by_slot(second))
        if not self.expires_while_held:  # a lease lives with its session: end the session
            self.end_session(other.fences[0])
        third = [await one.acquire(timeout=self.patience) for _ in range(self.permits)]
        _check_permits(third, name, self.permits)
        _assert_higher(_by_slot(second), _by_slot(third))
        for permit in second:
            with pytest.raises(LeaseLost):
                await other.release(permit)
        for permit in third:
            await one.release(permit)

    async def test_waiter_gets_a_permit_when_a_holder_releases(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("waiter")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        held = [await semaphore.acquire(timeout=0) for _ in range(self.permits)]
        waiter = asyncio.create_task(make_semaphore(name, self.permits, self.long_ttl).acquire())
        await asyncio.sleep(0)
        await semaphore.release(held[-1])
        got = await asyncio.wait_for(waiter, self.patience)
        assert got.slot == held[-1].slot, f"slot {got.slot} freed, not {held[-1].slot}"
        assert got.token > held[-1].token, f"token {got.token} after {held[-1].token}"

    async def test_a_lower_permits_lets_no_new_holder_in_until_the_count_is_under_it(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("lowered")
        wide = make_semaphore(name, 3, self.long_ttl)
        held = sorted([await wide.acquire(timeout=0) for _ in range(3)], key=lambda p: p.slot)
        narrow = make_semaphore(name, 2, self.long_ttl)
        await wide.release(held[0])
        with pytest.raises(AcquireTimeout):
            await narrow.acquire(timeout=0)
        await wide.release(held[1])
        permit = await narrow.acquire(timeout=0)
        assert permit.slot in range(2), f"slot {permit.slot} of a semaphore of 2 permits"
        await narrow.release(permit)
        await wide.release(held[2])

    async def test_renew_and_release_only_while_held(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("held")
        semaphore = make_semaphore(name, self.permits, self.long_ttl)
        permit = await semaphore.acquire(timeout=0)
        await semaphore.renew(permit, ttl=self.long_ttl)
        await semaphore.release(permit)
        with pytest.raises(LeaseLost):
            await semaphore.renew(permit)
        with pytest.raises(LeaseLost):
            await semaphore.release(permit)

    async def test_hold_renews_the_permit_and_releases_it(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("hold")
        semaphore = make_semaphore(name, 1, self.hold_ttl)
        hold = semaphore.hold(timeout=0)
        with _renewals() as renewed:
            async with hold as permit:
                assert hold.permit == permit and hold.token == permit.token
                for _ in _tries(self.patience, "a renewal by hold()"):
                    if permit.token.name in renewed:
                        break
                    await asyncio.sleep(0.01)
                assert not hold.lost, "hold() lost a permit it was renewing"
                with pytest.raises(AcquireTimeout):
                    await make_semaphore(name, 1, self.long_ttl).acquire(timeout=0)
        after = await make_semaphore(name, 1, self.long_ttl).acquire(timeout=0)
        assert after.token > permit.token

    @pytest.mark.parametrize(("permits", "error"), BAD_COUNTS, ids=_ids(BAD_COUNTS))
    async def test_bad_permits_are_refused(
        self, make_semaphore: MakeAsyncSemaphore, permits: Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            make_semaphore(self.fresh_name("bad"), permits, self.long_ttl)

    async def test_a_name_that_redis_cannot_use_is_refused_everywhere(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        with pytest.raises(ValueError, match="must not start with"):
            make_semaphore("}" + self.fresh_name("brace"), 2, self.long_ttl)

    async def test_a_permit_of_another_semaphore_is_refused_with_nothing_changed(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name, other = self.fresh_name("mine"), self.fresh_name("theirs")
        semaphore = make_semaphore(name, 1, self.long_ttl)
        theirs = make_semaphore(other, 2, self.long_ttl)
        permit, foreign = await semaphore.acquire(timeout=0), await theirs.acquire(timeout=0)
        for bad, error in _bad_permits(permit, foreign):
            with pytest.raises(error):
                await semaphore.release(bad)
            with pytest.raises(error):
                await semaphore.renew(bad)
        await semaphore.release(permit)
        await theirs.release(foreign)

    async def _race(
        self, semaphores: Sequence[AsyncSemaphore], slots: _Slots, timeout: float
    ) -> Sequence[BaseException]:
        """The blocking contract's ``_race`` with tasks."""

        async def race(semaphore: AsyncSemaphore) -> None:
            for _ in range(self.semaphore_rounds):
                try:
                    permit = await semaphore.acquire(timeout=timeout)
                except AcquireTimeout:
                    if timeout:
                        raise
                    continue
                slots.enter(permit)
                await asyncio.sleep(0.002)
                slots.leave(permit)
                await semaphore.release(permit)

        racers = [race(semaphores[i % 2]) for i in range(self.semaphore_racers)]
        outcomes = await asyncio.wait_for(
            asyncio.gather(*racers, return_exceptions=True), self.patience * 4
        )
        return [o for o in outcomes if isinstance(o, BaseException)]

    async def test_racing_tasks_never_exceed_the_permits(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("race")
        slots = _Slots()
        semaphores = [make_semaphore(name, self.permits, self.long_ttl) for _ in range(2)]
        errors = await self._race(semaphores, slots, self.patience)
        slots.check(errors, self.permits, self.semaphore_racers * self.semaphore_rounds)

    async def test_racing_tasks_of_a_lower_permits_never_exceed_it(
        self, make_semaphore: MakeAsyncSemaphore
    ) -> None:
        name = self.fresh_name("lowered-race")
        wide = make_semaphore(name, self.permits + 1, self.long_ttl)
        held = [await wide.acquire(timeout=0) for _ in range(self.permits + 1)]
        for permit in held:
            if permit.slot != self.permits:
                await wide.release(permit)
        slots = _Slots()
        semaphores = [make_semaphore(name, self.permits, self.long_ttl) for _ in range(2)]
        _check_lowered(slots, await self._race(semaphores, slots, 0), self.permits - 1)
        await wide.release(next(p for p in held if p.slot == self.permits))


__all__ = [
    "BAD_COUNTS",
    "AsyncSemaphoreContract",
    "MakeAsyncSemaphore",
    "MakeSemaphore",
    "SemaphoreContract",
]
