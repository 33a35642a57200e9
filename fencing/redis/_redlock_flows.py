"""Redlock with fence tokens, written once: ``RedlockFlows``, the algorithm as flows of
``Broadcast`` steps (one script sent to every node at once), no I/O of its own.

The scripts, keys and quorum arithmetic are in ``_redlock_scripts``; the two ports that
carry the steps out (a pool of threads per node, or a task per node) in
``_redlock_ports``; the issuers and fences in ``_redlock_issuer``. The proof that tokens
of completed acquisitions strictly increase is in docs/redlock.md.

A node that has not answered by a step's deadline does not hold the step up: its
reply is taken as missing, and whatever it may still grant is given back once it
answers (``Pending.then``). A step waits for every node until its deadline, but once a
majority has answered it waits only ``grace`` more for the stragglers, so one frozen
node (a minority) costs each acquire at most that.

Imports the core (flows, errors), the Redlock scripts, the scripts' ``Script`` and
redis-py's errors.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError

from .._base.errors import FenceSetupError, FenceUnavailable
from .._base.flow import Flow
from .._base.waits import JITTER
from .._lease.protocol import Call
from ..issuer import Busy, FenceStatus
from ._errors import redis_failure
from ._redlock_scripts import (
    ACQUIRE,
    COMMIT,
    FORCE_RELEASE,
    RELEASE,
    RENEW,
    STATUS,
    WAKE_MS,
    Grant,
    busy_for,
    committed_lease,
    lease_value,
    parse_flag,
    parse_grant,
    parse_node_lease,
    quorum_of,
    redlock_keys,
    validity_ms,
    wake_key,
)
from ._scripts import Script

if TYPE_CHECKING:
    from ._redlock_ports import AsyncRedlockPort, RedlockPort

#: One script call on one node: the script and its KEYS and ARGV.
NodeCall = tuple[Script, tuple[Any, ...]]

#: How long a release (and the give-back of a grant that did not count) waits for a
#: majority of the nodes, by default; once a majority answered it waits ``RELEASE_GRACE``
#: more for the others. A node that has not answered keeps the lease until its ttl.
DEFAULT_RELEASE_TIMEOUT = 5.0
RELEASE_GRACE = 0.05
#: How long the first acquire of an issuer waits for the nodes' ``run_id``s.
DISTINCT_WAIT = 0.5


class _NotSent:
    """A call not sent: its deadline had passed before a worker was free to send it."""

    def __repr__(self) -> str:
        return "NOT_SENT"


NOT_SENT = _NotSent()


class Pending:
    """A node's reply that was not in by the step's deadline (a future or a task).

    ``then(calls)`` sends ``calls`` to that node, one after the other, once the reply is
    in, so that a late grant is given back after it was made, never before.
    """

    __slots__ = ("chain", "waiting")

    def __init__(self, waiting: Any, chain: Callable[[Any, list[NodeCall]], None]) -> None:
        self.waiting = waiting  # a concurrent.futures.Future or an asyncio.Task
        self.chain = chain

    def then(self, calls: list[NodeCall]) -> None:
        self.chain(self.waiting, calls)


#: A node's reply in a step's result: the raw script reply, the error it raised, a
#: ``Pending`` reply, ``NOT_SENT``, or ``None`` where nothing was asked of that node.
Reply = Any


def answered(reply: Reply) -> bool:
    """The node answered (a script reply, not an error, a late reply or nothing)."""
    return not isinstance(reply, (BaseException, Pending, _NotSent)) and reply is not None


class Broadcast:
    """One script call per node, sent to all at once; ``result[i]`` is node i's ``Reply``.

    ``calls[i]`` None: nothing for node i. ``after[i]`` a ``Pending``: node i's call
    is chained after that late reply (not waited for). ``deadline`` (monotonic seconds):
    stop waiting then; once ``quorum`` nodes answered, wait at most ``grace`` more.
    ``wait`` False: send and return at once (a give-back nobody waits for). ``fresh``:
    a call that a worker would send only after the deadline is not sent at all
    (``NOT_SENT``: a lease taken then could not count).
    """

    __slots__ = ("after", "calls", "deadline", "fresh", "grace", "quorum", "result", "wait")
    result: list[Reply]

    def __init__(
        self,
        calls: list[NodeCall | None],
        deadline: float,
        quorum: int,
        grace: float,
        *,
        after: list[Pending | None] | None = None,
        wait: bool = True,
        fresh: bool = False,
    ) -> None:
        self.calls = calls
        self.fresh = fresh
        self.deadline = deadline
        self.quorum = quorum
        self.grace = grace
        self.after = after
        self.wait = wait

    def perform(self, port: RedlockPort) -> None:
        port.broadcast(self)

    async def aperform(self, port: AsyncRedlockPort) -> None:
        await port.broadcast(self)


class AwaitWake(Call[bool | None]):
    """A waiter's ``BLPOP`` on ``node``'s wake list ``key``, for up to ``seconds``
    (``port.await_wake``): ``result`` True once woken, False when the wait is over (the
    node may hang), ``None`` when the node failed or the wait is too short to block."""

    __slots__ = ()

    def __init__(self, node: int, key: bytes, seconds: float) -> None:
        super().__init__("await_wake", node, key, seconds)


class Sleep(Call[None]):
    """Pause the flow for ``seconds`` (``port.sleep``)."""

    __slots__ = ()

    def __init__(self, seconds: float) -> None:
        super().__init__("sleep", seconds)


class RunIds:
    """Every node's ``run_id`` (``INFO server``), asked of all at once; ``None`` for a
    node that does not answer within ``seconds`` (down, frozen) or may not be asked."""

    __slots__ = ("result", "seconds")
    result: list[object]

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def perform(self, port: RedlockPort) -> None:
        self.result = port.run_ids(self.seconds)

    async def aperform(self, port: AsyncRedlockPort) -> None:
        self.result = await port.run_ids(self.seconds)


#: The steps of Redlock's flows.
RedlockStep = Broadcast | RunIds | AwaitWake | Sleep

#: A woken waiter starts its attempt after a random part of this (seconds): waiters
#: woken together (several nodes' wake-ups, or the give-backs of a split vote, which
#: wake the others too) do not all ask again at the same instant.
WAKE_JITTER = 0.005


def wake_jitter(left: float) -> float:
    """How long a woken waiter waits before its attempt (within the ``left`` of its wait)."""
    return max(0.0, min(left, JITTER.random() * WAKE_JITTER))


def same_servers(run_ids: list[object]) -> None:
    """``FenceSetupError`` when two nodes answered with one ``run_id`` (``INFO server``):
    two clients of one server (behind two addresses) would fake a majority. ``None``: a
    node that did not answer, or whose INFO is not allowed, is not compared."""
    seen: dict[object, int] = {}
    for index, run_id in enumerate(run_ids):
        if run_id is None:
            continue
        if run_id in seen:
            raise FenceSetupError(
                f"redis redlock: clients[{seen[run_id]}] and clients[{index}] reach the same "
                f"Redis server (run_id {run_id}): each node must be an independent master"
            )
        seen[run_id] = index


class NodeScripts(Protocol):
    """The per-node scripts of one kind of Redlock lease, as ``RedlockFlows`` sends
    them: the fence's (``FenceScripts``) or one side of a read-write lock's
    (``_redlock_rw.RWScripts``). Each returns a ``NodeCall`` (the same for every node);
    ``grant`` parses round 1's reply. ``who`` is the holder id as bytes."""

    def acquire(self, who: bytes, ttl_ms: int, proposal: int) -> NodeCall: ...

    def grant(self, reply: Any) -> Grant: ...

    def commit(self, who: bytes, token: int, proposal: int) -> NodeCall: ...

    def give_back(self, who: bytes, token: int | None, proposal: int) -> NodeCall: ...

    def renew(self, token: int, who: bytes, ttl_ms: int) -> NodeCall: ...

    def release(self, token: int, who: bytes) -> NodeCall: ...


