"""Family ``redlock``: an uncontended Redlock acquire+release on 3 and on 5 masters.

The family starts its own masters (``fencing.testing.servers.RedisServer``, inheriting
the run's CPU pinning) and measures, for each size, one holder cycling on its own name:

- the floor: Redlock without a token, done as ``RedlockFence`` does its I/O: ``SET NX
  PX`` on every node at once (one thread per node), then a compare-and-delete EVALSHA on
  every node at once; no validity arithmetic, no give-back;
- ``fencing.redis.RedlockFence``: the same lease plus the token (a script that reads the
  counter with the lease and takes the proposed token; a second parallel round only
  when a majority did not take it, which an issuer's first acquire and few others need);
- pottery's ``Redlock`` on the same masters (a peer from PyPI, no token);
- asyncio: the floor with ``asyncio.gather`` and ``fencing.redis.aio.RedlockFence``
  (compared with that floor).

The ratio of ``RedlockFence`` to the floor is what the token costs (in the steady state
no round trip: the scripts, and the Python around them).

Imports redis-py, pottery, fencing, the harness and the throwaway servers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from pottery import Redlock

from fencing.redis import RedlockFence, RedlockIssuer
from fencing.redis.aio import RedlockFence as AsyncRedlockFence
from fencing.redis.aio import RedlockIssuer as AsyncRedlockIssuer
from fencing.testing.servers import RedisServer
from harness import Batch, Context, Stats, Table, Variant, atimed, run_rounds, timed

TTL = 10.0
SIZES = (3, 5)
FLOOR = "floor: parallel SET NX PX + compare-and-delete"
FENCE = "fencing.redis.RedlockFence"
POTTERY = "pottery Redlock"
AFLOOR = "floor, asyncio (gather)"
AFENCE = "fencing.redis.aio.RedlockFence"
KINDS = (FLOOR, FENCE, POTTERY, AFLOOR, AFENCE)

_DELETE = """if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0"""


def run(ctx: Context) -> list[Table]:
    return [_size(ctx, size) for size in SIZES]


def _row(kind: str, size: int) -> str:
    return f"{kind}, {size} masters"


def _size(ctx: Context, size: int) -> Table:
    servers = [RedisServer().start() for _ in range(size)]
    clients = [redis.Redis(port=server.port) for server in servers]
    aclients = [redis.asyncio.Redis(port=server.port) for server in servers]
    loop = asyncio.new_event_loop()
    pool = concurrent.futures.ThreadPoolExecutor(size)
    issuer = RedlockIssuer(clients)
    aissuer = AsyncRedlockIssuer(aclients)
    try:
        makers: dict[str, Batch] = {
            FLOOR: timed(_floor(clients, pool)),
            FENCE: timed(_fence_cycle(RedlockFence(clients, "bench:fence", TTL, issuer=issuer))),
            POTTERY: timed(_pottery(clients)),
            AFLOOR: atimed(loop, _async_floor(aclients)),
            AFENCE: atimed(
                loop, _async_fence(AsyncRedlockFence(aclients, "bench:afence", TTL, issuer=aissuer))
            ),
        }
        variants = [Variant(_row(kind, size), makers[kind]) for kind in KINDS]
        stats = run_rounds(
            variants, rounds=ctx.scale(5, 20), per_round=ctx.scale(40, 100), warmup=30
        )
    finally:
        issuer.close()
        pool.shutdown()
        for aclient in aclients:
            loop.run_until_complete(aclient.aclose())
        loop.close()
        for client in clients:
            client.close()
        for server in servers:
            server.close()
    rows: list[Stats] = [stats[v.name] for v in variants]
    return Table(
        f"redlock-{size}",
        f"redlock: uncontended acquire + release on {size} masters (one holder, own name)",
        rows,
        floor=_row(FLOOR, size),
        floor_of={_row(AFENCE, size): _row(AFLOOR, size)},
        notes=[
            "floor: Redlock's lease without a token, every node at once (threads); "
            "RedlockFence adds the token (no round of its own once the issuer proposes); "
            "asyncio rows over the asyncio floor"
        ],
    )


def _floor(
    clients: list[redis.Redis], pool: concurrent.futures.ThreadPoolExecutor
) -> Callable[[], None]:
    delete = clients[0].register_script(_DELETE)
    quorum = len(clients) // 2 + 1
    key, holder = b"bench:floor", b"0123456789abcdef0123456789"

    def cycle() -> None:
        granted = sum(
            bool(f.result())
            for f in [pool.submit(c.set, key, holder, nx=True, px=int(TTL * 1000)) for c in clients]
        )
        assert granted >= quorum
        for f in [pool.submit(delete, keys=[key], args=[holder], client=c) for c in clients]:
            f.result()

    return cycle


def _fence_cycle(fence: RedlockFence) -> Callable[[], None]:
    def cycle() -> None:
        fence.release(fence.acquire())

    return cycle


def _pottery(clients: list[redis.Redis]) -> Callable[[], None]:
    lock = Redlock(key="bench:pottery", masters=set(clients), auto_release_time=TTL)

    def cycle() -> None:
        lock.acquire()
        lock.release()

    return cycle


def _async_floor(aclients: list[redis.asyncio.Redis]) -> Callable[[], Any]:
    delete = aclients[0].register_script(_DELETE)
    quorum = len(aclients) // 2 + 1
    key, holder = b"bench:afloor", b"0123456789abcdef0123456789"

    async def cycle() -> None:
        replies = await asyncio.gather(
            *(c.set(key, holder, nx=True, px=int(TTL * 1000)) for c in aclients)
        )
        assert sum(bool(reply) for reply in replies) >= quorum
        await asyncio.gather(*(delete(keys=[key], args=[holder], client=c) for c in aclients))

    return cycle


def _async_fence(fence: AsyncRedlockFence) -> Callable[[], Any]:
    async def cycle() -> None:
        await fence.release(await fence.acquire())

    return cycle
