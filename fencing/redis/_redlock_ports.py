"""The ports of Redlock's flows: ``RedlockPort`` (blocking: a small pool of threads per
node) and ``AsyncRedlockPort`` (asyncio: a task per call) carry out a ``Broadcast`` (one
script on every node at once, waited for up to its deadline and its grace), ``RunIds``,
``AwaitWake`` (a waiter's ``BLPOP`` on one node) and ``Sleep``: the only I/O of
``RedlockFlows``. What they share, the bookkeeping of a broadcast (which node each call
went to, which replies are in, when the grace starts), is ``BaseRedlockPort`` and
``Gathering``; each adds only how it sends a call and waits for replies.

Imports the flow drivers, the Redis flows' ``Eval`` step, the Redlock flows' steps and
replies, and redis-py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED
from contextlib import suppress
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import RedisError

from .._base.flow import Flow, run_async, run_sync
from ._flows import Eval
from ._redlock_flows import NOT_SENT, Broadcast, NodeCall, Pending, Reply, answered

#: The most ``BLPOP``s a blocking port's waiters run at once (each on a thread of its
#: own; more waiters queue, and wait out their time if no thread frees up).
WAIT_THREADS = 32

#: How much longer than the ``BLPOP``'s own timeout a waiter waits for its reply, so that
#: a ``BLPOP`` that times out on the server is not also cut off by the client (which, in
#: asyncio, would close its connection); a node that hangs costs the wait this much more.
WAIT_GRACE = 0.05


def blpop_seconds(seconds: float, socket_timeout: object) -> float | None:
    """How long a waiter's ``BLPOP`` may block: ``seconds``, but less than the client's
    ``socket_timeout`` (a read that outlasts it fails), never below 10 ms (Redis takes
    a timeout that rounds to 0 ms as "for ever"). ``None``: too short to block at all."""
    block = seconds
    if isinstance(socket_timeout, (int, float)) and socket_timeout > 0:
        block = min(block, socket_timeout * 0.8)
    return block if block >= 0.01 else None


def _socket_timeout(client: Any) -> object:
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    return kwargs.get("socket_timeout") if isinstance(kwargs, dict) else None


def _raw(reply: Any) -> Any:
    return reply


def _sending(calls: list[NodeCall], deadline: float | None) -> Flow[Eval[Any], Reply]:
    """The calls on one node in order, in the background (a thread, a task): the last
    one's reply, or the error it raised (kept as the reply: the flow that broadcast it
    decides); ``NOT_SENT`` when it would start after ``deadline``."""
    if deadline is not None and time.monotonic() > deadline:
        return NOT_SENT
    reply: Reply = None
    for script, args in calls:
        step = Eval((script, args, _raw))
        try:
            yield step
            reply = step.result
        except Exception as exc:
            reply = exc
    return reply


class Gathering:
    """The replies of one ``Broadcast`` as they come in: ``waiting`` maps each call in
    flight (a future or a task) to its node, ``pending`` those not in yet; once
    ``quorum`` nodes answered, the stragglers get ``grace`` more, once."""

    __slots__ = ("deadline", "done", "grace", "pending", "quorum", "result", "wait", "waiting")

    def __init__(self, step: Broadcast, result: list[Reply], waiting: dict[Any, int]) -> None:
        self.result = result
        self.waiting = waiting
        self.pending = set(waiting)
        self.wait = step.wait
        self.deadline = step.deadline
        self.quorum = step.quorum
        self.grace = step.grace
        self.done = 0

    def waits(self) -> Iterator[tuple[set[Any], float]]:
        """For each wait of the port's: the calls still out and the seconds left. Then
        the replies that came in by the end, though the waiter was too slow to see them.
        Nothing for a step nobody waits for."""
        if not self.wait:
            return
        while self.pending and (left := self.deadline - time.monotonic()) > 0:
            yield self.pending, left
        self._keep({waiting for waiting in self.pending if waiting.done()})

    def took(self, finished: set[Any], pending: set[Any]) -> None:
        """A wait's outcome: keep the replies of ``finished``; once a majority is in, the
        stragglers get ``grace`` more."""
        self.pending = pending
        self._keep(finished)
        if self.done >= self.quorum:
            self.deadline = min(self.deadline, time.monotonic() + self.grace)
            self.quorum = len(self.waiting) + 1  # the grace starts once

    def _keep(self, finished: set[Any]) -> None:
        for waiting in finished:
            reply = self.result[self.waiting[waiting]] = waiting.result()
            self.done += answered(reply)


class BaseRedlockPort:
    """What both ports share: the clients, and the sending of a ``Broadcast``."""

    def __init__(self, clients: Sequence[Any]) -> None:
        self.clients = tuple(clients)

    def _send_on(self, node: int, calls: list[NodeCall], deadline: float | None) -> Any:
        """``calls`` on ``node`` in the background: a future or a task of the last one's
        ``Reply`` (``NOT_SENT`` if it would start after ``deadline``)."""
        raise NotImplementedError

    def _chain_on(self, node: int) -> Callable[[Any, list[NodeCall]], None]:
        """What sends calls to ``node`` once a late reply is in (``Pending.then``)."""

        def chain(waiting: Any, calls: list[NodeCall]) -> None:
            def send(_: object) -> None:
                with suppress(RuntimeError):  # the interpreter ends: the lease expires
                    self._send_on(node, calls, None)

            waiting.add_done_callback(send)

        return chain

    def _sent(self, step: Broadcast) -> Gathering:
        """Send ``step``'s calls, each after its node's late reply if it has one; its
        ``result`` holds them as ``Pending`` (as they are, if the wait is interrupted)."""
        result: list[Reply] = [None] * len(self.clients)
        waiting: dict[Any, int] = {}
        for node, call in enumerate(step.calls):
            if call is None:
                continue
            earlier = step.after[node] if step.after is not None else None
            if earlier is not None:
                earlier.then([call])
                continue
            sent = self._send_on(node, [call], step.deadline if step.fresh else None)
            waiting[sent] = node
            result[node] = Pending(sent, self._chain_on(node))
        step.result = result
        return Gathering(step, result, waiting)


class RedlockPort(BaseRedlockPort):
    """The blocking nodes: each client with a small thread pool of its own, so a node
    that hangs ties up only its own threads (threads start on demand and end with the
    pool); the waiters' ``BLPOP``s run on threads apart (``WAIT_THREADS`` at most)."""

    THREADS_PER_NODE = 4

    def __init__(self, clients: Sequence[redis.Redis]) -> None:
        super().__init__(clients)
        self._pools = self._new_pools()
        self._waits = self._new_waits()

    def _new_pools(self) -> list[concurrent.futures.ThreadPoolExecutor]:
        return [
            concurrent.futures.ThreadPoolExecutor(
                self.THREADS_PER_NODE, thread_name_prefix=f"fencing-redlock-{i}"
            )
            for i in range(len(self.clients))
        ]

    @staticmethod
    def _new_waits() -> concurrent.futures.ThreadPoolExecutor:
        return concurrent.futures.ThreadPoolExecutor(
            WAIT_THREADS, thread_name_prefix="fencing-redlock-wait"
        )

    def close(self) -> None:
        """End the threads once their calls are done; new ones start if used again."""
        pools, self._pools = self._pools, self._new_pools()
        waits, self._waits = self._waits, self._new_waits()
        for pool in [*pools, waits]:
            pool.shutdown(wait=False)

    def run_ids(self, seconds: float) -> list[object]:
        """``RunIds``: every node's ``run_id``, asked of all at once on their threads."""

        def run_id(client: redis.Redis) -> object:
            try:
                return client.info("server").get("run_id")
            except RedisError:
                return None

        futures = [self._pools[i].submit(run_id, client) for i, client in enumerate(self.clients)]
        concurrent.futures.wait(futures, seconds)
        return [future.result() if future.done() else None for future in futures]

    def _send_on(
        self, node: int, calls: list[NodeCall], deadline: float | None
    ) -> concurrent.futures.Future[Reply]:
        flow = _sending(calls, deadline)
        return self._pools[node].submit(run_sync, flow, self.clients[node])

    def broadcast(self, step: Broadcast) -> None:
        gathering = self._sent(step)
        for pending, left in gathering.waits():
            gathering.took(*concurrent.futures.wait(pending, left, FIRST_COMPLETED))

    def await_wake(self, node: int, key: bytes, seconds: float) -> bool | None:
        """``AwaitWake``: ``BLPOP`` on a waiters' thread, its reply waited for up to
        ``seconds`` (and ``WAIT_GRACE``)."""
        client = self.clients[node]
        block = blpop_seconds(seconds, _socket_timeout(client))
        if block is None:
            return None
        try:
            return (
                self._waits.submit(client.blpop, [key], block).result(seconds + WAIT_GRACE)
                is not None
            )
        except concurrent.futures.TimeoutError:
            return False  # waited the whole time (the node hangs)
        except RedisError:
            return None

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class AsyncRedlockPort(BaseRedlockPort):
    """The asyncio nodes: one task per call; a late task is kept until it ends."""

    def __init__(self, clients: Sequence[redis.asyncio.Redis]) -> None:
        super().__init__(clients)
        self._background: set[asyncio.Future[Reply]] = set()

    async def run_ids(self, seconds: float) -> list[object]:
        """``RunIds``: every node's ``run_id``, a task each; one still out is cancelled."""

        async def run_id(client: redis.asyncio.Redis) -> object:
            try:
                return (await client.info("server")).get("run_id")
            except RedisError:
                return None

        tasks = [asyncio.ensure_future(run_id(client)) for client in self.clients]
        await asyncio.wait(tasks, timeout=seconds)
        for task in tasks:
            if not task.done():
                task.cancel()
        return [task.result() if task.done() and not task.cancelled() else None for task in tasks]

    def _send_on(
        self, node: int, calls: list[NodeCall], deadline: float | None
    ) -> asyncio.Future[Reply]:
        task = asyncio.ensure_future(run_async(_sending(calls, deadline), self.clients[node]))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def broadcast(self, step: Broadcast) -> None:
        gathering = self._sent(step)
        for pending, left in gathering.waits():
            gathering.took(*await asyncio.wait(pending, timeout=left, return_when=FIRST_COMPLETED))

    async def await_wake(self, node: int, key: bytes, seconds: float) -> bool | None:
        """``AwaitWake``: see ``RedlockPort.await_wake``; the ``BLPOP`` is a call
        cancelled at ``seconds`` (and ``WAIT_GRACE``)."""
        client = self.clients[node]
        block = blpop_seconds(seconds, _socket_timeout(client))
        if block is None:
            return None
        try:
            return (
                await asyncio.wait_for(client.blpop([key], block), seconds + WAIT_GRACE) is not None
            )
        except asyncio.TimeoutError:
            return False
        except RedisError:
            return None

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