class FenceScripts:
    """A Redlock fence's per-node scripts (``_redlock_scripts``) for the fence ``name``."""

    __slots__ = ("keys", "wake")

    def __init__(self, name: str) -> None:
        self.keys = redlock_keys(name)
        self.wake = wake_key(name)

    def acquire(self, who: bytes, ttl_ms: int, proposal: int) -> NodeCall:
        return ACQUIRE, (*self.keys, who, ttl_ms, b"%d" % proposal)

    grant = staticmethod(parse_grant)

    def commit(self, who: bytes, token: int, proposal: int) -> NodeCall:
        return COMMIT, (*self.keys, who, b"%d" % token, lease_value(proposal, who))

    def give_back(self, who: bytes, token: int | None, proposal: int) -> NodeCall:
        value = who if token is None else lease_value(token, who)
        values = (value, who, lease_value(proposal, who))
        return RELEASE, (self.keys.lease, self.wake, *values, WAKE_MS)

    def renew(self, token: int, who: bytes, ttl_ms: int) -> NodeCall:
        return RENEW, (self.keys.lease, lease_value(token, who), ttl_ms)

    def release(self, token: int, who: bytes) -> NodeCall:
        value = lease_value(token, who)
        return RELEASE, (self.keys.lease, self.wake, value, value, value, WAKE_MS)


