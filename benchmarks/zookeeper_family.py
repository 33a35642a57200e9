"""Family ``zookeeper``: the ZooKeeper issuer next to the bare kazoo calls it cannot do
without, and next to kazoo's own ``Lock``, on a 3-server loopback ensemble this family
starts (every client talks to the leader, so no row pays a forwarding hop the others do
not).

Two tables:

- acquire+release, uncontended. The floor is the least a lease takes in ZooKeeper:
  ``create`` of an ephemeral znode and its ``delete``, through the same kazoo client
  with nothing around them. ``ZooKeeperFence`` makes two requests too (a multi that sets
  the fence znode and creates the lease, a multi that checks and deletes); kazoo's
  ``Lock`` creates a sequential znode, lists the lock's children, and deletes. The
  asyncio fence is compared with the same bare calls awaited through the same bridge
  from kazoo's threads to the event loop.
- hand-off: this process releases, a waiter in another process holds (the protocol of
  the ``handoff`` family). The floor's waiter, bare: a failed ``create``, an ``exists``
  watch, and on the deletion event ``create`` again; the release is one ``delete``.

Imports kazoo, fencing.zookeeper, the harness and the throwaway ensemble.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from fencing.testing.servers import ZooKeeperEnsemble
from fencing.zookeeper import ZooKeeperFence
from fencing.zookeeper._requests import future_of
from fencing.zookeeper.aio import ZooKeeperFence as AsyncZooKeeperFence
from handoff_rig import MIN_HOLD, acquire_rounds, fence_holder, handoff_rounds
from harness import Context, Table

TTL = 10.0  # seconds: hold()'s period only; ZooKeeper leases live with the session
FLOOR = "zookeeper floor: create + delete ephemeral (kazoo, bare)"
AA = "A/A: zookeeper floor, 2nd copy"
AFLOOR = "zookeeper floor, asyncio (kazoo async, awaited)"
FENCE = "fencing.zookeeper.ZooKeeperFence"
AFENCE = "fencing.zookeeper.aio.ZooKeeperFence"
PEER = "kazoo Lock"
ACQUIRE_ORDER = [FLOOR, AA, FENCE, AFLOOR, AFENCE, PEER]
HANDOFF_ORDER = [FLOOR, FENCE, AFENCE, PEER]

Holder = tuple[Callable[[], Any], Callable[[], Any]]


class BareFloor:
    """An ephemeral znode created and deleted with nothing around it; a waiter watches."""

    def __init__(self, client: KazooClient, path: str) -> None:
        self.client = client
        self.path = path
        client.ensure_path(path.rpartition("/")[0])

    def acquire(self) -> None:
        while True:
            try:
                self.client.create(self.path, ephemeral=True)
                return
            except NodeExistsError:
                deleted = threading.Event()
                if self.client.exists(self.path, watch=_setter(deleted)) is not None:
                    deleted.wait()

    def release(self) -> None:
        self.client.delete(self.path)


def _setter(event: threading.Event) -> Callable[[Any], None]:
    return lambda _: event.set()


class AsyncBareFloor:
    """``BareFloor``'s two calls awaited (uncontended only)."""

    def __init__(self, client: KazooClient, path: str) -> None:
        self.client = client
        self.path = path
        client.ensure_path(path.rpartition("/")[0])

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        await future_of(self.client.create_async(self.path, ephemeral=True), loop)

    async def release(self) -> None:
        await future_of(self.client.delete_async(self.path), asyncio.get_running_loop())


class Clients:
    """One process's kazoo client (on the leader) and an event loop for the asyncio rows."""

    def __init__(self, hosts: str) -> None:
        self.client = KazooClient(hosts=hosts, timeout=30)
        self.client.start(timeout=30)
        self.loop = asyncio.new_event_loop()

    def holder(self, kind: str, name: str) -> Holder:
        """(acquire, release) of a fresh holder of ``kind`` on fence ``name``, blocking."""
        run = self.loop.run_until_complete
        path = f"/bench/{name}/lease"
        if kind in (FLOOR, AA):
            floor = BareFloor(self.client, path)
            return floor.acquire, floor.release
        if kind == AFLOOR:
            afloor = AsyncBareFloor(self.client, path)
            return lambda: run(afloor.acquire()), lambda: run(afloor.release())
        if kind == FENCE:
            return fence_holder(ZooKeeperFence(self.client, name, TTL), lambda x: x)
        if kind == AFENCE:
            return fence_holder(AsyncZooKeeperFence(self.client, name, TTL), run)
        lock = self.client.Lock(f"/bench-locks/{name}")
        return lock.acquire, lock.release

    def close(self) -> None:
        self.loop.close()
        self.client.stop()
        self.client.close()


def run(ctx: Context) -> list[Table]:
    with ZooKeeperEnsemble() as ensemble:  # inherits the run's CPU pinning
        hosts = ensemble.leader().hosts
        clients = Clients(hosts)
        try:
            return [_acquire(ctx, clients), _handoff(ctx, clients, hosts)]
        finally:
            clients.close()


def _acquire(ctx: Context, clients: Clients) -> Table:
    stats = acquire_rounds(
        ctx, clients, ACQUIRE_ORDER, lambda kind: f"acquire-{ACQUIRE_ORDER.index(kind)}"
    )
    return Table(
        "zookeeper-acquire",
        "ZooKeeper: uncontended acquire + release (3 servers, loopback, on the leader)",
        [stats[kind] for kind in ACQUIRE_ORDER],
        floor=FLOOR,
        floor_of={AFENCE: AFLOOR},
        notes=[
            "floor: create + delete of an ephemeral znode, bare; the asyncio fence is compared"
            " with the same calls awaited",
            "ZooKeeperFence: multi[setData, create] + multi[check, delete]; kazoo Lock: create"
            " (sequential), getChildren, delete",
        ],
    )


def _handoff(ctx: Context, clients: Clients, hosts: str) -> Table:
    stats = handoff_rounds(
        ctx,
        clients,
        Clients,
        hosts,
        HANDOFF_ORDER,
        lambda kind: f"handoff-{HANDOFF_ORDER.index(kind)}",
    )
    return Table(
        "zookeeper-handoff",
        "ZooKeeper: hand-off latency (release -> waiter in another process holds)",
        [stats[kind] for kind in HANDOFF_ORDER],
        floor=FLOOR,
        notes=[
            "floor, bare: the waiter's failed create, an exists watch, create again on the"
            " deletion event; the release: one delete",
            f"hold {MIN_HOLD * 1e3:.0f} ms + U(0, 2 ms) after the waiter says it is about to wait",
        ],
    )
