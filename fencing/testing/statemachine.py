"""A Hypothesis state machine that generates pause schedules and checks the guarantees.

One machine, many worlds (the shape of zarr's ``zarr.testing.stateful``): it is
parameterised by a factory returning a ``fencing.testing.simulation.World``, so the same
rules run against the virtual-clock issuer, a real issuer (Redis, SQL, in-memory) with a
real store, or an *unfenced* resource, where it finds the lost update::

    from fencing.testing.simulation import virtual_world
    from fencing.testing.statemachine import run_machine

    def test_guard_holds() -> None:
        run_machine(lambda: virtual_world(3))              # passes

    def test_lock_alone_loses_updates() -> None:
        with pytest.raises(InvariantViolation):            # Hypothesis finds and
            run_machine(lambda: virtual_world(3, fenced=False))   # shrinks Kleppmann's

Rules, per client (three of them): ``acquire_N``, ``write_N`` (after checking the lease
by the client's own clock), ``pause_N`` (freeze between that check and the write),
``resume_N`` (send the pending write) and ``release_N``; and ``expire`` (time passes
beyond the TTL). A rule is drawn only when it applies, so the shrunk schedule of a
failure reads as the story: ``acquire_1, pause_1, expire, acquire_2, write_2, resume_1``.
Every step is checked by the ``Simulation``; the invariant below restates the three
guarantees on the whole history.

In the read modes (``run_machine(..., mode="read-write")`` or ``"claim-read-write"``)
``acquire_N`` also reads the value (claiming first in the second mode) and each write is
computed from what the client read or last wrote. Without the claim Hypothesis finds
the stale write between a newer holder's read and its write even on a fenced resource
(``acquire_1, pause_1, expire, acquire_2, resume_1, write_2``); with it, never.

``SemaphoreMachine`` (``run_semaphore_machine``) does the same for a semaphore of N
permits on a virtual clock: more clients than permits acquire, renew and release while
time passes beyond the ttl, and after every step the machine checks, against its own
model of which permits are live (granted or renewed less than ttl ago, not released):
each slot's tokens strictly increase in acquisition order, no slot has two live leases,
never more than N are live, a renew or release succeeds exactly when the permit is live,
and an ``acquire(timeout=0)`` is refused only when all N are live. A semaphore that lets
N+1 holders in (``tests/broken.py``) fails it, shrunk to N+1 ``acquire`` steps.

Needs Hypothesis (a test dependency). Imports ``fencing.testing.simulation`` and the
semaphore.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import Phase
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from .._base.errors import AcquireTimeout, LeaseLost
from .._primitives.semaphore import Permit, Semaphore
from ..issuer import Issuer
from .simulation import Mode, SimClient, Simulation, VirtualClock, World

#: The number of clients, each with its own rules (``acquire_1``, ``pause_2``, ...).
CLIENTS = 3


def _can_acquire(c: SimClient) -> bool:
    return not c.paused and not c.holding


def _runs_holding(c: SimClient) -> bool:
    return not c.paused and c.holding


def _can_write(c: SimClient) -> bool:
    """Holding, and in the read modes: has read what the write is computed from."""
    return _runs_holding(c) and (c.has_read or not c.sim.reads)


def _can_pause(c: SimClient) -> bool:
    return _can_write(c) and c._lease_looks_valid()


def _is_paused(c: SimClient) -> bool:
    return c.paused


#: What a client can do, and when it can. Rules are per client and fire only when they
#: apply, so every generated step does something and shrunk schedules read plainly.
ACTIONS: dict[str, Callable[[SimClient], bool]] = {
    "acquire": _can_acquire,
    "write": _can_write,
    "pause": _can_pause,
    "resume": _is_paused,
    "release": _runs_holding,
}


class FencingMachine(RuleBasedStateMachine):
    """Clients acquiring, pausing past the TTL and writing blind, on the world
    ``make_world()``."""

    #: How the clients write (``Simulation``'s mode).
    mode: ClassVar[Mode] = "write"

    def __init__(self, make_world: Callable[[], World]) -> None:
        super().__init__()
        world = make_world()
        if len(world.fences) < CLIENTS:
            world.close()
            raise ValueError(f"the machine needs a world with {CLIENTS} fences or more")
        try:
            self.sim = Simulation(world, mode=self.mode)
        except (TypeError, ValueError):
            world.close()
            raise

    @precondition(lambda self: any(c.holding for c in self.sim.clients))
    @rule()
    def expire(self) -> None:
        self.sim.expire()

    @invariant()
    def guarantees_hold(self) -> None:
        """The three guarantees, restated on the whole history (each step checks them too)."""
        sim = self.sim
        issued, accepted, mark = sim.issued, sim.accepted, sim.high_water_mark
        unique = len(set(issued)) == len(issued)
        sim.check(unique and issued == sorted(issued), f"tokens not increasing: {issued}")
        sim.check(accepted == sorted(accepted), f"accepted tokens decrease: {accepted}")
        sim.check(
            all(mark is not None and token < mark for token in sim.rejected),
            f"a rejected token was not below the high-water mark {mark}",
        )

    def teardown(self) -> None:
        self.sim.close()


#: Settings for reproducible runs: the same schedules every time (no example database,
#: no random seed), no per-step deadline (real issuers take real time), and no explain
#: phase. Derive from it: ``settings(REPRODUCIBLE, max_examples=50)``.
REPRODUCIBLE = Settings(
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate, Phase.shrink],
)


def run_machine(
    make_world: Callable[[], World], *, settings: Settings | None = None, mode: Mode = "write"
) -> None:
    """Run ``FencingMachine`` on fresh worlds from ``make_world``; raise on a violation.

    ``mode``: how clients write, blind (``"write"``) or computed from a read, with
    (``"claim-read-write"``) or without (``"read-write"``) a claim before the read.

    The exception raised is the one of the shrunk (smallest) failing schedule; its
    ``timeline`` attribute, when it is an ``InvariantViolation``, reads like the scenario.
    """
    # Hypothesis accepts any factory of machines; its annotations (which differ between
    # releases) ask for a class, so call it untyped.
    run: Any = run_state_machine_as_test
    # A derandomized run is seeded by the source of the factory's line: the blind
    # machine keeps the line (and so the schedules) it had before the read modes.
    if mode == "write":
        run(lambda: FencingMachine(make_world), settings=settings)
    else:
        machine = MACHINES[mode]
        run(lambda: machine(make_world), settings=settings)


def _client_rule(action: str, index: int, applies: Callable[[SimClient], bool]) -> Any:
    def step(self: FencingMachine) -> None:
        getattr(self.sim.clients[index], action)()

    step.__name__ = step.__qualname__ = f"{action}_{index + 1}"
    step.__doc__ = f"client {index + 1}: {action}"
    return precondition(lambda machine: applies(machine.sim.clients[index]))(rule()(step))


for _index in range(CLIENTS):
    for _action, _applies in ACTIONS.items():
        setattr(FencingMachine, f"{_action}_{_index + 1}", _client_rule(_action, _index, _applies))


class ReadingMachine(FencingMachine):
    """``FencingMachine`` whose clients read on acquiring and compute their writes from
    it, with no claim: a stale write between a newer holder's read and write is accepted."""

    mode: ClassVar[Mode] = "read-write"


