"""The ports of Redlock's flows: ``RedlockPort`` (blocking: a small pool of threads per
node) and ``AsyncRedlockPort`` (asyncio: a task per call) carry out a ``Broadcast`` (one
script on every node at once, waited for up to its deadline and its grace) and
``RunIds``; the only I/O of ``RedlockFlows``.

Imports the Redlock flows' steps and replies, the clients' script runners and redis-py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import suppress
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import RedisError

from ._clients import arun_script, run_script
from ._redlock_flows import NOT_SENT, Broadcast, NodeCall, Pending, Reply, answered


class RedlockPort:
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

    def run_ids(self, seconds: float) -> list[object]:
        """``RunIds``: every node's ``run_id``, asked of all at once on their threads."""

        def run_id(client: redis.Redis) -> object:
            try:
                return client.info("server").get("run_id")
            except RedisError:
                return None

        futures = [self.submit(i, run_id, client) for i, client in enumerate(self.clients)]
        concurrent.futures.wait(futures, seconds)
        return [future.result() if future.done() else None for future in futures]

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


class AsyncRedlockPort:
    """The asyncio nodes: one task per call; a late task is kept until it ends."""

    def __init__(self, clients: Sequence[redis.asyncio.Redis]) -> None:
        self.clients = tuple(clients)
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
