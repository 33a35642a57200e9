"""The read-write lock's Hypothesis state machine (``fencing.testing.rwmachine``) on the
in-memory issuer, on a virtual clock: readers that claim never observe a later write,
and the control (readers that do not claim) is caught and shrunk in the same test."""

from __future__ import annotations

import pytest
from hypothesis import settings

from fencing import MemoryIssuer
from fencing.testing.rwmachine import RWLockViolation, run_rwlock_machine
from fencing.testing.simulation import VirtualClock
from fencing.testing.statemachine import REPRODUCIBLE

pytestmark = pytest.mark.usefixtures("no_local_constants", "quiet_lost_leases")

FAST = settings(REPRODUCIBLE, max_examples=60, stateful_step_count=30)


def memory(clock: VirtualClock) -> MemoryIssuer:
    return MemoryIssuer(clock=clock)


def test_readers_and_writers_keep_every_promise_and_the_control_is_caught() -> None:
    run_rwlock_machine(memory, settings=FAST)
    with pytest.raises(RWLockViolation, match="observed a write made with") as info:
        run_rwlock_machine(memory, claims=False, settings=FAST)
    steps = str(info.value).split("steps:\n")[1].splitlines()
    assert len(steps) <= 8, f"not shrunk to the story: {steps}"
