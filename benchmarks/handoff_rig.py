"""What the families of the consensus engines share (etcd, ZooKeeper): their holders come
from one ``Clients`` object, measured uncontended (``acquire_rounds``) and at hand-off
(``handoff_rounds``: this process holds and releases, a waiter in another, spawned,
process blocks in its acquire and notes when it holds; both clocks CLOCK_MONOTONIC).

A family passes its ``Clients`` class (built in the waiter process from one string
argument, so it must be importable there) and the kinds to measure.

Imports the harness only.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, Protocol

from harness import Context, Stats, Variant, now_ns, run_rounds, timed

#: Time for the waiter to reach its blocking wait before the release, plus U(0, JITTER).
MIN_HOLD = 0.005
JITTER = 0.002
Holder = tuple[Callable[[], Any], Callable[[], Any]]


class Clients(Protocol):
    """A family's clients: ``holder(kind, name)`` is an (acquire, release) pair."""

    def holder(self, kind: str, name: str) -> Holder: ...

    def close(self) -> None: ...


def fence_holder(fence: Any, run: Callable[[Any], Any]) -> Holder:
    """(acquire, release) of a fence whose calls ``run`` completes (blocking: the identity;
    asyncio: run the coroutine on the family's loop)."""
    tokens: list[int] = []

    def acquire() -> None:
        tokens.append(run(fence.acquire()))

    def release() -> None:
        run(fence.release(tokens.pop()))

    return acquire, release


def acquire_rounds(
    ctx: Context, clients: Clients, kinds: Sequence[str], name_of: Callable[[str], str]
) -> dict[str, Stats]:
    """Uncontended acquire + release of every kind, each on its own name, interleaved."""
    variants = []
    for kind in kinds:
        acquire, release = clients.holder(kind, name_of(kind))

        def op(acquire: Callable[[], Any] = acquire, release: Callable[[], Any] = release) -> None:
            acquire()
            release()

        variants.append(Variant(kind, timed(op)))
    return run_rounds(variants, rounds=ctx.scale(5, 20), per_round=ctx.scale(10, 25), warmup=5)


def handoff_rounds(
    ctx: Context,
    clients: Clients,
    make_clients: Callable[[str], Clients],
    argument: str,
    kinds: Sequence[str],
    name_of: Callable[[str], str],
) -> dict[str, Stats]:
    """Measure the hand-off of every kind, interleaved; the waiter builds its own clients
    with ``make_clients(argument)``."""
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    waiter = spawn.Process(target=waiter_main, args=(theirs, make_clients, argument), daemon=True)
    waiter.start()
    variants = [Variant(kind, _batch(clients, kind, name_of(kind), ours)) for kind in kinds]
    try:
        return run_rounds(variants, rounds=ctx.scale(3, 10), per_round=ctx.scale(5, 10), warmup=2)
    finally:
        ours.send(("stop",))
        waiter.join(10)


def _batch(
    clients: Clients, kind: str, name: str, waiter: Connection
) -> Callable[[int], list[int]]:
    acquire, release = clients.holder(kind, name)

    def batch(n: int) -> list[int]:
        out = []
        for _ in range(n):
            acquire()
            waiter.send(("go", kind, name))
            receive(waiter, kind)  # the waiter is about to block
            time.sleep(MIN_HOLD + random.uniform(0, JITTER))
            start = now_ns()
            release()
            out.append(receive(waiter, kind) - start)
        return out

    return batch


def receive(waiter: Connection, kind: str, timeout: float = 30.0) -> Any:
    """The waiter's next message; a clear error instead of a hang if it never comes."""
    if not waiter.poll(timeout):
        raise TimeoutError(f"{kind}: the waiter process did not answer within {timeout} s")
    return waiter.recv()


def waiter_main(conn: Connection, make_clients: Callable[[str], Clients], argument: str) -> None:
    """The waiter process: on ("go", kind, name) acquire, note the time, release, report."""
    clients = make_clients(argument)
    holders: dict[str, Holder] = {}
    while True:
        message = conn.recv()
        if message[0] == "stop":
            break
        _, kind, name = message
        if kind not in holders:
            holders[kind] = clients.holder(kind, name)
        acquire, release = holders[kind]
        conn.send("ready")
        acquire()
        held_at = now_ns()
        release()
        conn.send(held_at)
    clients.close()