#: How far above its estimate of the nodes' clocks the client proposes a token (µs): the
#: time a request takes to reach a node, and the rates at which clocks drift apart
#: between two acquisitions. A proposal below a node's candidate is not taken there
#: (the acquire then commits, one round more); tokens are not counts, so a margin
#: costs nothing.
PROPOSAL_MARGIN_US = 10_000
#: Lua's numbers are doubles: every token a script compares stays below this.
MAX_EXACT = 2**53


class RedlockFlows:
    """Redlock's acquire, renew and release over ``nodes`` masters, as flows of
    ``Broadcast`` steps. ``clock`` is monotonic seconds (the client's, used to subtract
    the time spent from a lease's validity, and to propose a token a little above the
    nodes' clocks as last seen: ``proposal``)."""

    def __init__(
        self,
        nodes: int,
        release_timeout: float = DEFAULT_RELEASE_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nodes = nodes
        self.quorum = quorum_of(nodes)
        self.release_timeout = release_timeout
        self.clock = clock
        # per node: its clock (µs) minus ours when its last ACQUIRE was sent (or None)
        self._offsets: list[float | None] = [None] * nodes
        self._proposed = 0
        self._distinct = False  # no two clients reach one server: checked once

    def proposal(self) -> int:
        """The token to propose now: above every node's clock as last seen (by
        ``PROPOSAL_MARGIN_US``) and above this issuer's last proposal (so two attempts
        of one acquisition never leave the same lease value); 0 (none) until every node
        has been seen once, or past 2^53. Only a hint: a node takes it only above its
        own candidate (docs/redlock.md)."""
        offsets = self._offsets
        if None in offsets:
            return 0
        ahead = max(offset for offset in offsets if offset is not None)
        proposal = max(
            int(ahead + self.clock() * 1_000_000) + PROPOSAL_MARGIN_US, self._proposed + 1
        )
        if proposal >= MAX_EXACT:
            return 0
        self._proposed = proposal
        return proposal

    def _learn(self, grants: dict[int, Grant], sent: float) -> None:
        """Each answering node's clock relative to ours: read after ``sent``, so the
        estimate is at or above it (the proposal errs high, never low)."""
        for node, grant in grants.items():
            self._offsets[node] = grant.clock - sent * 1_000_000

    def _step(
        self, calls: list[NodeCall | None], deadline: float, ttl_ms: int, **options: Any
    ) -> Broadcast:
        return Broadcast(calls, deadline, self.quorum, ttl_ms / 20_000, **options)

    def _short(self, name: str, replies: list[Reply], what: str) -> Busy:
        """Fewer than a majority answered in time: ``Busy`` (try again) when only
        slowness is to blame, ``FenceUnavailable`` when too many nodes failed for a
        majority to be possible."""
        failed = sum(isinstance(reply, BaseException) for reply in replies)
        if failed > self.nodes - self.quorum:
            raise self._errors(name, replies, what)
        return Busy(None)

    def _errors(self, name: str, replies: list[Reply], what: str) -> FenceUnavailable:
        """Fewer than a majority answered: ``FenceUnavailable``, caused by a node's error."""
        count = sum(answered(reply) for reply in replies)
        errors = [reply for reply in replies if isinstance(reply, BaseException)]
        late = sum(isinstance(reply, (Pending, _NotSent)) for reply in replies)
        detail = f"; {late} too slow" if late else ""
        if errors:
            first = redis_failure("redis redlock", errors[0])  # type: ignore[arg-type]
            detail += f"; {len(errors)} failed, e.g. {first}"
        error = FenceUnavailable(
            f"redis redlock {name!r}: {count} of {self.nodes} nodes answered the {what}, "
            f"{self.quorum} needed{detail}"
        )
        error.__cause__ = errors[0] if errors else None
        return error

    @staticmethod
    def _raise_bugs(replies: list[Reply]) -> None:
        """An error that is not redis-py's is a bug: raised, never counted as a vote."""
        for reply in replies:
            if isinstance(reply, BaseException) and not isinstance(reply, RedisError):
                raise reply

    def try_acquire(
        self, name: str, holder: str, ttl_ms: int, scripts: NodeScripts | None = None
    ) -> Flow[RedlockStep, int | Busy]:
        """``acquire``, after a check made once, before the first: no two clients reach
        one server (``run_id``, asked of every node at once; a node that does not answer
        within ``DISTINCT_WAIT`` is not compared)."""
        if not self._distinct:
            run_ids = RunIds(DISTINCT_WAIT)
            yield run_ids
            same_servers(run_ids.result)
            self._distinct = True
        return (yield from self.acquire(name, holder, ttl_ms, scripts))

    def acquire(
        self, name: str, holder: str, ttl_ms: int, scripts: NodeScripts | None = None
    ) -> Flow[Broadcast, int | Busy]:
        """Round 1 (lease, candidates, and the proposed token ``P``): the token once a
        majority granted the lease and holds one same token for it (took ``P``, or, for
        a reader, is in one read epoch) within the validity. Else round 2 (commit the
        maximum and confirm): that token once a majority confirmed within the validity.
        Else the grants are given back and ``Busy`` returned: the fence tries again
        (``FenceUnavailable`` when so many nodes failed that no majority is possible).
        ``scripts``: the per-node scripts of the lease, the fence's by default
        (``FenceScripts``), or a read-write lock's side (``_redlock_rw``)."""
        if scripts is None:
            scripts = FenceScripts(name)
        who = holder.encode()
        proposal = self.proposal()
        start = self.clock()
        deadline = start + ttl_ms / 1000
        call = scripts.acquire(who, ttl_ms, proposal)
        first = self._step([call] * self.nodes, deadline, ttl_ms, fresh=True)
        commit: Broadcast | None = None
        token: int | None = None
        try:
            yield first
            self._raise_bugs(first.result)
            grants = {i: scripts.grant(r) for i, r in enumerate(first.result) if answered(r)}
            self._learn(grants, start)
            outcome: int | Busy
            granted = [grant for grant in grants.values() if grant.granted]
            held = self.decided(granted, proposal)
            if len(grants) < self.quorum:
                outcome = self._short(name, first.result, "acquire")
            elif len(granted) < self.quorum:
                outcome = busy_for(list(grants.values()), self.quorum)
            elif held is not None and self._valid(ttl_ms, start):
                token = held  # already on a majority's counters, in their leases
                after = self._give_back(scripts, who, token, proposal, first, None, late=True)
                self.make_same(after, grants, scripts, who, token, proposal)
                if any(after.calls):  # and a grant that comes in late is given back
                    yield after
                return token
            else:
                token = self.token_of(list(grants.values()), proposal)
                commit_call = scripts.commit(who, token, proposal)
                commit = self._step(  # to every node: also repairs one that lost its counter
                    [commit_call] * self.nodes, deadline, ttl_ms, after=self._late(first.result)
                )
                yield commit
                self._raise_bugs(commit.result)
                replies = commit.result
                if sum(answered(reply) for reply in replies) < self.quorum:
                    outcome = self._short(name, replies, "commit")
                    yield self._give_back(scripts, who, token, proposal, first, commit, wait=True)
                    return outcome
                confirmed = sum(
                    grants[i].granted and parse_flag(replies[i], "COMMIT")
                    for i in grants
                    if answered(replies[i])
                )
                if confirmed >= self.quorum and self._valid(ttl_ms, start):
                    # a grant that comes in late never counted: given back once it is in
                    yield self._give_back(scripts, who, token, proposal, first, commit, late=True)
                    return token
                outcome = Busy(None)  # lost on the way, or too slow: try again
        except GeneratorExit:
            raise
        except FenceUnavailable:  # no majority answered: give back what the rest granted
            yield self._give_back(scripts, who, token, proposal, first, commit, wait=True)
            raise
        except BaseException:  # an interrupt or a cancellation: give back, wait for nothing
            yield self._give_back(scripts, who, token, proposal, first, commit, wait=False)
            raise
        yield self._give_back(scripts, who, token, proposal, first, commit, wait=True)
        return outcome

    def decided(self, granted: list[Grant], proposal: int) -> int | None:
        """The token decided in round 1, if any: the proposal where a majority took it
        (``taken``), or a token a majority holds for the lease (a read epoch that a
        majority of a reader's grants are in); else ``None`` (the acquire commits)."""
        if self.taken(granted):
            return proposal
        counts = Counter(grant.held for grant in granted if grant.held is not None)
        return next((held for held, count in counts.items() if count >= self.quorum), None)

    @staticmethod
    def make_same(
        after: Broadcast,
        grants: dict[int, Grant],
        scripts: NodeScripts,
        who: bytes,
        token: int,
        proposal: int,
    ) -> None:
        """Add to ``after`` (a step nobody waits for) a commit of ``token`` to each node
        that granted the lease without holding that token for it: its lease becomes
        this one (renewed and released with it) and its counter catches up."""
        same = scripts.commit(who, token, proposal)
        for node, grant in grants.items():
            holds = grant.held == token or (grant.accepted and proposal == token)
            if grant.granted and not holds:
                after.calls[node] = same

    def _valid(self, ttl_ms: int, start: float) -> bool:
        """The lease granted since ``start`` is still valid (``validity_ms`` > 0)."""
        return validity_ms(ttl_ms, (self.clock() - start) * 1000) > 0

    def taken(self, granted: list[Grant]) -> bool:
        """The proposal is the token at once: a majority granted the lease and took it."""
        return sum(grant.accepted for grant in granted) >= self.quorum

    @staticmethod
    def token_of(grants: list[Grant], proposal: int) -> int:
        """The token of an acquisition that commits: the maximum of every candidate that
        came back, from a majority at least (the intersection argument of
        docs/redlock.md), and of the proposal where a node took it (its counter)."""
        taken = [proposal] if any(grant.accepted for grant in grants) else []
        return max([grant.candidate for grant in grants] + taken)

    def _late(self, replies: list[Reply]) -> list[Pending | None]:
        return [reply if isinstance(reply, Pending) else None for reply in replies]

    def _give_back(
        self,
        scripts: NodeScripts,
        who: bytes,
        token: int | None,
        proposal: int,
        first: Broadcast,
        commit: Broadcast | None,
        wait: bool = False,
        late: bool = False,
    ) -> Broadcast:
        """The release of this acquisition's lease (bare, with the proposal, or
        committed) on every node that granted it or may have: all but those that
        answered "busy" in round 1; a node whose reply is late gets it once that reply
        is in. ``late``: on those only."""
        call = scripts.give_back(who, token, proposal)
        calls: list[NodeCall | None] = []
        after: list[Pending | None] = []
        for node in range(self.nodes):
            reply = first.result[node] if hasattr(first, "result") else None
            if answered(reply) and not scripts.grant(reply).granted:
                calls.append(None)
                after.append(None)
                continue
            later = (
                commit.result[node] if commit is not None and hasattr(commit, "result") else None
            )
            pending = later if isinstance(later, Pending) else reply
            if not isinstance(pending, Pending):
                pending = None
            calls.append(None if late and pending is None else call)
            after.append(pending)
        deadline = self.clock() + self.release_timeout
        return Broadcast(calls, deadline, self.quorum, RELEASE_GRACE, after=after, wait=wait)

    def renew(
        self, name: str, token: int, holder: str, ttl_ms: int, scripts: NodeScripts | None = None
    ) -> Flow[Broadcast, bool]:
        """Extend the lease on every node that still holds it: True once a majority did
        within the new lease's validity; False when a majority answered that it is not
        this lease; ``FenceUnavailable`` when that cannot be told (too few answers, or
        a majority renewed too late to count)."""
        start = self.clock()
        call = (scripts or FenceScripts(name)).renew(token, holder.encode(), ttl_ms)
        # wait past the validity if need be: a renewal too late to count still tells
        # whether the lease is lost (False) or only slow (FenceUnavailable)
        deadline = start + max(ttl_ms / 1000, self.release_timeout)
        step = self._step([call] * self.nodes, deadline, ttl_ms)
        yield step
        self._raise_bugs(step.result)
        renewed = sum(answered(r) and parse_flag(r, "RENEW") for r in step.result)
        unknown = sum(not answered(r) for r in step.result)
        if renewed >= self.quorum:
            if validity_ms(ttl_ms, (self.clock() - start) * 1000) > 0:
                return True
            raise FenceUnavailable(
                f"redis redlock {name!r}: the renewal took longer than the lease's validity"
            )
        if renewed + unknown >= self.quorum:
            raise self._errors(name, step.result, "renewal")
        return False

    def release(
        self, name: str, token: int, holder: str, scripts: NodeScripts | None = None
    ) -> Flow[Broadcast, bool]:
        """Delete the lease on every node where it is this exact lease: True when a
        majority had it; False when a majority answered that they did not."""
        call = (scripts or FenceScripts(name)).release(token, holder.encode())
        deadline = self.clock() + self.release_timeout
        step = Broadcast([call] * self.nodes, deadline, self.quorum, RELEASE_GRACE)
        yield step
        self._raise_bugs(step.result)
        released = sum(answered(r) and parse_flag(r, "RELEASE") for r in step.result)
        unknown = sum(not answered(r) for r in step.result)
        if released < self.quorum <= released + unknown:
            raise self._errors(name, step.result, "release")
        return released >= self.quorum

    def await_release(
        self, name: str, seconds: float, key: bytes | None = None
    ) -> Flow[RedlockStep, None]:
        """``WakesOnRelease``: block up to ``seconds`` on one node's wake list (``BLPOP``),
        a node taken at random at each wait; return early once a release (or a give-back)
        pushed to it. A node that hangs delays no node's calls and no waiter past
        ``seconds`` (and the port's ``WAIT_GRACE``); a node that fails makes the waiter
        sleep out the ``seconds`` (see docs/redlock.md)."""
        if seconds <= 0:
            return
        start = self.clock()
        wake = AwaitWake(JITTER.randrange(self.nodes), key or wake_key(name), seconds)
        yield wake
        left = seconds - (self.clock() - start)
        if wake.result is None:  # failed, or too short to block: the wait is slept out
            yield Sleep(max(0.0, left))
        elif wake.result:
            yield Sleep(wake_jitter(left))

    def status(self, name: str) -> Flow[Broadcast, FenceStatus]:
        """The lease a majority holds (committed), the highest counter among the nodes
        that answered (a majority must answer: else ``FenceUnavailable``)."""
        keys = redlock_keys(name)
        step = self._everywhere((STATUS, keys))
        yield step
        leases = self._leases(name, step.result, "status")
        counters = [lease.counter for lease in leases if lease.counter is not None]
        last = max(counters) if counters else None
        held = committed_lease(leases, self.quorum)
        if held is None:
            return FenceStatus(name, False, last_token=last)
        token, holder, left = held
        return FenceStatus(name, True, holder, token, left, max(last or 0, token))

    def force_release(self, name: str) -> Flow[Broadcast, FenceStatus]:
        """Delete the lease on every node whoever holds it; the nodes that had the
        committed lease keep a counter >= its token (raised in the same script if need
        be), so the next token is higher. The lease a majority had, or not held."""
        keys = redlock_keys(name)
        step = self._everywhere((FORCE_RELEASE, keys))
        yield step
        held = committed_lease(self._leases(name, step.result, "force release"), self.quorum)
        if held is None:
            return FenceStatus(name, False)
        token, holder, left = held
        return FenceStatus(name, True, holder, token, left, token)

    def _everywhere(self, call: NodeCall) -> Broadcast:
        """``call`` on every node, waited for as a release is."""
        deadline = self.clock() + self.release_timeout
        return Broadcast([call] * self.nodes, deadline, self.quorum, RELEASE_GRACE)

    def _leases(self, name: str, replies: list[Reply], what: str) -> list[Any]:
        self._raise_bugs(replies)
        if sum(answered(reply) for reply in replies) < self.quorum:
            raise self._errors(name, replies, what)
        return [parse_node_lease(reply) for reply in replies if answered(reply)]
