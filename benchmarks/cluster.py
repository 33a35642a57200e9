"""Family ``cluster``: fences on one Redis node against a Redis Cluster of 3 masters.

The family starts its own cluster (``fencing.testing.servers.RedisCluster``: 3 masters and no
replicas, like the run's lone redis-server, on loopback, inheriting the run's CPU
pinning) beside the run's redis-server, and measures:

- throughput: acquire+release cycles/s with 1, 4 and 16 clients (threads), each client
  cycling over its own 64 fence names, so the names spread over the 3 masters and
  nobody waits. A 3-master row's floor is the 1-node row with as many clients; the
  extra column is its cycles/s over theirs. Pinned to one CPU, all servers share that
  CPU with the clients: the ratio then shows what the cluster costs a client (slot
  lookup, a connection per master), not the capacity 3 masters add on 3 machines.
- one client, one name: ``GET``, ``RedisFence``'s two scripts by bare ``EVALSHA`` and a
  ``RedisFence`` acquire+release, through ``redis.Redis`` to the node serving the name
  and through ``RedisCluster``: what the cluster client adds per call (slot lookup,
  routing), apart from fencing's own code.
- hand-off: from the holder's release to a waiter in another process holding
  (``handoff``'s protocol and holder side), on one node and on the cluster, for the
  direct hand-off floor and ``RedisFence``. The family floor is the 1-node floor; the
  extra column is a row over the same kind on one node.

Imports redis-py, the harness, the lock registry, the hand-off family and the cluster.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from typing import Any, cast

import redis
import redis.asyncio
import redis.cluster

import handoff
import locks
import throughput
from fencing import RedisFence
from fencing.testing.servers import RedisCluster
from harness import Context, Stats, Table, Variant, now_ns, run_rounds, timed

#: How many fence names each throughput client cycles over.
NAMES = 64
CLIENTS = (1, 4, 16)
ONE_NODE, THREE_MASTERS = "1 node", "3 masters"
TOPOLOGIES = (ONE_NODE, THREE_MASTERS)
MANY = "RedisFence, 64 names per client"
HANDOFF_KINDS = (locks.FLOOR_HANDOFF, locks.REDIS_FENCE)
Clients = redis.Redis | redis.cluster.RedisCluster


def run(ctx: Context) -> list[Table]:
    with RedisCluster(masters=3, replicas=0) as cluster:
        clients: dict[str, Clients] = {
            ONE_NODE: redis.Redis.from_url(ctx.redis_url),
            THREE_MASTERS: cluster.client(),
        }
        try:
            direct = redis.Redis(port=cluster.master_for(CALLS_NAME).port)
            try:
                calls = _calls(ctx, {ONE_NODE: direct, THREE_MASTERS: clients[THREE_MASTERS]})
            finally:
                direct.close()
            return [calls, _throughput(ctx, clients), _handoff(ctx, clients, cluster.url)]
        finally:
            for client in clients.values():
                client.close()


def _row(kind: str, topology: str, clients: int | None = None) -> str:
    return f"{kind}, {topology}" + ("" if clients is None else f" x{clients}")


def _many_names(client: Any, name: str) -> locks.Holder:
    """A holder that takes the next of its ``NAMES`` fences on each acquire."""
    fences = itertools.cycle([RedisFence(client, f"{name}:{i}", locks.TTL) for i in range(NAMES)])
    held: list[tuple[RedisFence, int]] = []

    def acquire() -> None:
        fence = next(fences)
        held.append((fence, fence.acquire()))

    def release() -> None:
        fence, token = held.pop()
        fence.release(token)

    return locks.Holder(acquire, release)


CALLS_NAME = "{calls}"  # the kinds prefix it ("rf:{calls}"): the tag keeps one slot
CALL_KINDS = ("GET", locks.RAW_SCRIPTS, locks.REDIS_FENCE)


def _calls(ctx: Context, clients: dict[str, Clients]) -> Table:
    """Sequential calls on one name, straight to its master and through the cluster client."""
    variants = []
    for kind in CALL_KINDS:
        for topology in TOPOLOGIES:
            client = clients[topology]
            if kind == "GET":
                batch = timed(partial(client.get, CALLS_NAME))
            else:
                batch = timed(_cycle(locks.KINDS[kind].make(client, CALLS_NAME)))
            variants.append(Variant(_row(kind, topology), batch))
    stats = run_rounds(variants, rounds=ctx.scale(4, 20), per_round=ctx.scale(50, 100), warmup=20)
    floors = {_row(k, THREE_MASTERS): _row(k, ONE_NODE) for k in CALL_KINDS}
    return Table(
        "cluster-calls",
        "cluster: one client, one name: the node serving it (redis.Redis) vs RedisCluster",
        [stats[v.name] for v in variants],
        floor=None,
        floor_of=floors,
        notes=[
            "1 node: a redis.Redis on the master serving the name; 3 masters: a RedisCluster."
            " x floor: the RedisCluster row over the redis.Redis row of the same call",
        ],
    )


def _cycle(holder: locks.Holder) -> Callable[[], None]:
    def cycle() -> None:
        holder.acquire()
        holder.release()

    return cycle


def _throughput(ctx: Context, clients: dict[str, Clients]) -> Table:
    span = 0.15 if ctx.quick else 0.8
    rounds = ctx.scale(1, 3)
    kind = locks.LockKind(MANY, _many_names)
    unused_loop = asyncio.new_event_loop()  # _Cell wants one; these kinds are blocking
    unused_aclient = redis.asyncio.Redis.from_url(ctx.redis_url)
    rows: dict[str, Stats] = {}
    variants = []
    for n in CLIENTS:
        for topology in TOPOLOGIES:
            stats = rows[_row(MANY, topology, n)] = Stats(_row(MANY, topology, n), ops_per_s=0.0)
            stats.extra.update(clients=n, topology=topology, ops=0, seconds=0.0)
            client = cast(redis.Redis, clients[topology])  # _Cell only hands it to _many_names
            cell = throughput._Cell(
                ctx, kind, topology, n, client, unused_aclient, unused_loop, stats, span
            )
            variants.append(Variant(stats.name, cell.run))
    try:
        run_rounds(variants, rounds=rounds, per_round=1)  # each cell keeps its own stats
    finally:
        unused_loop.run_until_complete(unused_aclient.aclose())
        unused_loop.close()
    twin = {_row(MANY, THREE_MASTERS, n): _row(MANY, ONE_NODE, n) for n in CLIENTS}

    def speed_up(stats: Stats) -> str:
        other = rows.get(twin.get(stats.name, ""))
        return "" if other is None else f"{stats.rate / other.rate:.2f}x"

    return Table(
        "cluster-throughput",
        "cluster: acquire+release cycles/s, 1 node vs 3 masters, 1, 4, 16 clients",
        list(rows.values()),
        floor=None,
        floor_of=twin,
        notes=[
            f"{rounds} x {span:.2f} s per cell, cells interleaved; each client cycles over"
            f" its own {NAMES} names; ops/s = cycles / span",
            "x floor: a 3-master row's median over the 1-node row's with as many clients;"
            " ops/s vs 1 node: its cycles/s over theirs",
        ],
        column=("ops/s vs 1 node", speed_up),
    )


def _handoff(ctx: Context, clients: dict[str, Clients], cluster_url: str) -> Table:
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    waiter = spawn.Process(target=waiter_main, args=(theirs, ctx.redis_url, cluster_url))
    waiter.daemon = True
    waiter.start()
    loop = asyncio.new_event_loop()
    variants = []
    for topology in TOPOLOGIES:
        for name in HANDOFF_KINDS:
            kind = locks.KINDS[name]
            renamed = locks.LockKind(_row(name, topology), kind.make, poll=kind.poll)
            batch = handoff._batch(ctx, renamed, clients[topology], None, loop, ours)  # type: ignore[arg-type]
            variants.append(Variant(renamed.name, batch))
    try:
        rounds, per_round = ctx.scale(4, 20), ctx.scale(8, 10)
        stats = run_rounds(variants, rounds=rounds, per_round=per_round, warmup=2)
    finally:
        ours.send(("stop",))
        waiter.join(10)
        loop.close()
    twin = {_row(k, THREE_MASTERS): _row(k, ONE_NODE) for k in HANDOFF_KINDS}

    def over_one_node(row: Stats) -> str:
        other = stats.get(twin.get(row.name, ""))
        return "" if other is None else f"{row.median / other.median:.2f}x"

    return Table(
        "cluster-handoff",
        "cluster: hand-off latency (release -> waiter in another process holds)",
        [stats[v.name] for v in variants],
        floor=_row(locks.FLOOR_HANDOFF, ONE_NODE),
        notes=[
            "as the handoff family; x floor: over the direct hand-off floor on 1 node;"
            " x 1 node: a row's median over the same kind's on 1 node",
        ],
        column=("x 1 node", over_one_node),
    )


def waiter_main(conn: Connection, node_url: str, cluster_url: str) -> None:
    """The hand-off waiter (``handoff``'s protocol), with a client per topology: on
    ("go", row, fence) acquire, report the time it holds, release."""
    from fencing.redis._backend import RedisClusterBackend

    clients: dict[str, Clients] = {
        ONE_NODE: redis.Redis.from_url(node_url),
        THREE_MASTERS: RedisClusterBackend(cluster_url).new_client(),
    }
    holders: dict[str, locks.Holder] = {}
    while True:
        message = conn.recv()
        if message[0] == "stop":
            break
        _, row, fence = message
        holder = holders.get(row)
        if holder is None:
            name, _, topology = row.rpartition(", ")
            holder = holders[row] = locks.KINDS[name].make(clients[topology], fence)
        conn.send("ready")
        holder.acquire()
        held_at = now_ns()
        holder.release()
        conn.send(held_at)
    for client in clients.values():
        client.close()
