"""Family ``etcd``: the etcd issuer next to the same etcd calls made bare, and next to
aetcd's own ``Lock``, on a 3-member loopback cluster this family starts.

Two tables:

- acquire+release, uncontended. The floor is the least a fenced etcd lease takes, made
  through the same gRPC stubs with nothing around them: ``LeaseGrant``, the
  create-if-absent ``Txn``, the compare-and-delete ``Txn`` (the lease is left to
  expire), blocking and asyncio. aetcd's ``Lock`` (asyncio only) makes the same three
  calls. ``EtcdFence`` makes three too once it keeps a lease (see fencing.etcd._leases):
  ``Txn`` + ``LeaseKeepAlive`` to acquire, ``Txn`` to release.
- hand-off: this process releases, a waiter in another process holds (the same
  protocol as the ``handoff`` family). The floor's waiter, bare: a busy ``Txn``, a
  ``Watch`` of the key's deletion from the revision it saw (with one local read when
  the watch starts late, as ``EtcdFence`` does, else etcd replays up to 100 ms late),
  and on the event ``LeaseGrant`` + ``Txn``; the release is the compare-and-delete.

Imports grpcio, aetcd (its protobufs and its ``Lock``), fencing.etcd, the harness and
the throwaway cluster.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import aetcd
import grpc
import grpc.aio
from aetcd import rpc

from fencing.etcd import EtcdFence, EtcdIssuer
from fencing.etcd.aio import EtcdFence as AsyncEtcdFence
from fencing.etcd.aio import EtcdIssuer as AsyncEtcdIssuer
from fencing.testing.servers import EtcdCluster
from handoff_rig import MIN_HOLD, acquire_rounds, fence_holder, handoff_rounds
from harness import Context, Table

TTL = 10  # seconds: no lease expires during a measurement
FLOOR = "etcd floor: grant, txn, txn (grpc, bare)"
AA = "A/A: etcd floor, 2nd copy"
AFLOOR = "etcd floor, asyncio (grpc.aio, bare)"
FENCE = "fencing.etcd.EtcdFence"
AFENCE = "fencing.etcd.aio.EtcdFence"
PEER = "aetcd Lock (asyncio)"
ACQUIRE_ORDER = [FLOOR, AA, FENCE, AFLOOR, AFENCE, PEER]
HANDOFF_ORDER = [FLOOR, FENCE, AFENCE, PEER]
ASYNC = {AFLOOR, AFENCE, PEER}


# -- the bare floor --------------------------------------------------------------------------


class _Bare:
    """The etcd calls of one acquire+release, bare: the same messages as ``EtcdFence``."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.holder = os.urandom(8).hex().encode()
        self.token = 0

    def create(self, lease: int) -> rpc.TxnRequest:
        key = self.key
        return rpc.TxnRequest(
            compare=[rpc.Compare(result=rpc.Compare.EQUAL, target=rpc.Compare.CREATE, key=key,
                                 create_revision=0)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=self.holder,
                                                              lease=lease))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=key))],
        )  # fmt: skip

    def delete(self) -> rpc.TxnRequest:
        key, equal = self.key, rpc.Compare.EQUAL
        return rpc.TxnRequest(
            compare=[rpc.Compare(result=equal, target=rpc.Compare.CREATE, key=key,
                                 create_revision=self.token),
                     rpc.Compare(result=equal, target=rpc.Compare.VALUE, key=key,
                                 value=self.holder)],
            success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key,
                                                                               prev_kv=True))],
        )  # fmt: skip

    def watch(self, seen: int) -> rpc.WatchRequest:
        return rpc.WatchRequest(
            create_request=rpc.WatchCreateRequest(
                key=self.key, start_revision=seen + 1, filters=[rpc.WatchCreateRequest.NOPUT]
            )
        )


class BareFloor(_Bare):
    def __init__(self, channel: grpc.Channel, key: bytes) -> None:
        super().__init__(key)
        self.kv, self.leases = rpc.KVStub(channel), rpc.LeaseStub(channel)
        self.watches = rpc.WatchStub(channel)

    def acquire(self) -> None:
        while True:
            lease = self.leases.LeaseGrant(rpc.LeaseGrantRequest(TTL=TTL)).ID
            reply = self.kv.Txn(self.create(lease))
            if reply.succeeded:
                self.token = reply.header.revision
                return
            self._wait(reply.responses[0].response_range.kvs[0].mod_revision)

    def _wait(self, seen: int) -> None:
        call = self.watches.Watch(iter([self.watch(seen)]))
        try:
            for event in call:
                if event.events:
                    return
                if event.created and event.header.revision > seen:  # started late: look
                    peek = self.kv.Range(rpc.RangeRequest(key=self.key, serializable=True))
                    if not peek.kvs or peek.kvs[0].mod_revision > seen:
                        return
        finally:
            call.cancel()

    def release(self) -> None:
        self.kv.Txn(self.delete())


