"""The sans-I/O protocol: wait schedule, drivers, token type, argument checks."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import NamedTuple

import pytest

import fencing
from fencing._base.flow import run_sync
from fencing._lease.core import DRIFT
from fencing._lease.protocol import (
    Calls,
    Waiting,
    WaitSchedule,
    acquire_sync,
    queue_millis,
)
from fencing.issuer import Busy
from fencing.testing.simulation import VirtualClock


class FakeClock:
    """A virtual clock: the schedule is pure, so time can be stepped by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_timeout_zero_gives_up_after_one_attempt() -> None:
    schedule = WaitSchedule("n", 0.0, wakes=True, clock=FakeClock())
    with pytest.raises(fencing.AcquireTimeout) as info:
        schedule.next_wait(Busy(5.0))
    assert info.value.name == "n" and isinstance(info.value, TimeoutError)


def test_waits_are_capped_by_lease_expiry_and_deadline() -> None:
    clock = FakeClock()
    schedule = WaitSchedule("n", 0.5, wakes=True, clock=clock)
    assert schedule.next_wait(Busy(0.1)) == pytest.approx(0.101)
    assert schedule.next_wait(Busy(None)) == pytest.approx(0.5)  # deadline, below MAX_BLOCK
    clock.now += 0.5
    with pytest.raises(fencing.AcquireTimeout):
        schedule.next_wait(Busy(None))


def test_woken_waiters_block_at_most_max_block() -> None:
    schedule = WaitSchedule("n", None, wakes=True, clock=FakeClock())
    assert schedule.next_wait(Busy(60.0)) == WaitSchedule.MAX_BLOCK


def test_backoff_grows_with_jitter_up_to_the_cap() -> None:
    draws = iter([1.0, 0.0, 1.0] + [1.0] * 20)
    schedule = WaitSchedule("n", None, wakes=False, clock=FakeClock(), rng=lambda: next(draws))
    waits = [schedule.next_wait(Busy(None)) for _ in range(12)]
    assert waits[0] == pytest.approx(WaitSchedule.FIRST_BACKOFF)
    assert waits[1] == pytest.approx(WaitSchedule.FIRST_BACKOFF)  # 2x backoff, half by jitter
    assert waits[2] == pytest.approx(4 * WaitSchedule.FIRST_BACKOFF)
    assert max(waits) == pytest.approx(WaitSchedule.MAX_BACKOFF)


def test_fence_token_is_an_int_that_knows_its_fence() -> None:
    token = fencing.FenceToken(34, "invoice:42")
    assert token == 34 and int(token) == 34 and token > 33
    assert token.name == "invoice:42"
    assert repr(token) == "FenceToken(34, name='invoice:42')"
    again = pickle.loads(pickle.dumps(token))
    assert again == 34 and again.name == "invoice:42" and isinstance(again, fencing.FenceToken)
    assert type(token + 1) is int


def test_backend_failure_surfaces_as_fence_unavailable_with_cause() -> None:
    class Broken(fencing.MemoryIssuer):
        def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
            try:
                raise ConnectionError("connection refused")
            except ConnectionError as exc:
                raise fencing.FenceUnavailable("backend down") from exc

    fence = fencing.MemoryFence("broken", issuer=Broken())
    with pytest.raises(fencing.FenceUnavailable) as info:
        fence.acquire(timeout=0)
    assert isinstance(info.value.__cause__, ConnectionError)
    assert not fence._holders  # nothing half-done on our side


def test_renewal_presumes_loss_when_the_issuer_stays_unavailable() -> None:
    """The renewal flow on virtual time: renewals go through, then the issuer is down
    for more than a ttl, and the hold is marked lost. No real time passes."""
    clock = VirtualClock()

    class Flaky(fencing.MemoryIssuer):
        down = False

        def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
            if self.down:
                raise fencing.FenceUnavailable("backend down")
            return super().renew(name, token, holder, ttl_ms)

    issuer = Flaky(clock)
    fence = fencing.Fence(issuer, "flaky", ttl=0.09, clock=clock)
    hold = fence._hold_started(fence.acquire())
    sleeps: list[float] = []

    def sleep(seconds: float) -> bool:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            issuer.down = True  # after two renewals went through
        clock.advance(seconds)
        return len(sleeps) > 50  # a stop, should the flow never give up

    run_sync(fence._renewal_flow(hold), fence._calls.with_sleep(sleep))
    assert hold.lost and len(sleeps) < 50
    assert sleeps[:3] == pytest.approx([0.03, 0.03, 0.03])  # every ttl/3 while it works
    assert sleeps[3] == pytest.approx(0.015)  # retried sooner once it failed
    # lost a ttl (less the drift margin) after the last successful renewal was sent
    assert sum(sleeps[2:]) == pytest.approx(0.09 * (1 - DRIFT))
    with pytest.raises(fencing.LeaseLost), hold.finishing():
        pytest.fail("a hold whose lease was lost must not reach its release")


