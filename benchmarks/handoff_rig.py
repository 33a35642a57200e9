"""What the families of the consensus engines share (etcd, ZooKeeper): their rows
(``Kinds``: a bare floor and its A/A copy, the floor awaited, the blocking and asyncio
fences, the engine's own lock) and their holders come from one ``Clients`` object (an
``EngineClients``), measured uncontended (``acquire_rounds``) and at hand-off
(``handoff_rounds``: this process holds and releases, a waiter in another, spawned,
process blocks in its acquire and notes when it holds; both clocks CLOCK_MONOTONIC).

A family's ``Clients`` is built from one string argument (the waiter process builds its
own from the same one, so the class must be importable there).

Imports the harness only.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, ClassVar, TypeVar

from harness import Context, Stats, Variant, now_ns, run_rounds, timed

#: Time for the waiter to reach its blocking wait before the release, plus U(0, JITTER).
MIN_HOLD = 0.005
JITTER = 0.002
#: The hand-off tables' note on that hold.
HOLD_NOTE = (
    f"hold {MIN_HOLD * 1e3:.0f} ms + U(0, {JITTER * 1e3:.0f} ms) after the waiter says it is"
    " about to wait"
)
Holder = tuple[Callable[[], Any], Callable[[], Any]]
C = TypeVar("C", bound="EngineClients")


@dataclass(frozen=True)
class Kinds:
    """The rows of a consensus engine's family, by their names in its tables."""

    floor: str  # the engine's calls of one lease, bare, blocking
    aa: str  # a second copy of the floor: the noise between two equal rows
    afloor: str  # the floor's calls awaited (uncontended only)
    fence: str  # the blocking fence
    afence: str  # the asyncio fence
    peer: str  # the engine's own lock

    @property
    def acquire_order(self) -> list[str]:
        """The rows of the uncontended table: every kind."""
        return [self.floor, self.aa, self.fence, self.afloor, self.afence, self.peer]

    @property
    def handoff_order(self) -> list[str]:
        """The rows of the hand-off table: all but the A/A copy and the asyncio floor."""
        return [self.floor, self.fence, self.afence, self.peer]


class EngineClients(ABC):
    """A family's ``Clients``: ``holder`` of every kind of ``KINDS``, from what the family
    makes for a fence name; asyncio calls run on ``loop``. ``argument`` (an endpoint) is
    what the waiter process builds its own from; ``close`` at the end of a ``with``."""

    KINDS: ClassVar[Kinds]

    def __init__(self, argument: str) -> None:
        self.argument = argument
        self.loop = asyncio.new_event_loop()

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def holder(self, kind: str, name: str) -> Holder:
        """(acquire, release) of a fresh holder of ``kind`` on fence ``name``, blocking."""
        run = self.loop.run_until_complete
        if kind in (self.KINDS.floor, self.KINDS.aa):
            floor = self.floor(name)
            return floor.acquire, floor.release
        if kind == self.KINDS.afloor:
            afloor = self.afloor(name)
            return lambda: run(afloor.acquire()), lambda: run(afloor.release())
        if kind == self.KINDS.fence:
            return fence_holder(self.fence(name), lambda x: x)
        if kind == self.KINDS.afence:
            return fence_holder(self.afence(name), run)
        return self.peer(name)

    @abstractmethod
    def floor(self, name: str) -> Any:
        """The bare floor on ``name``: blocking ``acquire()`` and ``release()``."""

    @abstractmethod
    def afloor(self, name: str) -> Any:
        """The bare floor awaited: ``acquire()`` and ``release()`` coroutines."""

    @abstractmethod
    def fence(self, name: str) -> Any:
        """A blocking fence of ``name``."""

    @abstractmethod
    def afence(self, name: str) -> Any:
        """An asyncio fence of ``name`` (its calls run on ``loop``)."""

    @abstractmethod
    def peer(self, name: str) -> Holder:
        """(acquire, release) of the engine's own lock on ``name``, blocking."""

    @abstractmethod
    def close(self) -> None:
        """Close the clients and ``loop``."""


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
    ctx: Context, clients: EngineClients, name_of: Callable[[str], str]
) -> list[Stats]:
    """Uncontended acquire + release of every kind, each on its own name, interleaved; the
    rows of the table in ``acquire_order``."""
    order = clients.KINDS.acquire_order
    variants = []
    for kind in order:
        acquire, release = clients.holder(kind, name_of(kind))

        def op(acquire: Callable[[], Any] = acquire, release: Callable[[], Any] = release) -> None:
            acquire()
            release()

        variants.append(Variant(kind, timed(op)))
    stats = run_rounds(variants, rounds=ctx.scale(5, 20), per_round=ctx.scale(10, 25), warmup=5)
    return [stats[kind] for kind in order]


def handoff_rounds(
    ctx: Context, clients: EngineClients, name_of: Callable[[str], str]
) -> list[Stats]:
    """Measure the hand-off of every kind of ``handoff_order``, interleaved; the rows of the
    table in that order. The waiter builds its own clients of the same class and argument."""
    order = clients.KINDS.handoff_order
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    args = (theirs, type(clients), clients.argument)
    waiter = spawn.Process(target=waiter_main, args=args, daemon=True)
    waiter.start()
    variants = [Variant(kind, _batch(clients, kind, name_of(kind), ours)) for kind in order]
    try:
        stats = run_rounds(variants, rounds=ctx.scale(3, 10), per_round=ctx.scale(5, 10), warmup=2)
    finally:
        ours.send(("stop",))
        waiter.join(10)
    return [stats[kind] for kind in order]


def _batch(
    clients: EngineClients, kind: str, name: str, waiter: Connection
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


def waiter_main(
    conn: Connection, make_clients: Callable[[str], EngineClients], argument: str
) -> None:
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
