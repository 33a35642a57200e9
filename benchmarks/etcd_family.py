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

import os

import aetcd
import grpc
import grpc.aio
from aetcd import rpc

from fencing.etcd import EtcdFence, EtcdIssuer
from fencing.etcd.aio import EtcdFence as AsyncEtcdFence
from fencing.etcd.aio import EtcdIssuer as AsyncEtcdIssuer
from fencing.testing.servers import EtcdCluster
from handoff_rig import (
    HOLD_NOTE,
    EngineClients,
    Holder,
    Kinds,
    acquire_rounds,
    handoff_rounds,
)
from harness import Context, Table

TTL = 10  # seconds: no lease expires during a measurement
KINDS = Kinds(
    floor="etcd floor: grant, txn, txn (grpc, bare)",
    aa="A/A: etcd floor, 2nd copy",
    afloor="etcd floor, asyncio (grpc.aio, bare)",
    fence="fencing.etcd.EtcdFence",
    afence="fencing.etcd.aio.EtcdFence",
    peer="aetcd Lock (asyncio)",
)


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


class Clients(EngineClients):
    """One process's clients of the cluster (blocking, asyncio on ``loop``, aetcd)."""

    KINDS = KINDS

    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint)
        self.channel = grpc.insecure_channel(endpoint)
        self.achannel = self.loop.run_until_complete(self._open())
        self.issuer = EtcdIssuer(f"etcd://{endpoint}")
        self.aissuer = AsyncEtcdIssuer(f"etcd://{endpoint}")
        host, _, port = endpoint.rpartition(":")
        self.peer_client = aetcd.Client(host, int(port))

    async def _open(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(self.argument)

    def floor(self, name: str) -> BareFloor:
        return BareFloor(self.channel, _key(name))

    def afloor(self, name: str) -> AsyncBareFloor:
        return AsyncBareFloor(self.achannel, _key(name))

    def fence(self, name: str) -> EtcdFence:
        return EtcdFence(self.issuer, name, TTL)

    def afence(self, name: str) -> AsyncEtcdFence:
        return AsyncEtcdFence(self.aissuer, name, TTL)

    def peer(self, name: str) -> Holder:
        run = self.loop.run_until_complete
        lock = self.peer_client.lock(_key(name), ttl=TTL)
        return lambda: run(lock.acquire(timeout=None)), lambda: run(lock.release())

    def close(self) -> None:
        self.issuer.close()
        self.loop.run_until_complete(self._aclose())
        self.loop.close()
        self.channel.close()

    async def _aclose(self) -> None:
        await self.aissuer.aclose()
        await self.peer_client.close()
        await self.achannel.close()


def _key(name: str) -> bytes:
    return f"fencing/{name}".encode()


# -- the family --------------------------------------------------------------------------------


def run(ctx: Context) -> list[Table]:
    # the cluster inherits the run's CPU pinning
    with EtcdCluster() as cluster, Clients(cluster.leader().endpoint) as clients:
        return [_acquire(ctx, clients), _handoff(ctx, clients)]


def _acquire(ctx: Context, clients: Clients) -> Table:
    return Table(
        "etcd-acquire",
        "etcd: uncontended acquire + release (3 members, loopback)",
        acquire_rounds(ctx, clients, lambda kind: f"bench-acquire-{kind}"),
        floor=KINDS.floor,
        floor_of={KINDS.afence: KINDS.afloor, KINDS.peer: KINDS.afloor},
        notes=[
            "floor: LeaseGrant + create-if-absent Txn + compare-and-delete Txn, bare; asyncio"
            " rows are compared with the asyncio floor",
            "EtcdFence: Txn + LeaseKeepAlive (a kept lease) + Txn; aetcd Lock: as the floor",
        ],
    )


def _handoff(ctx: Context, clients: Clients) -> Table:
    return Table(
        "etcd-handoff",
        "etcd: hand-off latency (release -> waiter in another process holds)",
        handoff_rounds(ctx, clients, lambda kind: f"bench-handoff-{kind}"),
        floor=KINDS.floor,
        notes=[
            "floor, bare: the waiter's busy Txn, Watch of the key's deletion (a local read if"
            " it starts late); on the event LeaseGrant + Txn. Release: one Txn",
            HOLD_NOTE,
        ],
    )