def test_one_hold_never_clears_another_holds_lost_flag() -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("holds", ttl=5, issuer=issuer)
    first = fence._hold_started(fence.acquire())
    first.lose()
    second = fence._hold_started(fencing.MemoryFence("other", issuer=issuer).acquire())
    assert first.lost and not second.lost
    with pytest.warns(DeprecationWarning, match="hold"):
        assert not fence.lost  # the deprecated flag follows the most recent hold


@pytest.mark.parametrize("timeout", [-1, -float("inf"), float("nan"), "1", True])
def test_bad_timeouts_are_refused_before_any_io(timeout: object) -> None:
    fence = fencing.MemoryFence("t", issuer=fencing.MemoryIssuer())
    with pytest.raises((TypeError, ValueError)):
        fence.acquire(timeout=timeout)  # type: ignore[arg-type]
    assert fence.acquire(timeout=0) >= 1  # nothing was taken by the refused call


class Slow(NamedTuple):
    """A reply that arrives after ``seconds`` of virtual time."""

    reply: object
    seconds: float


class Scripted:
    """A hand-off issuer that answers from a script, on virtual time, and records what
    the flow asked, in order."""

    def __init__(self, clock: VirtualClock, *replies: object) -> None:
        self.clock = clock
        self.replies = list(replies)
        self.calls: list[tuple[object, ...]] = []

    def _answer(self, call: tuple[object, ...]) -> object:
        self.calls.append(call)
        reply = self.replies.pop(0)
        if isinstance(reply, Slow):
            self.clock.advance(reply.seconds)
            reply = reply.reply
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self.try_acquire_queued(name, holder, ttl_ms, 0, False)

    def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        reply = self._answer(("try", queue_ms, queued))
        assert isinstance(reply, (int, Busy))
        return reply

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        raise AssertionError("not part of acquiring")

    def release(self, name: str, token: int, holder: str) -> bool:
        return self._answer(("release", token)) is True

    def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        reply = self._answer(("wait",))
        if reply is None:
            self.clock.advance(seconds)  # no hand-off: the whole wait passes
        assert reply is None or isinstance(reply, int)
        return reply


def sleeping_on(clock: VirtualClock) -> Callable[[float], bool]:
    """A flow's ``sleep`` on the virtual clock: time passes, and the flow is never stopped."""

    def sleep(seconds: float) -> bool:
        clock.advance(seconds)
        return False

    return sleep


def run(issuer: Scripted, timeout: float | None) -> int:
    """Acquire as the fences do, on the issuer's virtual clock."""
    waiting = Waiting(hands_off=True, wakes=False, clock=issuer.clock.monotonic)
    calls = Calls(issuer, "n", sleeping_on(issuer.clock))
    return acquire_sync("h", 1000, timeout, waiting, calls)


def test_a_hand_off_ends_the_wait_without_another_attempt() -> None:
    issuer = Scripted(VirtualClock(), Busy(5.0), 41)
    assert run(issuer, None) == 41
    assert issuer.calls == [("try", queue_millis(None, 1.0), False), ("wait",)]


def test_a_missed_hand_off_is_taken_at_the_next_attempt_which_still_queues() -> None:
    issuer = Scripted(VirtualClock(), Busy(5.0), None, 42)
    assert run(issuer, 30.0) == 42
    kind, queue_ms, queued = issuer.calls[2]
    assert kind == "try" and queued is True and isinstance(queue_ms, int) and queue_ms > 0


