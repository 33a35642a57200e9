"""A Hypothesis state machine over a read-write lock's readers, writers, pauses and
expiry, with a checker (docs/rwlock.md).

``RWLockMachine`` runs ``RW_CLIENTS`` clients of one ``fencing.RWLock`` on an issuer
whose time is a ``VirtualClock`` (``make_issuer(clock)``), and one resource: a value
behind a ``MemoryMark``, written through ``fencing.guard`` and read after a claim (or,
with ``claims=False``, the control, read without one). Rules per client: ``read_N`` and
``write_N`` (an ``acquire(timeout=0)`` of that side, then the reader's claim and read,
or the writer's claim, read and write), ``renew_N``, ``release_N``, ``late_N`` (a holder
acts on the resource again, maybe long after its lease ended: it was paused), and
``wait`` (virtual time passes, beyond the ttl at times).

The model: a lease is live from its grant (or last renewal) for ``RW_TTL`` seconds until
released, by the issuer's ``expires <= now`` rule. Checked after every step:

- a grant: a writer only while nobody is live, with a token above every token issued;
  a reader only while no writer is live, with the live readers' token if there are any,
  else a token above every token issued; a refusal only while someone blocks it;
- renew and release succeed exactly when the lease is live;
- the resource: no reader observes a write made after its claim (a read by the epoch
  ``E`` sees a value written with a token ``<= E``), and accepted writes never go below
  an applied token.

With claims the machine finds nothing; without them (``claims=False``) Hypothesis finds a
paused reader's late read of a newer write, shrunk to a handful of steps.

Needs Hypothesis (a test dependency). Imports the read-write lock, the mark, the guard
and the virtual clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from .._base.errors import AcquireTimeout, LeaseLost, StaleTokenError
from .._base.token import FenceToken
from .._primitives.rwlock import RWLock
from .._resource.guard import guard
from .._resource.marks import MemoryMark
from ..issuer import ReadWrites
from .simulation import VirtualClock

RW_CLIENTS = 3
RW_TTL = 1.0


class RWLockViolation(AssertionError):
    """The read-write lock or its fencing broke a promise; the message has the steps."""


class _Client:
    """One client's holding: its side, its token (``granted``, as the lock gave it: a
    read token names its own lease), and when the model says the lease ends."""

    __slots__ = ("ends", "granted", "token", "write")

    def __init__(self, write: bool, granted: FenceToken, ends: float) -> None:
        self.write = write
        self.granted = granted
        self.token = int(granted)
        self.ends = ends


class RWLockMachine(RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self, make_issuer: Callable[[VirtualClock], ReadWrites], claims: bool) -> None:
        super().__init__()
        self.clock = VirtualClock()
        self.rw = RWLock(make_issuer(self.clock), "rw", RW_TTL, clock=self.clock)
        self.claims = claims
        self.mark = MemoryMark()
        #: the resource: its value, and the token of the write that made it
        self.value: tuple[str, int] = ("initial", 0)
        self.write = guard(self._apply, mark=self.mark)
        self.held: list[_Client | None] = [None] * RW_CLIENTS
        self.highest = 0  # the highest token issued so far
        self.applied = 0  # the highest token a write was accepted with
        self.steps: list[str] = []

    def _apply(self, token: int, value: str) -> None:
        """The guarded write (``fencing.guard`` passes it what follows the token)."""
        if token < self.applied:
            self.fail(f"a write with token {token} landed below the applied token {self.applied}")
        self.applied = token
        self.value = (value, token)

    def fail(self, problem: str) -> None:
        raise RWLockViolation(f"{problem}\nsteps:\n  " + "\n  ".join(self.steps))

    def log(self, index: int, what: str) -> None:
        self.steps.append(f"t={self.clock():g}: client {index + 1} {what}")

    def live(self) -> list[_Client]:
        now = self.clock()
        return [c for c in self.held if c is not None and now < c.ends]

    @rule(seconds=st.sampled_from([0.25, 0.5, 1.0, 1.5]))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.steps.append(f"t={self.clock():g}: wait {seconds:g}")

    def acquire(self, index: int, write: bool) -> None:
        side, what = (self.rw.write, "write") if write else (self.rw.read, "read")
        live = self.live()
        blockers = live if write else [c for c in live if c.write]
        try:
            granted = side.acquire(timeout=0)
        except AcquireTimeout:
            self.log(index, f"{what} refused")
            if not blockers:
                self.fail(f"a {what} refused while nobody blocked it")
            return
        token = int(granted)
        self.log(index, f"{what} granted token {token}")
        if blockers:
            self.fail(f"a {what} granted beside {len(blockers)} live holders that exclude it")
        readers = [c.token for c in live if not c.write]
        if not write and readers and token != readers[0]:
            self.fail(f"a reader got {token} beside readers of epoch {readers[0]}")
        if (write or not readers) and token <= self.highest:
            self.fail(f"{what} token {token} not above every earlier token ({self.highest})")
        self.highest = max(self.highest, token)
        self.held[index] = _Client(write, granted, self.clock() + RW_TTL)
        self.use(index)

    def use(self, index: int) -> None:
        """The client's work on the resource: a reader claims (unless the control) and
        reads; a writer claims, reads and writes."""
        client = self.held[index]
        assert client is not None
        try:
            if self.claims or client.write:
                self.mark.claim(client.token)
            value, by = self.value
            if client.write:
                self.write(client.token, client.token, f"{value}+{client.token}")
        except StaleTokenError:
            self.log(index, "refused at the resource")
            return
        self.log(index, f"used the resource ({'wrote' if client.write else f'read {by}'})")
        if not client.write and by > client.token:
            self.fail(f"a reader of epoch {client.token} observed a write made with {by}")

    def end_or_renew(self, index: int, action: str) -> None:
        client = self.held[index]
        assert client is not None
        side = self.rw.write if client.write else self.rw.read
        live = self.clock() < client.ends
        try:
            getattr(side, action)(client.granted)
        except LeaseLost:
            self.held[index] = None
            self.log(index, f"{action}: LeaseLost")
            if live:
                self.fail(f"{action} of a live lease raised LeaseLost")
            return
        self.log(index, f"{action}: ok")
        if not live:
            self.fail(f"{action} of an expired lease succeeded")
        if action == "renew":
            client.ends = self.clock() + RW_TTL
        else:
            self.held[index] = None


def _rule(action: str, index: int) -> Any:
    def step(self: RWLockMachine) -> None:
        if action in ("read", "write"):
            self.acquire(index, action == "write")
        elif action == "late":
            self.use(index)
        else:
            self.end_or_renew(index, action)

    step.__name__ = step.__qualname__ = f"{action}_{index + 1}"
    step.__doc__ = f"client {index + 1}: {action}"
    holding = action not in ("read", "write")
    return precondition(lambda machine: (machine.held[index] is not None) == holding)(rule()(step))


for _index in range(RW_CLIENTS):
    for _action in ("read", "write", "renew", "release", "late"):
        setattr(RWLockMachine, f"{_action}_{_index + 1}", _rule(_action, _index))


def run_rwlock_machine(
    make_issuer: Callable[[VirtualClock], ReadWrites],
    *,
    claims: bool = True,
    settings: Settings | None = None,
) -> None:
    """Run ``RWLockMachine`` on fresh issuers from ``make_issuer(clock)`` (e.g.
    ``MemoryIssuer(clock=clock)``); raise the ``RWLockViolation`` of the shrunk failing
    schedule, if any. ``claims=False`` runs the control (readers that do not claim)."""
    run: Any = run_state_machine_as_test
    run(lambda: RWLockMachine(make_issuer, claims), settings=settings)