class ClaimingMachine(ReadingMachine):
    """``ReadingMachine`` whose clients claim the resource before they read."""

    mode: ClassVar[Mode] = "claim-read-write"


#: The machine for each mode: the same rules, the mode decides what they do.
MACHINES: dict[Mode, type[FencingMachine]] = {
    "write": FencingMachine,
    "read-write": ReadingMachine,
    "claim-read-write": ClaimingMachine,
}


# -- the semaphore -------------------------------------------------------------------------

#: The semaphore machine: clients (more than its permits), permits, and the permits' ttl.
SEMAPHORE_CLIENTS = 4
SEMAPHORE_PERMITS = 2
SEMAPHORE_TTL = 1.0


class SemaphoreViolation(AssertionError):
    """A promise of the semaphore broken; the message ends with the steps that led there."""


class SemaphoreMachine(RuleBasedStateMachine):
    """Clients of one semaphore of ``SEMAPHORE_PERMITS`` permits on ``make_issuer(clock)``,
    a virtual clock moved only by ``wait``. Rules per client: ``acquire_N`` (with
    ``timeout=0``), ``renew_N`` and ``release_N`` (of the permit it got); and ``wait``.
    The model: a permit is live from its grant (or last renewal) for ttl seconds, until
    released, by the same clock and the same ``expires <= now`` rule as the issuer."""

    def __init__(self, make_issuer: Callable[[VirtualClock], Issuer]) -> None:
        super().__init__()
        self.clock = VirtualClock()
        self.semaphore = Semaphore(
            make_issuer(self.clock), "sem", SEMAPHORE_PERMITS, SEMAPHORE_TTL, clock=self.clock
        )
        #: Per client: its permit and when the model says it expires, or None.
        self.held: list[tuple[Permit, float] | None] = [None] * SEMAPHORE_CLIENTS
        #: Per slot: its tokens in acquisition order.
        self.tokens: dict[int, list[int]] = defaultdict(list)
        self.steps: list[str] = []

    def fail(self, problem: str) -> None:
        raise SemaphoreViolation(f"{problem}\nsteps:\n  " + "\n  ".join(self.steps))

    def live(self) -> list[Permit]:
        now = self.clock()
        return [held[0] for held in self.held if held is not None and now < held[1]]

    def _is_live(self, index: int) -> bool:
        held = self.held[index]
        return held is not None and self.clock() < held[1]

    @rule(seconds=st.sampled_from([0.25, 0.5, 1.0, 1.5]))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.steps.append(f"t={self.clock():g}: wait {seconds:g}")

    def acquire(self, index: int) -> None:
        was = len(self.live())
        try:
            permit = self.semaphore.acquire(timeout=0)
        except AcquireTimeout:
            self.steps.append(f"t={self.clock():g}: client {index + 1} refused")
            if was < SEMAPHORE_PERMITS:
                self.fail(f"refused while only {was} of {SEMAPHORE_PERMITS} permits were live")
            return
        self.held[index] = (permit, self.clock() + SEMAPHORE_TTL)
        self.steps.append(
            f"t={self.clock():g}: client {index + 1} got slot {permit.slot} "
            f"token {int(permit.token)}"
        )
        self.permits_hold()
        tokens = self.tokens[permit.slot]
        tokens.append(int(permit.token))
        if tokens != sorted(set(tokens)):
            self.fail(f"tokens of slot {permit.slot} not strictly increasing: {tokens}")

    def renew(self, index: int) -> None:
        self._end_or_renew(index, "renew")

    def release(self, index: int) -> None:
        self._end_or_renew(index, "release")

    def _end_or_renew(self, index: int, action: str) -> None:
        held = self.held[index]
        assert held is not None
        permit, live = held[0], self._is_live(index)
        try:
            getattr(self.semaphore, action)(permit)
        except LeaseLost:
            self.held[index] = None
            self.steps.append(f"t={self.clock():g}: client {index + 1} {action}: LeaseLost")
            if live:
                self.fail(f"{action} of a live permit (slot {permit.slot}) raised LeaseLost")
            return
        self.steps.append(f"t={self.clock():g}: client {index + 1} {action}: ok")
        if not live:
            self.fail(f"{action} of an expired permit (slot {permit.slot}) succeeded")
        self.held[index] = (permit, self.clock() + SEMAPHORE_TTL) if action == "renew" else None

    @invariant()
    def permits_hold(self) -> None:
        """No slot with two live leases, never more than N live."""
        live = self.live()
        slots = [permit.slot for permit in live]
        if len(set(slots)) != len(slots):
            self.fail(f"two live leases of one slot: slots {sorted(slots)}")
        if len(live) > SEMAPHORE_PERMITS:
            self.fail(f"{len(live)} live permits of a semaphore of {SEMAPHORE_PERMITS}")


def _semaphore_rule(action: str, index: int) -> Any:
    def step(self: SemaphoreMachine) -> None:
        getattr(self, action)(index)

    step.__name__ = step.__qualname__ = f"{action}_{index + 1}"
    step.__doc__ = f"client {index + 1}: {action}"
    holding = action != "acquire"
    return precondition(lambda machine: (machine.held[index] is not None) == holding)(rule()(step))


for _index in range(SEMAPHORE_CLIENTS):
    for _action in ("acquire", "renew", "release"):
        setattr(SemaphoreMachine, f"{_action}_{_index + 1}", _semaphore_rule(_action, _index))


def run_semaphore_machine(
    make_issuer: Callable[[VirtualClock], Issuer], *, settings: Settings | None = None
) -> None:
    """Run ``SemaphoreMachine`` on fresh issuers from ``make_issuer(clock)`` (an issuer
    whose time is that ``VirtualClock``, e.g. ``MemoryIssuer(clock=clock)``); raise the
    ``SemaphoreViolation`` of the shrunk failing schedule, if any."""
    run: Any = run_state_machine_as_test
    run(lambda: SemaphoreMachine(make_issuer), settings=settings)
