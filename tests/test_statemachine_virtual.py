"""Hypothesis generates pause schedules on the virtual clock: fenced holds, unfenced breaks."""

from __future__ import annotations

import pytest
from hypothesis import settings

from fencing.testing.simulation import InvariantViolation, virtual_world
from fencing.testing.statemachine import REPRODUCIBLE, FencingMachine, run_machine

pytestmark = pytest.mark.usefixtures("no_local_constants", "quiet_lost_leases")

#: Schedules searched where no violation may be found: 150 of 50 steps each.
FAST = settings(REPRODUCIBLE, max_examples=150, stateful_step_count=50)

#: Enough to find the lost update many times over (it is usually found within 100).
SEARCH = settings(FAST, max_examples=2000)


def test_fenced_resource_keeps_every_guarantee() -> None:
    run_machine(lambda: virtual_world(3), settings=FAST)


def test_unfenced_resource_loses_an_update_in_kleppmanns_schedule() -> None:
    """The lock alone is not enough: Hypothesis finds the lost update and shrinks it
    to the scenario of "How to do distributed locking"."""
    with pytest.raises(InvariantViolation) as info:
        run_machine(lambda: virtual_world(3, fenced=False), settings=SEARCH)
    violation = info.value
    notes = getattr(violation, "__notes__", [])
    bookkeeping = ("state.guarantees_hold", "state.teardown")
    steps = [n for n in notes if n.startswith("state.") and not n.startswith(bookkeeping)]
    rules = [step.removeprefix("state.").removesuffix("()") for step in steps]
    print("shrunk schedule found by Hypothesis:", *steps, sep="\n  ")
    print(violation)
    # Which client plays which part depends on how far shrinking got; the shape may not.
    actions = [rule.rsplit("_", 1)[0] for rule in rules]
    assert actions == ["acquire", "pause", "expire", "acquire", "write", "resume"]
    paused, fresh = rules[0][-1], rules[3][-1]
    assert paused != fresh
    assert [rules[1][-1], rules[4][-1], rules[5][-1]] == [paused, fresh, paused]
    assert "lost update" in violation.problem
    assert "write token 1: APPLIED over token 2: LOST UPDATE" in violation.timeline


def test_machine_needs_three_clients() -> None:
    with pytest.raises(ValueError, match="3 fences"):
        FencingMachine(lambda: virtual_world(2))