class AsyncBareFloor(_Bare):
    def __init__(self, channel: grpc.aio.Channel, key: bytes) -> None:
        super().__init__(key)
        self.kv, self.leases = rpc.KVStub(channel), rpc.LeaseStub(channel)

    async def acquire(self) -> None:
        lease = (await self.leases.LeaseGrant(rpc.LeaseGrantRequest(TTL=TTL))).ID
        reply = await self.kv.Txn(self.create(lease))
        assert reply.succeeded, "the asyncio floor is measured uncontended only"
        self.token = reply.header.revision

    async def release(self) -> None:
        await self.kv.Txn(self.delete())


# -- the holders under test --------------------------------------------------------------------


class Clients:
    """One process's clients of the cluster (blocking, asyncio on ``loop``, aetcd)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.loop = asyncio.new_event_loop()
        self.channel = grpc.insecure_channel(endpoint)
        self.achannel = self.loop.run_until_complete(self._open())
        self.issuer = EtcdIssuer(f"etcd://{endpoint}")
        self.aissuer = AsyncEtcdIssuer(f"etcd://{endpoint}")
        host, _, port = endpoint.rpartition(":")
        self.peer = aetcd.Client(host, int(port))

    async def _open(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(self.endpoint)

    def holder(self, kind: str, name: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
        """(acquire, release) of a fresh holder of ``kind`` on fence ``name``, blocking."""
        run = self.loop.run_until_complete
        key = f"fencing/{name}".encode()
        if kind in (FLOOR, AA):
            floor = BareFloor(self.channel, key)
            return floor.acquire, floor.release
        if kind == AFLOOR:
            afloor = AsyncBareFloor(self.achannel, key)
            return lambda: run(afloor.acquire()), lambda: run(afloor.release())
        if kind == FENCE:
            return fence_holder(EtcdFence(self.issuer, name, TTL), lambda x: x)
        if kind == AFENCE:
            return fence_holder(AsyncEtcdFence(self.aissuer, name, TTL), run)
        lock = self.peer.lock(key, ttl=TTL)
        return lambda: run(lock.acquire(timeout=None)), lambda: run(lock.release())

    def close(self) -> None:
        self.issuer.close()
        self.loop.run_until_complete(self._aclose())
        self.loop.close()
        self.channel.close()

    async def _aclose(self) -> None:
        await self.aissuer.close()
        await self.peer.close()
        await self.achannel.close()


# -- the family --------------------------------------------------------------------------------


def run(ctx: Context) -> list[Table]:
    with EtcdCluster() as cluster:  # inherits the run's CPU pinning
        endpoint = cluster.leader().endpoint
        clients = Clients(endpoint)
        try:
            return [_acquire(ctx, clients), _handoff(ctx, clients, endpoint)]
        finally:
            clients.close()


def _acquire(ctx: Context, clients: Clients) -> Table:
    stats = acquire_rounds(ctx, clients, ACQUIRE_ORDER, lambda kind: f"bench-acquire-{kind}")
    return Table(
        "etcd-acquire",
        "etcd: uncontended acquire + release (3 members, loopback)",
        [stats[kind] for kind in ACQUIRE_ORDER],
        floor=FLOOR,
        floor_of={AFENCE: AFLOOR, PEER: AFLOOR},
        notes=[
            "floor: LeaseGrant + create-if-absent Txn + compare-and-delete Txn, bare; asyncio"
            " rows are compared with the asyncio floor",
            "EtcdFence: Txn + LeaseKeepAlive (a kept lease) + Txn; aetcd Lock: as the floor",
        ],
    )


def _handoff(ctx: Context, clients: Clients, endpoint: str) -> Table:
    stats = handoff_rounds(
        ctx, clients, Clients, endpoint, HANDOFF_ORDER, lambda kind: f"bench-handoff-{kind}"
    )
    return Table(
        "etcd-handoff",
        "etcd: hand-off latency (release -> waiter in another process holds)",
        [stats[kind] for kind in HANDOFF_ORDER],
        floor=FLOOR,
        notes=[
            "floor, bare: the waiter's busy Txn, Watch of the key's deletion (a local read if"
            " it starts late); on the event LeaseGrant + Txn. Release: one Txn",
            f"hold {MIN_HOLD * 1e3:.0f} ms + U(0, 2 ms) after the waiter says it is about to wait",
        ],
    )
