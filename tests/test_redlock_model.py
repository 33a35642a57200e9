"""Redlock's token construction under Hypothesis: ``RedlockFlows`` (the real flows, the
code ``RedlockFence`` runs) driven step by step against three simulated nodes, on
virtual time.

The nodes run a Python model of the per-node scripts (``_redlock_scripts``: the same
keys, arguments and replies, the lease's ``PX`` expiry on the node's own clock, and
each node's clock off by up to an hour, so the clock floor cannot hide a quorum bug).
Rules interleave everything the real world can: up to three clients, each with an
issuer of its own (its own view of the clocks, its own proposals), acquiring at once;
each script delivered to each node separately, a reply lost while its request still
runs later, nodes partitioned and healed, nodes restarted **empty**, time passing,
releases. After every step the invariants of docs/redlock.md are checked on the whole
history:

- no two completed acquisitions got the same token;
- an acquisition that began after another completed got a larger token.

A node may be restarted empty only while the others keep the last committed token on
more than a minority (the documented assumption: a minority at a time, once repaired).
The controls: the same machine must find a violation in each of two broken variants, a
committed token taken from one node instead of the maximum over a majority, and a
proposed token counted once one node (not a majority) took it.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fencing.issuer import Busy
from fencing.redis._redlock_flows import Broadcast, RedlockFlows
from fencing.redis._redlock_scripts import (
    ACQUIRE,
    COMMIT,
    FORCE_RELEASE,
    RELEASE,
    RENEW,
    STATUS,
    Grant,
    quorum_of,
)
from fencing.testing.statemachine import REPRODUCIBLE

pytestmark = pytest.mark.usefixtures("no_local_constants")

NODES = 3
QUORUM = quorum_of(NODES)
TTL_MS = 5000
START_MS = 1_800_000_000_000
HOUR_US = 3600 * 10**6
#: Each node's clock: right, or an hour behind or ahead (or a second), so that the clock
#: floor alone never keeps tokens in order and only the quorum can.
OFFSETS = (0, -HOUR_US, HOUR_US, -(10**6), 10**6)


class InvariantBroken(AssertionError):
    """A token invariant does not hold (what the broken variant must run into)."""


# -- the nodes -----------------------------------------------------------------------------


class Node:
    """One simulated master: keys with an optional expiry on this node's clock."""

    def __init__(self, offset_us: int) -> None:
        self.offset_us = offset_us
        self.data: dict[bytes, tuple[bytes, int | None]] = {}  # key -> (value, expires at µs)
        self.up = True
        self.last_us = 0  # the machine's clock, not the process's: kept across restarts

    def clock_us(self, now_ms: int) -> int:
        """Redis ``TIME``: the virtual time plus this node's offset, and never the same
        microsecond twice (time passes between two calls)."""
        self.last_us = max(now_ms * 1000 + self.offset_us, self.last_us + 1)
        return self.last_us

    def get(self, key: bytes, now: int) -> bytes | None:
        found = self.data.get(key)
        if found is None:
            return None
        value, expires = found
        if expires is not None and expires <= now:
            del self.data[key]
            return None
        return value

    def pttl(self, key: bytes, now: int) -> int:
        if self.get(key, now) is None:
            return -2
        expires = self.data[key][1]
        return -1 if expires is None else (expires - now) // 1000

    def counter(self, key: bytes) -> int | None:
        found = self.data.get(key)
        return None if found is None else int(found[0])

    def run(self, script: Any, args: tuple[Any, ...], now_ms: int) -> Any:
        """The script's effect and reply, as Redis would give it to redis-py."""
        now = max(now_ms * 1000 + self.offset_us, self.last_us)  # expiry: no TIME call
        if script is ACQUIRE:
            lease, counter, holder, ttl_ms, proposal = args
            now = self.clock_us(now_ms)
            last = self.counter(counter)
            candidate = max(now, last + 1 if last is not None else 0)
            current = self.get(lease, now)
            clock = b"%d" % now
            if current is not None and current != holder:
                return [0, b"%d" % candidate, self.pttl(lease, now), clock, 0]
            expires = now + int(ttl_ms) * 1000
            if int(proposal) >= candidate:
                self.data[counter] = (proposal, None)
                self.data[lease] = (proposal + b":" + holder, expires)
                return [1, b"%d" % candidate, -2, clock, 1]
            self.data[lease] = (holder, expires)
            return [1, b"%d" % candidate, -2, clock, 0]
        if script is COMMIT:
            lease, counter, holder, digits, taken = args
            last = self.counter(counter)
            if last is None or last < int(digits):
                self.data[counter] = (digits, None)
            if self.get(lease, now) in (holder, taken):
                self.data[lease] = (digits + b":" + holder, self.data[lease][1])
                return 1
            return 0
        if script is RENEW:
            lease, value, ttl_ms = args
            if self.get(lease, now) == value:
                self.data[lease] = (value, now + int(ttl_ms) * 1000)
                return 1
            return 0
        if script is RELEASE:
            lease, _wake, *values, _wake_ms = args
            if self.get(lease, now) in values:
                del self.data[lease]
                return 1
            return 0
        if script in (STATUS, FORCE_RELEASE):  # not driven by this machine
            raise NotImplementedError(script)
        raise AssertionError(f"unknown script {script!r}")


