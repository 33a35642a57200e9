"""Redlock read-write locks checked by a machine: ``test_redlock_model``'s state machine
(acquisitions step by step, each script delivered to each node separately, replies lost
while their requests run later, nodes cut off and healed) driving the read-write flows
(``RedlockRWFlows``) of readers and writers, their scripts run by three real
``redis-server`` processes. After every step it checks what docs/redlock.md ("Read-write
locks") proves: no write token equals another completed acquisition's token, and of two
completed acquisitions of which one is a write, the one that began after the other
completed has the higher token. The control: the same machine finds the violation of a
variant that takes one node's word for a reader's epoch.

Time does not pass here (the Lua scripts read the servers' clocks): leases last longer
than any example, and are ended by releases.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import pytest
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from test_redlock_model import HOUR_US, NODES, Acquisitions, Attempt, InvariantBroken

from fencing.issuer import READ, WRITE, Busy
from fencing.redis._redlock_rw_flows import RedlockRWFlows
from fencing.redis._redlock_scripts import Grant
from fencing.testing.servers import RedisServer, ServerError
from fencing.testing.statemachine import REPRODUCIBLE

#: Longer than any example: leases end by release only.
RW_TTL_MS = 600_000


@dataclass
class Done:
    mode: str
    token: int
    began: int
    ended: int


class Proposing(RedlockRWFlows):
    """The flows with a proposal that does not depend on timing, so that Hypothesis sees
    the same outcome for the same steps: an hour above the wall clock (the servers'),
    taken wherever no counter is ahead of it; or none (``propose`` False: every
    acquisition commits)."""

    propose = True

    def proposal(self) -> int:
        if not self.propose:
            return 0
        self._proposed = max(int(time.time() * 1_000_000) + HOUR_US, self._proposed + 1)
        return self._proposed


class OneNodeEpoch(Proposing):
    """Broken on purpose: a token one node holds for the lease is the token."""

    def decided(self, granted: list[Grant], proposal: int) -> int | None:
        return next((grant.held for grant in granted if grant.held is not None), None)

    @staticmethod
    def make_same(*args: Any) -> None:
        pass


class ReadersAndWriters(Acquisitions):
    """``Acquisitions`` with a mode per acquisition, on real nodes (``servers``)."""

    servers: ClassVar[list[redis.Redis]] = []
    flows_class: ClassVar[type[Proposing]] = Proposing

    def __init__(self) -> None:
        super().__init__()
        self.name = f"rw-model-{uuid.uuid4().hex}"  # the servers outlive the examples
        self.modes: dict[int, str] = {}
        self.done: list[Done] = []

    @initialize(offsets=st.just([0] * NODES), propose=st.booleans())
    def clocks(self, offsets: list[int], propose: bool) -> None:
        """The servers' clocks are the machine's; the proposal on or off."""
        for flows in self.flows:
            cast(Proposing, flows).propose = propose

    @precondition(lambda self: len(self.attempts) + len(self.held) < 3)
    @rule(again=st.booleans(), at_once=st.booleans(), write=st.booleans(), queue=st.booleans())
    def start(self, again: bool, at_once: bool, write: bool, queue: bool) -> None:
        """An idle client begins a read or write attempt (see ``Acquisitions.start``);
        ``queue``: a refused writer marks itself waiting."""
        client = min({0, 1, 2} - set(self.attempts) - set(self.held))
        holder = self.last_holder.get(client) if again else None
        if holder is None or self.modes.get(client) != (WRITE if write else READ):
            holder = f"holder-{next(self.holders)}"
        self.last_holder[client] = holder
        self.modes[client] = WRITE if write else READ
        flows: Any = self.flows[client]
        queue_ms = 1000 if write and queue else 0
        flow = flows.rw_acquire(self.name, self.modes[client], holder, RW_TTL_MS, queue_ms)
        step = next(flow)
        while not hasattr(step, "calls"):  # the run_id check, once per issuer: skipped
            step.result = [None] * NODES
            step = flow.send(None)
        self._begin(client, Attempt(flow, holder, next(self.events), step))
        while at_once and client in self.attempts:
            self._reply(client)

    def _call(self, node: int, script: Any, args: tuple[Any, ...]) -> Any:
        if not self.nodes[node].up:
            return RedisConnectionError("partitioned in the model")
        try:
            return self.servers[node].eval(script.text, script.numkeys, *args)
        except RedisError as exc:
            return exc

    def _ended(self, client: int, attempt: Attempt, outcome: int | Busy) -> None:
        if isinstance(outcome, Busy):
            return
        self.done.append(Done(self.modes[client], outcome, attempt.began, next(self.events)))
        self.held[client] = (outcome, attempt.holder)

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 2))
    def release(self, index: int) -> None:
        client = sorted(self.held)[index % len(self.held)]
        token, holder = self.held.pop(client)
        flows: Any = self.flows[client]
        self._run(flows.rw_release(self.name, self.modes[client], token, holder))

    @precondition(lambda self: self.in_flight)
    @rule(index=st.integers(0, 8))
    def run_late(self, index: int) -> None:
        """A request whose reply was lost runs on its node now."""
        node, script, args = self.in_flight.pop(index % len(self.in_flight))
        self._call(node, script, args)
        next(self.events)

    @invariant()
    def tokens_are_unique_and_ordered(self) -> None:
        for earlier in self.done:
            for later in self.done:
                if earlier is later or READ == earlier.mode == later.mode:
                    continue
                if later.token == earlier.token:
                    raise InvariantBroken(f"a write shares its token: {earlier}, {later}")
                if later.began > earlier.ended and later.token < earlier.token:
                    raise InvariantBroken(f"{later} began after {earlier} with a lower token")


class BrokenReadersAndWriters(ReadersAndWriters):
    flows_class = OneNodeEpoch


@pytest.fixture(scope="module")
def servers() -> Iterator[list[redis.Redis]]:
    started: list[RedisServer] = []
    try:
        for _ in range(NODES):
            started.append(RedisServer().start())
    except ServerError as exc:
        pytest.fail(f"cannot start a test server: {exc}")
    clients = [redis.Redis(port=server.port, socket_timeout=5) for server in started]
    yield clients
    for client in clients:
        client.close()
    for server in started:
        server.close()


MODEL = settings(
    REPRODUCIBLE,
    max_examples=40,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.timeout(300)
def test_write_tokens_and_read_epochs_stay_ordered(servers: list[redis.Redis]) -> None:
    ReadersAndWriters.servers = servers
    run_state_machine_as_test(ReadersAndWriters, settings=MODEL)


@pytest.mark.timeout(300)
def test_an_epoch_from_one_node_is_caught(servers: list[redis.Redis]) -> None:
    BrokenReadersAndWriters.servers = servers
    search = settings(MODEL, max_examples=600, phases=[Phase.generate], report_multiple_bugs=False)
    with pytest.raises(InvariantBroken):
        run_state_machine_as_test(BrokenReadersAndWriters, settings=search)
