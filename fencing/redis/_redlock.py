"""Redlock with fence tokens: ``RedlockFence`` over N independent Redis masters.

The algorithm is written once as flows (``RedlockFlows``) of ``Broadcast`` steps (one
script sent to every node at once), driven blocking (``RedlockIssuer``: a small pool of
threads per node, kept by the issuer) or asyncio (``AsyncRedlockIssuer``: one task per
node). The scripts, keys and quorum arithmetic are in ``_redlock_scripts``; the proof
that tokens of completed acquisitions strictly increase is in docs/redlock.md.

A node that has not answered by a step's deadline does not hold the step up: its
reply is taken as missing, and whatever it may still grant is given back once it
answers (``Pending.then``). A step waits for every node until its deadline, but once a
majority has answered it waits only ``grace`` more for the stragglers, so one frozen
node (a minority) costs each acquire at most that.

Imports the core (fences, errors, validation), the Redis issuer's script runners and
client checks, the Redlock scripts and redis-py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import suppress
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import RedisError

from .._base.errors import FenceSetupError, FenceUnavailable
from .._base.flow import Flow, run_async, run_sync
from .._base.validate import check_ttl
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from ..issuer import Busy, FenceStatus
from ._errors import redis_failure
from ._issuer import arun_script, run_script
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
    name_of,
    names_pattern,
    parse_flag,
    parse_grant,
    parse_node_lease,
    quorum_of,
    redlock_keys,
    validity_ms,
    wake_key,
)
from ._scripts import Script

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

    def perform(self, port: ThreadNodes) -> None:
        port.broadcast(self)

    async def aperform(self, port: AsyncNodes) -> None:
        await port.broadcast(self)


# -- ports: the only I/O --------------------------------------------------------------------


class ThreadNodes:
    """The blocking nodes: each client with a small thread pool of its own, so a node
    that hangs ties up only its own threads (threads start on demand and end with the
    pool)."""

    THREADS_PER_NODE = 4

    def __init__(self, clients: Sequence[redis.Redis]) -> None:
        self.clients = tuple(clients)
        self._pools = self._new_pools()

    def _new_pools(self) -> list[concurrent.futures.ThreadPoolExecutor]:
        return [
            concurrent.futures.ThreadPoolExecutor(
                self.THREADS_PER_NODE, thread_name_prefix=f"fencing-redlock-{i}"
            )
            for i in range(len(self.clients))
        ]

    def close(self) -> None:
        """End the threads once their calls are done; new ones start if used again."""
        pools, self._pools = self._pools, self._new_pools()
        for pool in pools:
            pool.shutdown(wait=False)

    def submit(
        self, node: int, fn: Callable[..., Reply], *args: Any
    ) -> concurrent.futures.Future[Any]:
        """``fn(*args)`` on ``node``'s threads."""
        return self._pools[node].submit(fn, *args)

    def _send(self, node: int, calls: list[NodeCall], deadline: float | None) -> Reply:
        """In a worker: the calls on ``node`` in order; the last one's reply (or error)."""
        if deadline is not None and time.monotonic() > deadline:
            return NOT_SENT
        reply: Reply = None
        for script, args in calls:
            try:
                reply = run_script(self.clients[node], script, args)
            except Exception as exc:  # kept as the reply; the flow decides
                reply = exc
        return reply

    def _chain_on(self, node: int) -> Callable[[Any, list[NodeCall]], None]:
        def chain(waiting: Any, calls: list[NodeCall]) -> None:
            def send(_: object) -> None:
                with suppress(RuntimeError):  # the pool was shut down: the lease expires
                    self._pools[node].submit(self._send, node, calls, None)

            waiting.add_done_callback(send)

        return chain

    def broadcast(self, step: Broadcast) -> None:
        result: list[Reply] = [None] * len(self.clients)
        futures: dict[concurrent.futures.Future[Reply], int] = {}
        for node, call in enumerate(step.calls):
            if call is None:
                continue
            earlier = step.after[node] if step.after is not None else None
            if earlier is not None:
                earlier.then([call])
                continue
            late = step.deadline if step.fresh else None
            future = self._pools[node].submit(self._send, node, [call], late)
            futures[future] = node
            result[node] = Pending(future, self._chain_on(node))
        step.result = result  # the late ones as they are if the wait is interrupted
        if not step.wait:
            return
        deadline, done, quorum = step.deadline, 0, step.quorum
        pending = set(futures)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            finished, pending = concurrent.futures.wait(
                pending, left, concurrent.futures.FIRST_COMPLETED
            )
            for future in finished:
                reply = result[futures[future]] = future.result()
                done += answered(reply)
            if done >= quorum:  # a majority is in: the stragglers get ``grace`` more
                deadline = min(deadline, time.monotonic() + step.grace)
                quorum = len(futures) + 1  # the grace starts once
        for future in pending:  # in by now, though this thread was too slow to see it
            if future.done():
                result[futures[future]] = future.result()


