"""The sans-I/O protocol: wait schedule, drivers, token type, argument checks."""

from __future__ import annotations

import pickle

import pytest

import fencing
from fencing._protocol import Busy, WaitSchedule


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
