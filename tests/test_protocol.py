"""The sans-I/O protocol: wait schedule, drivers, token type, argument checks."""

from __future__ import annotations

import pickle
import time
from typing import Any, NamedTuple

import pytest

import fencing
from fencing._protocol import (
    Busy,
    WaitSchedule,
    first_attempt,
    queue_millis,
    run_sync,
    wait_flow,
)


class FakeClock:
    """A virtual clock: the schedule is pure, so time can be stepped by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_timeout_zero_gives_up_after_one_attempt() -> None:
    schedule = WaitSchedule("n", 0.0, wakes_on_release=True, clock=FakeClock())
    with pytest.raises(fencing.AcquireTimeout) as info:
        schedule.next_wait(Busy(5.0))
    assert info.value.name == "n" and isinstance(info.value, TimeoutError)


def test_waits_are_capped_by_lease_expiry_and_deadline() -> None:
    clock = FakeClock()
    schedule = WaitSchedule("n", 0.5, wakes_on_release=True, clock=clock)
    assert schedule.next_wait(Busy(0.1)) == pytest.approx(0.101)
    assert schedule.next_wait(Busy(None)) == pytest.approx(0.5)  # deadline, below MAX_BLOCK
    clock.now += 0.5
    with pytest.raises(fencing.AcquireTimeout):
        schedule.next_wait(Busy(None))


def test_woken_waiters_block_at_most_max_block() -> None:
    schedule = WaitSchedule("n", None, wakes_on_release=True, clock=FakeClock())
    assert schedule.next_wait(Busy(60.0)) == WaitSchedule.MAX_BLOCK


def test_backoff_grows_with_jitter_up_to_the_cap() -> None:
    draws = iter([1.0, 0.0, 1.0] + [1.0] * 20)
    schedule = WaitSchedule(
        "n", None, wakes_on_release=False, clock=FakeClock(), rng=lambda: next(draws)
    )
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
        def try_acquire(
            self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
        ) -> int | Busy:
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
    class Flaky(fencing.MemoryIssuer):
        down = False

        def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
            if self.down:
                raise fencing.FenceUnavailable("backend down")
            return super().renew(name, token, holder, ttl_ms)

    import time

    issuer = Flaky()
    fence = fencing.MemoryFence("flaky", ttl=0.09, issuer=issuer)
    with pytest.raises(fencing.LeaseLost), fence.hold():
        time.sleep(0.1)
        assert not fence.lost  # renewals went through
        issuer.down = True
        time.sleep(0.3)  # more than a ttl without a successful renewal
        assert fence.lost


@pytest.mark.parametrize("timeout", [-1, float("inf"), float("nan"), "1", True])
def test_bad_timeouts_are_refused_before_any_io(timeout: object) -> None:
    fence = fencing.MemoryFence("t", issuer=fencing.MemoryIssuer())
    with pytest.raises((TypeError, ValueError)):
        fence.acquire(timeout=timeout)  # type: ignore[arg-type]
    assert fence.acquire(timeout=0) >= 1  # nothing was taken by the refused call


class Slow(NamedTuple):
    """A reply that arrives ``seconds`` late."""

    reply: object
    seconds: float


class Scripted:
    """An issuer that answers from a script and records what the flow asked, in order."""

    wakes_on_release = True

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[object, ...]] = []

    def _answer(self, call: tuple[object, ...]) -> Any:
        self.calls.append(call)
        reply = self.replies.pop(0)
        if isinstance(reply, Slow):
            time.sleep(reply.seconds)
            reply = reply.reply
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def try_acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> Any:
        return self._answer(("try", queue_ms, queued))

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        raise AssertionError("not part of acquiring")

    def release(self, name: str, token: int, holder: str) -> Any:
        return self._answer(("release", token))

    def await_release(self, name: str, holder: str, seconds: float) -> Any:
        reply = self._answer(("wait",))
        if reply is None:
            time.sleep(seconds)  # no hand-off: the whole wait passes
        return reply


def run(issuer: Scripted, timeout: float | None) -> int:
    """Acquire as the fences do: a first attempt, then the wait flow if it found ``Busy``."""
    first = first_attempt("h", 1000, timeout, True)
    reply = first.call(issuer, "n")
    if isinstance(reply, Busy):
        reply = run_sync(wait_flow("n", first, reply, timeout, True), issuer, "n")
    return int(reply)


def test_a_hand_off_ends_the_wait_without_another_attempt() -> None:
    issuer = Scripted(Busy(5.0), 41)
    assert run(issuer, None) == 41
    assert issuer.calls == [("try", queue_millis(None, 1.0), False), ("wait",)]


def test_a_missed_hand_off_is_taken_at_the_next_attempt_which_still_queues() -> None:
    issuer = Scripted(Busy(5.0), None, 42)
    assert run(issuer, 30.0) == 42
    again = issuer.calls[2]
    assert again[0] == "try" and again[2] is True and int(again[1]) > 0  # type: ignore[call-overload]


def test_the_deadline_leaves_the_queue_and_a_last_minute_grant_is_kept() -> None:
    issuer = Scripted(Busy(5.0), None, 43)
    assert run(issuer, 0.05) == 43
    assert issuer.calls[-1] == ("try", 0, True)  # the attempt at the deadline leaves
    issuer = Scripted(Busy(5.0), None, Busy(5.0))
    with pytest.raises(fencing.AcquireTimeout):
        run(issuer, 0.05)
    assert issuer.calls[-1] == ("try", 0, True) and not issuer.replies
    issuer = Scripted(Busy(0.001), None, Slow(Busy(5.0), 0.1), 45)  # deadline passed in flight
    assert run(issuer, 0.05) == 45
    assert [call[0] for call in issuer.calls] == ["try", "wait", "try", "try"]
    assert issuer.calls[2][1] != 0 and issuer.calls[3] == ("try", 0, True)


def test_an_interrupted_wait_leaves_the_queue_and_releases_a_raced_grant() -> None:
    issuer = Scripted(Busy(5.0), KeyboardInterrupt(), 44, True)
    with pytest.raises(KeyboardInterrupt):
        run(issuer, None)
    assert issuer.calls[2:] == [("try", 0, True), ("release", 44)]
    issuer = Scripted(Busy(5.0), fencing.FenceUnavailable("down"), fencing.FenceUnavailable("x"))
    with pytest.raises(fencing.FenceUnavailable, match="down"):  # the first error wins
        run(issuer, None)


def test_a_lease_that_never_expires_is_never_queued_for() -> None:
    assert first_attempt("h", 0, None, True).queue_ms == 0
    assert first_attempt("h", 1, None, True).queue_ms > 0
    assert first_attempt("h", 1, None, False).queue_ms == 0  # an issuer without wake-ups


def test_timeout_zero_never_queues() -> None:
    issuer = Scripted(Busy(5.0))
    with pytest.raises(fencing.AcquireTimeout):
        run(issuer, 0)
    assert issuer.calls == [("try", 0, False)]


def test_queue_places_outlive_the_next_wait_but_not_the_deadline() -> None:
    assert queue_millis(None, 1.0) == 1500
    assert queue_millis(0.2, 1.0) == 700
    assert queue_millis(0.0, 1.0) == queue_millis(-1.0, 1.0) == 0
