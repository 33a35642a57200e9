"""Family ``limits``: the rate limiter and the semaphore of issue 21 against their floors
and their peers, on the run's Redis.

- ``limiter``: one ``try_acquire`` (never refused: the limit is far above the rate), on
  a name of its own per variant. The floor is a bare one-script round trip (EVALSHA
  straight through redis-py, of a script that reads ``TIME`` and replies it as the
  limiter's scripts reply an admission: one integer); beside it the same round trip
  replying ``{1, 0, TIME}`` (the limiter's reply before 2026-11-25: what the reply's
  shape costs redis-py to read), and the limiter's own scripts called the same bare way,
  so the table splits the cost into the scripts' work on the server and the Python
  around them. Peers:
  ``limits`` (fixed and moving window, ``RedisStorage``) and ``pyrate-limiter``
  (``RedisBucket``), on the same redis-py and server.
- ``semaphore``: one uncontended acquire + release of a ``Semaphore`` of 4 permits,
  against the floor of the fence's own acquire + release on the same issuer (a permit is
  a slot's fence: the difference is the semaphore's bookkeeping).
- ``limiter-throughput``: ``try_acquire`` calls per second with 1, 4 and 16 client
  threads sharing one limiter name (each thread its own limiter object, one redis-py
  pool), every one admitted; pinned to one CPU with the server, as ``throughput``.

Imports redis-py, fencing, the harness, and the peers (the ``bench`` extra).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import limits
import limits.storage
import limits.strategies
import pyrate_limiter
import redis

import fencing
from fencing.redis import RedisIssuer
from fencing.redis._limits import limit_call
from fencing.redis._scripts import Script
from harness import Context, Stats, Table, Variant, now_ns, run_rounds, timed

#: Far above any rate this machine reaches: every request is admitted.
LIMIT, PER = 100_000, 1.0
FLOOR = "floor: one-script round trip (EVALSHA)"
ARRAY_FLOOR = "one-script round trip replying {1, 0, TIME}"
RAW_SLIDING = "limiter's sliding script alone (EVALSHA)"
RAW_FIXED = "limiter's fixed script alone (EVALSHA)"
SLIDING = "fencing Limiter sliding try_acquire"
FIXED = "fencing Limiter fixed try_acquire"
LIMITS_FIXED = "limits FixedWindow hit (RedisStorage)"
LIMITS_MOVING = "limits MovingWindow hit (RedisStorage)"
PYRATE = "pyrate-limiter try_acquire (RedisBucket)"
FENCE = "fencing Fence acquire+release (floor)"
SEMAPHORE = "fencing Semaphore(permits=4) acquire+release"
#: The bare round trip: the shape of the limiter's script (``TIME``, one key, the server
#: time in µs as its reply), no work.
BARE = Script("local t = redis.call('TIME') return tonumber(t[1]) * 1000000 + tonumber(t[2])", 1)
#: The same, replying a three-element array, as the limiter's scripts did before.
BARE_ARRAY = Script("local t = redis.call('TIME') return {1, 0, t[1]}", 1)
CLIENTS = (1, 4, 16)


def run(ctx: Context) -> list[Table]:
    client = redis.Redis.from_url(ctx.redis_url)
    issuer = RedisIssuer(client)
    try:
        return [_limiter(ctx, client, issuer), _semaphore(ctx, issuer), _throughput(ctx, client)]
    finally:
        client.close()


def _evalsha(client: redis.Redis, script: Script, args: tuple[Any, ...]) -> Callable[[], Any]:
    """The cheapest one-script round trip redis-py offers: EVALSHA of a loaded script,
    every argument bytes already (no encoding per call)."""
    client.script_load(script.text)
    command: Callable[..., Any] = client.execute_command  # untyped in redis-py
    sha = script.sha_arg
    return lambda: command("EVALSHA", sha, b"1", *args)


def _requests(
    ctx: Context, client: redis.Redis, issuer: RedisIssuer, name: str
) -> dict[str, Callable[[], Any]]:
    """One admitted request of every limiter variant on the limiter ``name`` (each library
    keeps its own keys)."""
    raw = {
        window: limit_call(f"{name}-raw", LIMIT, round(PER * 1000), window)
        for window in ("sliding", "fixed")
    }
    storage = limits.storage.RedisStorage(ctx.redis_url)
    per_second = limits.RateLimitItemPerSecond(LIMIT)
    fixed_peer = limits.strategies.FixedWindowRateLimiter(storage)
    moving_peer = limits.strategies.MovingWindowRateLimiter(storage)
    rate = pyrate_limiter.Rate(LIMIT, pyrate_limiter.Duration.SECOND)
    pyrate = pyrate_limiter.Limiter(pyrate_limiter.RedisBucket.init([rate], client, name))
    sliding = fencing.Limiter(issuer, name, LIMIT, PER, "sliding")
    fixed = fencing.Limiter(issuer, name, LIMIT, PER, "fixed")
    return {
        FLOOR: _evalsha(client, BARE, (f"{name}-bare".encode(),)),
        ARRAY_FLOOR: _evalsha(client, BARE_ARRAY, (f"{name}-bare".encode(),)),
        RAW_SLIDING: _evalsha(client, *raw["sliding"]),
        RAW_FIXED: _evalsha(client, *raw["fixed"]),
        SLIDING: sliding.try_acquire,
        FIXED: fixed.try_acquire,
        LIMITS_FIXED: lambda: fixed_peer.hit(per_second, f"{name}-fixed"),
        LIMITS_MOVING: lambda: moving_peer.hit(per_second, f"{name}-moving"),
        PYRATE: lambda: pyrate.try_acquire(name, blocking=False),
    }


def _limiter(ctx: Context, client: redis.Redis, issuer: RedisIssuer) -> Table:
    requests = _requests(ctx, client, issuer, "bench-limiter")
    for name, request in requests.items():
        assert request() not in (False, 0), f"{name} refused: the limit is too low"
    variants = [Variant(name, timed(request)) for name, request in requests.items()]
    stats = run_rounds(variants, rounds=ctx.scale(8, 30), per_round=ctx.scale(100, 200), warmup=100)
    return Table(
        "limiter",
        "rate limiter: one admitted try_acquire (own name per variant)",
        [stats[v.name] for v in variants],
        floor=FLOOR,
        notes=[f"limit {LIMIT} per {PER:g} s: every request admitted; one Redis, one client"],
    )


def _semaphore(ctx: Context, issuer: RedisIssuer) -> Table:
    fence = fencing.Fence(issuer, "bench-semaphore-fence", ttl=30)
    semaphore = fencing.Semaphore(issuer, "bench-semaphore", permits=4, ttl=30)

    def fence_cycle() -> None:
        fence.release(fence.acquire())

    def semaphore_cycle() -> None:
        semaphore.release(semaphore.acquire())

    variants = [Variant(FENCE, timed(fence_cycle)), Variant(SEMAPHORE, timed(semaphore_cycle))]
    stats = run_rounds(variants, rounds=ctx.scale(8, 30), per_round=ctx.scale(100, 200), warmup=100)
    return Table(
        "semaphore",
        "semaphore: uncontended acquire + release, against the fence's own",
        [stats[v.name] for v in variants],
        floor=FENCE,
    )


def _throughput(ctx: Context, client: redis.Redis) -> Table:
    span = 0.2 if ctx.quick else 0.5
    kinds = (SLIDING, FIXED, LIMITS_MOVING, PYRATE)
    cells = []
    for clients in CLIENTS:
        for kind in kinds:
            name = f"bench-tp-{clients}-{kind.split()[0]}"
            requests = [
                _requests(ctx, client, RedisIssuer(client), name)[kind] for _ in range(clients)
            ]
            stats = Stats(f"{kind} x{clients}", ops_per_s=0.0)
            stats.extra.update(clients=clients, ops=0, seconds=0.0)
            cells.append(_Cell(requests, stats, span))
    variants = [Variant(cell.stats.name, cell.run) for cell in cells]
    run_rounds(variants, rounds=ctx.scale(1, 3), per_round=1)
    return Table(
        "limiter-throughput",
        "rate limiter: try_acquire calls/s, 1, 4, 16 client threads on one name",
        [cell.stats for cell in cells],
        floor=None,
        notes=[f"{span:.2f} s per cell and round, cells interleaved; every request admitted"],
    )


class _Cell:
    """One (variant, clients) cell: its clients' requests, run in threads for ``span``."""

    def __init__(self, requests: list[Callable[[], Any]], stats: Stats, span: float) -> None:
        self.requests, self.stats, self.span = requests, stats, span

    def run(self, _n: int) -> list[int]:
        deadline = now_ns() + int(self.span * 1e9)
        results: list[list[int]] = [[] for _ in self.requests]
        threads = [
            threading.Thread(target=_client, args=(request, deadline, out))
            for request, out in zip(self.requests, results, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = self.stats
        for latencies in results:
            stats.samples.extend(latencies)
        stats.extra["ops"] += sum(len(r) for r in results)
        stats.extra["seconds"] += self.span
        stats.ops_per_s = stats.extra["ops"] / stats.extra["seconds"]
        return []


def _client(request: Callable[[], Any], deadline: int, out: list[int]) -> None:
    while True:
        start = now_ns()
        request()
        end = now_ns()
        if end > deadline:
            return
        out.append(end - start)