# -- the clients ---------------------------------------------------------------------------


@dataclass
class Attempt:
    """An acquisition in flight: its flow, the step being delivered, its history."""

    flow: Generator[Broadcast, None, Any]
    holder: str
    began: int  # the event number of its start
    step: Broadcast
    undelivered: set[int] = field(default_factory=set)


@dataclass
class Completed:
    token: int
    began: int
    ended: int


class OneNodeToken(RedlockFlows):
    """Broken on purpose: the token is the first granting node's candidate alone (and
    always committed: no proposal is ever the token)."""

    @staticmethod
    def token_of(grants: list[Grant], proposal: int) -> int:
        return grants[0].candidate

    def proposal(self) -> int:
        return 0


class OneNodeTook(RedlockFlows):
    """Broken on purpose: the proposal is the token once one node took it (and the
    nodes that granted without taking it are left as they are)."""

    def taken(self, granted: list[Grant]) -> bool:
        return any(grant.accepted for grant in granted)

    @staticmethod
    def make_same(*args: Any) -> None:
        pass


class Acquisitions(RuleBasedStateMachine):
    """Acquisitions step by step, releases, and nodes cut off and healed; the invariants.
    ``RedlockModel`` adds the rest of the faults; the control runs on this alone."""

    flows_class: ClassVar[type[RedlockFlows]] = RedlockFlows

    def __init__(self) -> None:
        super().__init__()
        self.now_ms = START_MS
        self.nodes = [Node(0) for _ in range(NODES)]
        # an issuer per client (its own view of the clocks, its own proposals)
        self.flows = [self.flows_class(NODES, clock=self.clock) for _ in range(3)]
        self.events = itertools.count()
        self.holders = itertools.count()
        self.attempts: dict[int, Attempt] = {}
        self.held: dict[int, tuple[int, str]] = {}  # client -> (token, holder)
        self.last_holder: dict[int, str] = {}
        self.in_flight: list[tuple[int, Any, tuple[Any, ...]]] = []
        self.completed: list[Completed] = []

    def clock(self) -> float:
        """The clients' monotonic clock: the virtual time, in seconds."""
        return self.now_ms / 1000

    @initialize(offsets=st.lists(st.sampled_from(OFFSETS), min_size=NODES, max_size=NODES))
    def clocks(self, offsets: list[int]) -> None:
        for node, offset in zip(self.nodes, offsets, strict=True):
            node.offset_us = offset

    # -- acquisitions, step by step

    @precondition(lambda self: len(self.attempts) + len(self.held) < 3)
    @rule(again=st.booleans(), at_once=st.booleans())
    def start(self, again: bool, at_once: bool) -> None:
        """An idle client begins an acquire attempt; ``again`` with the holder id of its
        last attempt (as the fence's wait loop does after ``Busy``); ``at_once``: every
        step of it is delivered to every node now (else ``deliver`` and ``reply`` do it,
        interleaved with everything else)."""
        client = min({0, 1, 2} - set(self.attempts) - set(self.held))
        holder = self.last_holder.get(client) if again else None
        if holder is None:
            holder = f"holder-{next(self.holders)}"
        self.last_holder[client] = holder
        flow = self.flows[client].acquire("model", holder, TTL_MS)
        began = next(self.events)
        self._begin(client, Attempt(flow, holder, began, next(flow)))
        while at_once and client in self.attempts:
            self._reply(client)

    def _begin(self, client: int, attempt: Attempt) -> None:
        step = attempt.step
        step.result = [None] * NODES
        attempt.undelivered = {i for i, call in enumerate(step.calls) if call is not None}
        self.attempts[client] = attempt

    def _pick(self, index: int) -> int:
        return sorted(self.attempts)[index % len(self.attempts)]

    @precondition(lambda self: any(a.undelivered for a in self.attempts.values()))
    @rule(
        index=st.integers(0, 2),
        node=st.integers(0, NODES - 1),
        lost=st.sampled_from([False] * 7 + [True]),
    )
    def deliver(self, index: int, node: int, lost: bool) -> None:
        """One node gets an attempt's current script first; ``lost``: the request runs
        later (``run_late``) and the client sees a timeout instead of the reply."""
        waiting = sorted(c for c, a in self.attempts.items() if a.undelivered)
        attempt = self.attempts[waiting[index % len(waiting)]]
        nodes = sorted(attempt.undelivered)
        node = nodes[node % len(nodes)]
        attempt.undelivered.discard(node)
        script, args = attempt.step.calls[node]  # type: ignore[misc]
        if lost:
            self.in_flight.append((node, script, args))
            attempt.step.result[node] = RedisTimeoutError("lost in the model")
        else:
            attempt.step.result[node] = self._call(node, script, args)
        next(self.events)

    def _call(self, node: int, script: Any, args: tuple[Any, ...]) -> Any:
        if not self.nodes[node].up:
            return RedisConnectionError("partitioned in the model")
        return self.nodes[node].run(script, args, self.now_ms)

    @precondition(lambda self: self.attempts)
    @rule(index=st.integers(0, 2))
    def reply(self, index: int) -> None:
        """The step's remaining nodes get it now; the flow reads the replies (a step
        without any call, such as a give-back with nothing late, goes on at once)."""
        self._reply(self._pick(index))

    def _reply(self, client: int) -> None:
        attempt = self.attempts[client]
        for node in sorted(attempt.undelivered):
            script, args = attempt.step.calls[node]  # type: ignore[misc]
            attempt.step.result[node] = self._call(node, script, args)
        attempt.undelivered.clear()
        try:
            attempt.step = attempt.flow.send(None)
            while not any(attempt.step.calls):
                attempt.step.result = [None] * NODES
                attempt.step = attempt.flow.send(None)
        except StopIteration as stop:
            del self.attempts[client]
            self._ended(client, attempt, stop.value)
            return
        except Exception:  # FenceUnavailable: no majority; the attempt is over
            del self.attempts[client]
            return
        self._begin(client, attempt)

    def _ended(self, client: int, attempt: Attempt, outcome: int | Busy) -> None:
        if isinstance(outcome, Busy):
            return
        ended = next(self.events)
        self.completed.append(Completed(outcome, attempt.began, ended))
        self.held[client] = (outcome, attempt.holder)

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 2))
    def release(self, index: int) -> None:
        client = sorted(self.held)[index % len(self.held)]
        token, holder = self.held.pop(client)
        self._run(self.flows[client].release("model", token, holder))

    def _run(self, flow: Generator[Broadcast, None, Any]) -> Any:
        """A whole flow at once (release)."""
        try:
            step = next(flow)
            while True:
                step.result = [
                    None if call is None else self._call(i, *call)
                    for i, call in enumerate(step.calls)
                ]
                step = flow.send(None)
        except StopIteration as stop:
            return stop.value
        except Exception:
            return None

    # -- the world

    @precondition(lambda self: all(node.up for node in self.nodes))
    @rule(node=st.integers(0, NODES - 1))
    def cut(self, node: int) -> None:
        """A node becomes unreachable (its data kept), one at a time (a majority cut off
        only makes acquisitions fail): the client gets errors from it."""
        self.nodes[node].up = False

    @precondition(lambda self: not all(node.up for node in self.nodes))
    @rule()
    def heal(self) -> None:
        for node in self.nodes:
            node.up = True

    # -- the invariants of docs/redlock.md

    @invariant()
    def tokens_are_unique_and_ordered(self) -> None:
        tokens = [done.token for done in self.completed]
        if len(set(tokens)) != len(tokens):
            raise InvariantBroken(f"two completed acquisitions share a token: {tokens}")
        for earlier in self.completed:
            for later in self.completed:
                if later.began > earlier.ended and later.token <= earlier.token:
                    raise InvariantBroken(
                        f"token {later.token} (began at event {later.began}) is not above "
                        f"{earlier.token} (completed at event {earlier.ended})"
                    )