class AsyncNodes:
    """The asyncio nodes: one task per call; a late task is kept until it ends."""

    def __init__(self, clients: Sequence[redis.asyncio.Redis]) -> None:
        self.clients = tuple(clients)
        self._background: set[asyncio.Future[Reply]] = set()

    async def _send(self, node: int, calls: list[NodeCall], deadline: float | None = None) -> Reply:
        if deadline is not None and time.monotonic() > deadline:
            return NOT_SENT
        reply: Reply = None
        for script, args in calls:
            try:
                reply = await arun_script(self.clients[node], script, args)
            except Exception as exc:
                reply = exc
        return reply

    def _spawn(self, coroutine: Coroutine[Any, Any, Reply]) -> asyncio.Future[Reply]:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _chain_on(self, node: int) -> Callable[[Any, list[NodeCall]], None]:
        def chain(waiting: Any, calls: list[NodeCall]) -> None:
            waiting.add_done_callback(lambda _: self._spawn(self._send(node, calls)))

        return chain

    async def broadcast(self, step: Broadcast) -> None:
        result: list[Reply] = [None] * len(self.clients)
        tasks: dict[asyncio.Future[Reply], int] = {}
        for node, call in enumerate(step.calls):
            if call is None:
                continue
            earlier = step.after[node] if step.after is not None else None
            if earlier is not None:
                earlier.then([call])
                continue
            task = self._spawn(self._send(node, [call], step.deadline if step.fresh else None))
            tasks[task] = node
            result[node] = Pending(task, self._chain_on(node))
        step.result = result
        if not step.wait:
            return
        deadline, done, quorum = step.deadline, 0, step.quorum
        pending = set(tasks)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            finished, pending = await asyncio.wait(
                pending, timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            for task in finished:
                reply = result[tasks[task]] = task.result()
                done += answered(reply)
            if done >= quorum:  # a majority is in: the stragglers get ``grace`` more
                deadline = min(deadline, time.monotonic() + step.grace)
                quorum = len(tasks) + 1
        for task in pending:
            if task.done():
                result[tasks[task]] = task.result()


# -- the algorithm, written once --------------------------------------------------------------


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

    def acquire(self, name: str, holder: str, ttl_ms: int) -> Flow[Broadcast, int | Busy]:
        """Round 1 (lease, candidates, and the proposed token ``P``): ``P`` once a
        majority granted the lease and took ``P`` within the validity. Else round 2 (commit
        the maximum and confirm): that token once a majority confirmed within the
        validity. Else the grants are given back and ``Busy`` returned: the fence tries
        again (``FenceUnavailable`` when so many nodes failed that no majority is
        possible)."""
        keys = redlock_keys(name)
        who = holder.encode()
        proposal = self.proposal()
        start = self.clock()
        deadline = start + ttl_ms / 1000
        call = (ACQUIRE, (*keys, who, ttl_ms, b"%d" % proposal))
        first = self._step([call] * self.nodes, deadline, ttl_ms, fresh=True)
        commit: Broadcast | None = None
        token: int | None = None
        try:
            yield first
            self._raise_bugs(first.result)
            grants = {i: parse_grant(r) for i, r in enumerate(first.result) if answered(r)}
            self._learn(grants, start)
            outcome: int | Busy
            granted = [grant for grant in grants.values() if grant.granted]
            if len(grants) < self.quorum:
                outcome = self._short(name, first.result, "acquire")
            elif len(granted) < self.quorum:
                outcome = busy_for(list(grants.values()), self.quorum)
            elif self.taken(granted) and self._valid(ttl_ms, start):
                token = proposal  # already on a majority's counters, in their leases
                after = self._give_back(name, who, token, proposal, first, None, late=True)
                self.make_same(after, grants, name, who, token)
                if any(after.calls):  # and a grant that comes in late is given back
                    yield after
                return token
            else:
                token = self.token_of(list(grants.values()), proposal)
                commit_call: NodeCall = (
                    COMMIT,
                    (*keys, who, b"%d" % token, lease_value(proposal, who)),
                )
                commit = self._step(  # to every node: also repairs one that lost its counter
                    [commit_call] * self.nodes, deadline, ttl_ms, after=self._late(first.result)
                )
                yield commit
                self._raise_bugs(commit.result)
                replies = commit.result
                if sum(answered(reply) for reply in replies) < self.quorum:
                    outcome = self._short(name, replies, "commit")
                    yield self._give_back(name, who, token, proposal, first, commit, wait=True)
                    return outcome
                confirmed = sum(
                    grants[i].granted and parse_flag(replies[i], "COMMIT")
                    for i in grants
                    if answered(replies[i])
                )
                if confirmed >= self.quorum and self._valid(ttl_ms, start):
                    # a grant that comes in late never counted: given back once it is in
                    yield self._give_back(name, who, token, proposal, first, commit, late=True)
                    return token
                outcome = Busy(None)  # lost on the way, or too slow: try again
        except GeneratorExit:
            raise
        except FenceUnavailable:  # no majority answered: give back what the rest granted
            yield self._give_back(name, who, token, proposal, first, commit, wait=True)
            raise
        except BaseException:  # an interrupt or a cancellation: give back, wait for nothing
            yield self._give_back(name, who, token, proposal, first, commit, wait=False)
            raise
        yield self._give_back(name, who, token, proposal, first, commit, wait=True)
        return outcome

    @staticmethod
    def make_same(
        after: Broadcast, grants: dict[int, Grant], name: str, who: bytes, token: int
    ) -> None:
        """Add to ``after`` (a step nobody waits for) a ``COMMIT`` of ``token`` to each
        node that granted the lease but did not take the proposal: its lease becomes
        this one (renewed and released with it) and its counter catches up."""
        same = (COMMIT, (*redlock_keys(name), who, b"%d" % token, lease_value(token, who)))
        for node, grant in grants.items():
            if grant.granted and not grant.accepted:
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
        name: str,
        who: bytes,
        token: int | None,
        proposal: int,
        first: Broadcast,
        commit: Broadcast | None,
        wait: bool = False,
        late: bool = False,
    ) -> Broadcast:
        """RELEASE of this acquisition's lease (bare, with the proposal, or committed) on
        every node that granted it or may have: all but those that answered "busy" in
        round 1; a node whose reply is late gets it once that reply is in. ``late``: on
        those only."""
        value = who if token is None else lease_value(token, who)
        values = (value, who, lease_value(proposal, who))
        call: NodeCall = (RELEASE, (redlock_keys(name).lease, wake_key(name), *values, WAKE_MS))
        calls: list[NodeCall | None] = []
        after: list[Pending | None] = []
        for node in range(self.nodes):
            reply = first.result[node] if hasattr(first, "result") else None
            if answered(reply) and not parse_grant(reply).granted:
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

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Flow[Broadcast, bool]:
        """Extend the lease on every node that still holds it: True once a majority did
        within the new lease's validity; False when a majority answered that it is not
        this lease; ``FenceUnavailable`` when that cannot be told (too few answers, or
        a majority renewed too late to count)."""
        start = self.clock()
        value = lease_value(token, holder.encode())
        call = (RENEW, (redlock_keys(name).lease, value, ttl_ms))
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

    def release(self, name: str, token: int, holder: str) -> Flow[Broadcast, bool]:
        """Delete the lease on every node where it is this exact lease: True when a
        majority had it; False when a majority answered that they did not."""
        value = lease_value(token, holder.encode())
        call = (RELEASE, (redlock_keys(name).lease, wake_key(name), value, value, value, WAKE_MS))
        deadline = self.clock() + self.release_timeout
        step = Broadcast([call] * self.nodes, deadline, self.quorum, RELEASE_GRACE)
        yield step
        self._raise_bugs(step.result)
        released = sum(answered(r) and parse_flag(r, "RELEASE") for r in step.result)
        unknown = sum(not answered(r) for r in step.result)
        if released < self.quorum <= released + unknown:
            raise self._errors(name, step.result, "release")
        return released >= self.quorum

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


