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
from fencing.zookeeper._flows import future_of
from fencing.zookeeper.aio import ZooKeeperFence as AsyncZooKeeperFence
from handoff_rig import (
    HOLD_NOTE,
    EngineClients,
    Holder,
    Kinds,
    acquire_rounds,
    handoff_rounds,
)
from harness import Context, Table

TTL = 10.0  # seconds: hold()'s period only; ZooKeeper leases live with the session
KINDS = Kinds(
    floor="zookeeper floor: create + delete ephemeral (kazoo, bare)",
    aa="A/A: zookeeper floor, 2nd copy",
    afloor="zookeeper floor, asyncio (kazoo async, awaited)",
    fence="fencing.zookeeper.ZooKeeperFence",
    afence="fencing.zookeeper.aio.ZooKeeperFence",
    peer="kazoo Lock",
)


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


class Clients(EngineClients):
    """One process's kazoo client (on the leader) and an event loop for the asyncio rows."""

    KINDS = KINDS

    def __init__(self, hosts: str) -> None:
        super().__init__(hosts)
        self.client = KazooClient(hosts=hosts, timeout=30)
        self.client.start(timeout=30)

    def floor(self, name: str) -> BareFloor:
        return BareFloor(self.client, _lease_path(name))

    def afloor(self, name: str) -> AsyncBareFloor:
        return AsyncBareFloor(self.client, _lease_path(name))

    def fence(self, name: str) -> ZooKeeperFence:
        return ZooKeeperFence(self.client, name, TTL)

    def afence(self, name: str) -> AsyncZooKeeperFence:
        return AsyncZooKeeperFence(self.client, name, TTL)

    def peer(self, name: str) -> Holder:
        lock = self.client.Lock(f"/bench-locks/{name}")
        return lock.acquire, lock.release

    def close(self) -> None:
        self.loop.close()
        self.client.stop()
        self.client.close()


def _lease_path(name: str) -> str:
    return f"/bench/{name}/lease"


def run(ctx: Context) -> list[Table]:
    # the ensemble inherits the run's CPU pinning
    with ZooKeeperEnsemble() as ensemble, Clients(ensemble.leader().hosts) as clients:
        return [_acquire(ctx, clients), _handoff(ctx, clients)]


def _acquire(ctx: Context, clients: Clients) -> Table:
    return Table(
        "zookeeper-acquire",
        "ZooKeeper: uncontended acquire + release (3 servers, loopback, on the leader)",
        acquire_rounds(ctx, clients, lambda kind: f"acquire-{KINDS.acquire_order.index(kind)}"),
        floor=KINDS.floor,
        floor_of={KINDS.afence: KINDS.afloor},
        notes=[
            "floor: create + delete of an ephemeral znode, bare; the asyncio fence is compared"
            " with the same calls awaited",
            "ZooKeeperFence: multi[setData, create] + multi[check, delete]; kazoo Lock: create"
            " (sequential), getChildren, delete",
        ],
    )


def _handoff(ctx: Context, clients: Clients) -> Table:
    return Table(
        "zookeeper-handoff",
        "ZooKeeper: hand-off latency (release -> waiter in another process holds)",
        handoff_rounds(ctx, clients, lambda kind: f"handoff-{KINDS.handoff_order.index(kind)}"),
        floor=KINDS.floor,
        notes=[
            "floor, bare: the waiter's failed create, an exists watch, create again on the"
            " deletion event; the release: one delete",
            HOLD_NOTE,
        ],
    )