def test_the_deadline_leaves_the_queue_and_a_last_minute_grant_is_kept() -> None:
    issuer = Scripted(VirtualClock(), Busy(5.0), None, 43)
    assert run(issuer, 0.05) == 43
    assert issuer.calls[-1] == ("try", 0, True)  # the attempt at the deadline leaves
    issuer = Scripted(VirtualClock(), Busy(5.0), None, Busy(5.0))
    with pytest.raises(fencing.AcquireTimeout):
        run(issuer, 0.05)
    assert issuer.calls[-1] == ("try", 0, True) and not issuer.replies
    clock = VirtualClock()
    issuer = Scripted(clock, Busy(0.001), None, Slow(Busy(5.0), 0.1), 45)  # deadline in flight
    assert run(issuer, 0.05) == 45
    assert [call[0] for call in issuer.calls] == ["try", "wait", "try", "try"]
    assert issuer.calls[2][1] != 0 and issuer.calls[3] == ("try", 0, True)
    assert clock() == pytest.approx(0.102)  # virtual: the whole wait took no real time


def test_an_interrupted_wait_leaves_the_queue_and_releases_a_raced_grant() -> None:
    issuer = Scripted(VirtualClock(), Busy(5.0), KeyboardInterrupt(), 44, True)
    with pytest.raises(KeyboardInterrupt):
        run(issuer, None)
    assert issuer.calls[2:] == [("try", 0, True), ("release", 44)]
    issuer = Scripted(
        VirtualClock(), Busy(5.0), fencing.FenceUnavailable("down"), fencing.FenceUnavailable("x")
    )
    with pytest.raises(fencing.FenceUnavailable, match="down"):  # the first error wins
        run(issuer, None)


def test_a_lease_that_never_expires_is_never_queued_for() -> None:
    clock = VirtualClock()
    issuer = Scripted(clock, Busy(None), Busy(None), 7)
    waiting = Waiting(hands_off=True, wakes=False, clock=clock.monotonic, interval=0.25)
    calls = Calls(issuer, "n", sleeping_on(clock))
    assert acquire_sync("h", 0, None, waiting, calls) == 7
    assert issuer.calls == [("try", 0, False)] * 3  # it polls, never queued, never waits
    assert clock() == pytest.approx(2 * 0.25)  # every ``interval`` (FencedLock's ``sleep``)


def test_polling_at_an_interval_gives_up_when_the_next_attempt_would_be_late() -> None:
    """redis-py's Lock rule: no attempt after the deadline, and no shortened last wait."""
    clock = VirtualClock()
    issuer = Scripted(clock, *[Busy(None)] * 10)
    waiting = Waiting(hands_off=False, wakes=False, clock=clock.monotonic, interval=0.3)
    calls = Calls(issuer, "n", sleeping_on(clock))
    with pytest.raises(fencing.AcquireTimeout):
        acquire_sync("h", 0, 1.0, waiting, calls)
    assert len(issuer.calls) == 4 and clock() == pytest.approx(0.9)  # 0, 0.3, 0.6, 0.9


def test_timeout_zero_never_queues() -> None:
    issuer = Scripted(VirtualClock(), Busy(5.0))
    with pytest.raises(fencing.AcquireTimeout):
        run(issuer, 0)
    assert issuer.calls == [("try", 0, False)]


class Plain:
    """An issuer with the three base calls only (no capability), over a memory issuer."""

    def __init__(self, clock: VirtualClock) -> None:
        self.memory = fencing.MemoryIssuer(clock)
        self.attempts = 0

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        self.attempts += 1
        return self.memory.try_acquire(name, holder, ttl_ms)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self.memory.renew(name, token, holder, ttl_ms)

    def release(self, name: str, token: int, holder: str) -> bool:
        return self.memory.release(name, token, holder)


def test_an_issuer_without_wake_ups_is_polled_with_backoff_on_the_fence_clock() -> None:
    clock = VirtualClock()
    issuer = Plain(clock)
    assert fencing.Fence(issuer, "poll", ttl=5, clock=clock).acquire(timeout=0) >= 1
    waiter = fencing.Fence(issuer, "poll", ttl=5, clock=clock)
    with pytest.raises(fencing.AcquireTimeout):
        waiter.acquire(timeout=0.5)
    assert clock() == pytest.approx(0.5)  # virtual time: the deadline, not one second more
    assert 5 < issuer.attempts < 30  # exponential backoff from 2 ms, capped at 0.2 s


def test_queue_places_outlive_the_next_wait_but_not_the_deadline() -> None:
    assert queue_millis(None, 1.0) == 1500
    assert queue_millis(0.2, 1.0) == 700
    assert queue_millis(0.0, 1.0) == queue_millis(-1.0, 1.0) == 0