class RedlockModel(Acquisitions):
    """Every fault: also lost replies whose requests run later, time passing (leases
    expiring, validity running out) and nodes restarted empty."""

    @precondition(lambda self: self.in_flight)
    @rule(index=st.integers(0, 8))
    def run_late(self, index: int) -> None:
        """A request whose reply was lost runs on its node now."""
        node, script, args = self.in_flight.pop(index % len(self.in_flight))
        if self.nodes[node].up:
            self.nodes[node].run(script, args, self.now_ms)
        next(self.events)

    @rule(ms=st.sampled_from([1, 10, 100, 1000, 6000]))
    def time_passes(self, ms: int) -> None:
        self.now_ms += ms

    @precondition(lambda self: not self.attempts and not self.in_flight)
    @rule(node=st.integers(0, NODES - 1))
    def restart_empty(self, node: int) -> None:
        """The node loses everything: between acquisitions (none in flight), and only if
        the others still carry the last committed token on more than a minority
        (``NODES - QUORUM + 1`` nodes): the assumption docs/redlock.md states."""
        if self.completed:
            last = max(done.token for done in self.completed)
            keeping = [
                i
                for i, other in enumerate(self.nodes)
                if i != node and (other.counter(b"fencing:redlock:{model}:counter") or 0) >= last
            ]
            if len(keeping) < NODES - QUORUM + 1:
                return
        self.nodes[node].data.clear()
        next(self.events)


class BrokenModel(Acquisitions):
    flows_class = OneNodeToken


class BrokenProposalModel(Acquisitions):
    flows_class = OneNodeTook


MODEL = settings(
    REPRODUCIBLE,
    max_examples=120,
    stateful_step_count=100,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_tokens_of_completed_acquisitions_are_unique_and_ordered() -> None:
    run_state_machine_as_test(RedlockModel, settings=MODEL)


@pytest.mark.parametrize("broken", [BrokenModel, BrokenProposalModel])
def test_a_token_from_one_node_is_caught(broken: type[Acquisitions]) -> None:
    """The controls: the machine finds each broken variant's violation (a committed
    token read from one node; a proposal counted when one node took it)."""
    search = settings(  # finding it is the point: no shrinking, one failure reported
        MODEL, max_examples=3000, phases=[Phase.generate], report_multiple_bugs=False
    )
    with pytest.raises(InvariantBroken):
        run_state_machine_as_test(broken, settings=search)
