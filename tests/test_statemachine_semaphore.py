"""Hypothesis generates schedules of semaphore clients on a virtual clock: the memory
issuer keeps every promise, a semaphore that lets N+1 holders in (or reuses a slot's
token) is caught and shrunk to the few steps that show it."""

from __future__ import annotations

import pytest
from broken import LetsOneMoreIntoSlotZero, ReusesTokens
from hypothesis import settings

from fencing import MemoryIssuer
from fencing.testing.simulation import VirtualClock
from fencing.testing.statemachine import (
    REPRODUCIBLE,
    SEMAPHORE_PERMITS,
    SemaphoreViolation,
    run_semaphore_machine,
)

pytestmark = pytest.mark.usefixtures("no_local_constants", "quiet_lost_leases")

FAST = settings(REPRODUCIBLE, max_examples=100, stateful_step_count=40)


def test_memory_semaphore_keeps_every_promise() -> None:
    run_semaphore_machine(lambda clock: MemoryIssuer(clock=clock), settings=FAST)


def test_one_permit_too_many_is_caught_in_n_plus_one_acquires() -> None:
    with pytest.raises(SemaphoreViolation) as info:
        run_semaphore_machine(lambda clock: LetsOneMoreIntoSlotZero(clock=clock), settings=FAST)
    message = str(info.value)
    print(message)
    assert "two live leases of one slot" in message
    steps = message.split("steps:\n")[1].splitlines()
    assert len(steps) == SEMAPHORE_PERMITS + 1 and all(" got slot " in s for s in steps)


def _reuses_tokens(clock: VirtualClock) -> MemoryIssuer:
    issuer = ReusesTokens()
    issuer._clock = clock  # its leases on the machine's clock
    return issuer


def test_a_slot_token_handed_out_again_is_caught() -> None:
    with pytest.raises(SemaphoreViolation, match="not strictly increasing"):
        run_semaphore_machine(_reuses_tokens, settings=FAST)