# -- the issuers and fences --------------------------------------------------------------------

SyncClients = Sequence[redis.Redis]
AsyncClients = Sequence[redis.asyncio.Redis]
_CLUSTERS = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)


#: The fewest masters Redlock takes: with two, a majority is both, so it survives no
#: failure that one node alone would not; with one, it is a single server.
MIN_NODES = 3


def _address(client: Any) -> tuple[Any, ...] | None:
    """Where a client connects (host, port, db, or unix path, db), when it can be told."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return None
    where = kwargs.get("path") or (kwargs.get("host", "localhost"), kwargs.get("port", 6379))
    return (where, kwargs.get("db", 0))


def _socket_timeout(client: Any) -> object:
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    return kwargs.get("socket_timeout") if isinstance(kwargs, dict) else None


def check_clients(clients: object, kind: type, wanted: str, other: str) -> tuple[Any, ...]:
    """The clients as a tuple, or a ``TypeError``/``ValueError`` before any I/O: a
    sequence (not a str) of at least ``MIN_NODES`` clients of ``kind``, each a different
    object and, where it can be told, a different server (two clients of one server
    would fake a majority)."""
    if isinstance(clients, (str, bytes)) or not isinstance(clients, Sequence):
        raise TypeError(
            f"clients must be a sequence of {wanted} clients (one per Redis master), "
            f"not {type(clients).__name__}"
        )
    found = tuple(clients)
    seen: dict[tuple[Any, ...], int] = {}
    for index, client in enumerate(found):
        if isinstance(client, _CLUSTERS):
            raise TypeError(
                f"clients[{index}] is a Redis Cluster client: Redlock needs independent "
                f"masters, a {wanted} client for each (for a cluster use RedisFence)"
            )
        if not isinstance(client, kind):
            hint = ""
            if isinstance(client, (redis.Redis, redis.asyncio.Redis)):
                hint = f" (that kind of client goes to {other})"
            kind_of = type(client)
            raise TypeError(
                f"clients[{index}] must be a {wanted} client, not "
                f"{kind_of.__module__}.{kind_of.__qualname__}{hint}"
            )
        if any(client is earlier for earlier in found[:index]):
            raise ValueError(f"clients[{index}] is given twice: each node must be counted once")
        address = _address(client)
        if address is not None:
            if address in seen:
                raise ValueError(
                    f"clients[{seen[address]}] and clients[{index}] connect to the same "
                    f"server {address!r}: each node must be an independent master"
                )
            seen[address] = index
    if len(found) < MIN_NODES:
        raise ValueError(
            f"Redlock needs at least {MIN_NODES} independent Redis masters, got "
            f"{len(found)} client(s): with fewer, one node down stops it (for one server "
            "use RedisFence)"
        )
    return found


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


#: The most ``BLPOP``s a blocking issuer's waiters run at once (each on a thread of its
#: own; more waiters queue, and wait out their time if no thread frees up).
WAIT_THREADS = 32


def blpop_seconds(seconds: float, socket_timeout: object) -> float | None:
    """How long a waiter's ``BLPOP`` may block: ``seconds``, but less than the client's
    ``socket_timeout`` (a read that outlasts it fails), never below 10 ms (Redis takes
    a timeout that rounds to 0 ms as "for ever"). ``None``: too short to block at all."""
    block = seconds
    if isinstance(socket_timeout, (int, float)) and socket_timeout > 0:
        block = min(block, socket_timeout * 0.8)
    return block if block >= 0.01 else None


#: How much longer than the ``BLPOP``'s own timeout a waiter waits for its reply, so that
#: a ``BLPOP`` that times out on the server is not also cut off by the client (which, in
#: asyncio, would close its connection); a node that hangs costs the wait this much more.
WAIT_GRACE = 0.05

#: A woken waiter starts its attempt after a random part of this (seconds): waiters
#: woken together (several nodes' wake-ups, or the give-backs of a split vote, which
#: wake the others too) do not all ask again at the same instant.
WAKE_JITTER = 0.005


def wake_jitter(left: float) -> float:
    """How long a woken waiter waits before its attempt (within the ``left`` of its wait)."""
    return max(0.0, min(left, random.random() * WAKE_JITTER))


def check_release_timeout(seconds: object) -> float:
    return check_ttl(seconds, "release_timeout")


class RedlockIssuer:
    """Leases and tokens on N independent Redis masters (``redis.Redis`` clients), by
    Redlock with a quorum token (see the module docstring and docs/redlock.md).

    ``release_timeout`` (seconds, default 5): how long a release waits for a majority of
    the nodes (then ``RELEASE_GRACE`` for the others).
    Give every client a ``socket_timeout``: a node that hangs is left behind at each
    step's deadline, but its threads stay busy until the socket times out.
    """

    def __init__(
        self, clients: SyncClients, *, release_timeout: float = DEFAULT_RELEASE_TIMEOUT
    ) -> None:
        found = check_clients(clients, redis.Redis, "redis.Redis", "fencing.redis.aio.RedlockFence")
        self.clients: tuple[redis.Redis, ...] = found
        self.flows = RedlockFlows(len(found), check_release_timeout(release_timeout))
        self.nodes = ThreadNodes(found)
        # the waiters' BLPOPs (threads start on demand): apart from the nodes' threads
        self._waits = self._new_waits()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.clients)} nodes)"

    @staticmethod
    def _new_waits() -> concurrent.futures.ThreadPoolExecutor:
        return concurrent.futures.ThreadPoolExecutor(
            WAIT_THREADS, thread_name_prefix="fencing-redlock-wait"
        )

    def close(self) -> None:
        """Stop the issuer's threads once their calls are done (the clients stay open:
        they are the caller's). Closing twice is fine; used again, the issuer starts new
        threads."""
        self.nodes.close()
        waits, self._waits = self._waits, self._new_waits()
        waits.shutdown(wait=False)

    _distinct = False

    def _check_distinct(self) -> None:
        """Once, before the first acquire: no two clients reach one server (``run_id``),
        asked of every node at once; a node that does not answer within
        ``DISTINCT_WAIT`` (down, frozen) is not compared."""

        def run_id(client: redis.Redis) -> object:
            try:
                return client.info("server").get("run_id")
            except RedisError:
                return None

        futures = [self.nodes.submit(i, run_id, client) for i, client in enumerate(self.clients)]
        concurrent.futures.wait(futures, DISTINCT_WAIT)
        run_ids = [future.result() if future.done() else None for future in futures]
        same_servers(run_ids)
        self._distinct = True

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        if not self._distinct:
            self._check_distinct()
        return run_sync(self.flows.acquire(name, holder, ttl_ms), self.nodes)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return run_sync(self.flows.renew(name, token, holder, ttl_ms), self.nodes)

    def release(self, name: str, token: int, holder: str) -> bool:
        return run_sync(self.flows.release(name, token, holder), self.nodes)

    def await_release(self, name: str, seconds: float) -> None:
        """``WakesOnRelease``: block up to ``seconds`` on one node's wake list (``BLPOP``),
        a node taken at random at each wait; return early once a release (or a give-back)
        pushed to it. The ``BLPOP`` runs on a thread of its own (``WAIT_THREADS`` at most),
        so a node that hangs delays no node's calls and no waiter past ``seconds`` (and
        ``WAIT_GRACE``); a node that fails makes the waiter sleep out the ``seconds``
        (see docs/redlock.md)."""
        if seconds <= 0:
            return
        start = time.monotonic()
        node = random.randrange(len(self.clients))
        client = self.clients[node]
        block = blpop_seconds(seconds, _socket_timeout(client))
        try:
            if block is not None:
                future = self._waits.submit(client.blpop, [wake_key(name)], block)
                if future.result(timeout=seconds + WAIT_GRACE) is not None:  # woken
                    time.sleep(wake_jitter(seconds - (time.monotonic() - start)))
                return
        except concurrent.futures.TimeoutError:
            return  # waited the whole time (the node hangs)
        except RedisError:
            pass
        time.sleep(max(0.0, seconds - (time.monotonic() - start)))

    def status(self, name: str) -> FenceStatus:
        """``fencing status`` (``Inspects``): the lease a majority holds, the last token."""
        return run_sync(self.flows.status(name), self.nodes)

    def force_release(self, name: str) -> FenceStatus:
        """``fencing release --force`` (``ForceReleases``): see ``RedlockFlows``."""
        return run_sync(self.flows.force_release(name), self.nodes)

    def names(self, prefix: str = "") -> Iterator[str]:
        """The fences with a lease or a counter on any node that answers, by ``SCAN``
        (never ``KEYS``), each once; ``FenceUnavailable`` when fewer than a majority
        of the nodes could be scanned."""
        seen: set[str] = set()
        scanned, failures = 0, []
        for client in self.clients:
            try:
                found = [name_of(key) for key in client.scan_iter(match=names_pattern(prefix))]
            except RedisError as exc:
                failures.append(exc)
                continue
            scanned += 1
            for name in found:
                if name is not None and name.startswith(prefix) and name not in seen:
                    seen.add(name)
                    yield name
        if scanned < self.flows.quorum:
            raise self.flows._errors(f"{prefix}*", list(failures), "scan")


class AsyncRedlockIssuer:
    """``RedlockIssuer`` on ``redis.asyncio.Redis`` clients: the same flows, keys and
    scripts (sync and asyncio fences of one name exclude each other)."""

    def __init__(
        self, clients: AsyncClients, *, release_timeout: float = DEFAULT_RELEASE_TIMEOUT
    ) -> None:
        found = check_clients(
            clients, redis.asyncio.Redis, "redis.asyncio.Redis", "fencing.redis.RedlockFence"
        )
        self.clients: tuple[redis.asyncio.Redis, ...] = found
        self.flows = RedlockFlows(len(found), check_release_timeout(release_timeout))
        self.nodes = AsyncNodes(found)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.clients)} nodes)"

    _distinct = False

    async def _check_distinct(self) -> None:
        """See ``RedlockIssuer._check_distinct``."""

        async def run_id(client: redis.asyncio.Redis) -> object:
            try:
                return (await client.info("server")).get("run_id")
            except RedisError:
                return None

        tasks = [asyncio.ensure_future(run_id(client)) for client in self.clients]
        await asyncio.wait(tasks, timeout=DISTINCT_WAIT)
        for task in tasks:
            if not task.done():
                task.cancel()
        run_ids = [
            task.result() if task.done() and not task.cancelled() else None for task in tasks
        ]
        same_servers(run_ids)
        self._distinct = True

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        if not self._distinct:
            await self._check_distinct()
        return await run_async(self.flows.acquire(name, holder, ttl_ms), self.nodes)

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await run_async(self.flows.renew(name, token, holder, ttl_ms), self.nodes)

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await run_async(self.flows.release(name, token, holder), self.nodes)

    async def await_release(self, name: str, seconds: float) -> None:
        """See ``RedlockIssuer.await_release``: ``BLPOP`` on one node taken at random, as
        a task cancelled at ``seconds``."""
        if seconds <= 0:
            return
        start = time.monotonic()
        client = self.clients[random.randrange(len(self.clients))]
        block = blpop_seconds(seconds, _socket_timeout(client))
        try:
            if block is not None:
                wake = client.blpop([wake_key(name)], block)
                if await asyncio.wait_for(wake, seconds + WAIT_GRACE):
                    await asyncio.sleep(wake_jitter(seconds - (time.monotonic() - start)))
                return
        except asyncio.TimeoutError:
            return
        except RedisError:
            pass
        await asyncio.sleep(max(0.0, seconds - (time.monotonic() - start)))

    async def status(self, name: str) -> FenceStatus:
        """``AsyncInspects``: see ``RedlockIssuer.status`` (the same flow)."""
        return await run_async(self.flows.status(name), self.nodes)

    async def aclose(self) -> None:
        """Close every node's client's connections (each reconnects if used again): for
        the clients a backend made for one asyncio fence, which its ``aclose`` calls."""
        await asyncio.gather(*(client.aclose() for client in self.clients))


class RedlockFence(Fence):
    """A fence on N independent Redis masters: Redlock's lease, and a token that a
    majority holds before ``acquire`` returns (docs/redlock.md).

    ``RedlockFence([redis.Redis(host=h, socket_timeout=1) for h in hosts], "invoice:42",
    ttl=10)``. Pass ``issuer=`` to share one issuer (and its threads) among fences.
    ``close()`` stops the threads of the issuer the fence made, if it made one.
    """

    def __init__(
        self,
        clients: SyncClients,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: RedlockIssuer | None = None,
        release_timeout: float = DEFAULT_RELEASE_TIMEOUT,
        reentrant: bool = False,
    ) -> None:
        #: The issuer this fence made (and ``close`` closes), if none was passed in.
        self._made: RedlockIssuer | None = None
        if issuer is None:
            issuer = self._made = RedlockIssuer(clients, release_timeout=release_timeout)
        super().__init__(issuer, name, ttl, reentrant=reentrant)

    def close(self) -> None:
        """Stop the threads of the issuer this fence made (the clients are the caller's,
        and an issuer passed in is its owner's to close). Closing twice is fine; used
        again, the fence starts new threads."""
        if self._made is not None:
            self._made.close()


class AsyncRedlockFence(AsyncFence):
    """The asyncio ``RedlockFence`` (``fencing.redis.aio.RedlockFence``)."""

    def __init__(
        self,
        clients: AsyncClients,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: AsyncRedlockIssuer | None = None,
        release_timeout: float = DEFAULT_RELEASE_TIMEOUT,
        reentrant: bool = False,
    ) -> None:
        if issuer is None:
            issuer = AsyncRedlockIssuer(clients, release_timeout=release_timeout)
        super().__init__(issuer, name, ttl, reentrant=reentrant)
