"""Family ``replicas``: what ``min_replicas=1`` costs, against the replica's own ack time.

A primary and one replica (``fencing.testing.servers.SentinelGroup``; its Sentinels
only watch). Rows, interleaved in rounds:

- ``SET`` and ``SET + WAIT 1`` (pipelined, one round trip): the floor of a replicated
  write; their difference is the replica's acknowledgement time alone;
- RedisFence's own two scripts by bare EVALSHA, without and with ``WAIT 1`` pipelined
  after the acquire script: what the replica's acknowledgement of *those* writes costs,
  with no Python of ours around it;
- ``RedisFence`` acquire + release without and with ``min_replicas=1``: the acquire
  script and ``WAIT`` go in one pipeline, the release has none.

The target (issue 10): ``min_replicas=1`` adds one replica acknowledgement and no more,
so (fence with - fence without) / (SET + WAIT - SET) should be about 1. The note under
the table gives that ratio.

Imports redis-py, the harness, the fence and the throwaway servers.
"""

from __future__ import annotations

from collections.abc import Callable

import redis

import fencing
from fencing.testing.servers import SentinelGroup
from harness import Context, Table, Variant, run_rounds, timed

SET = "SET (one write, one round trip)"
SET_WAIT = "SET + WAIT 1, pipelined (the replica's ack floor)"
SCRIPTS = "RedisFence's scripts alone (2x EVALSHA)"
SCRIPTS_WAIT = "the same, acquire script + WAIT 1 pipelined"
FENCE = "RedisFence acquire + release"
FENCE_REPLICATED = "RedisFence acquire + release, min_replicas=1"


def run(ctx: Context) -> list[Table]:
    with SentinelGroup(service="bench") as group:
        client = redis.Redis(port=group.primary.port, socket_timeout=5)
        try:
            return [_measure(ctx, client)]
        finally:
            client.close()


def _measure(ctx: Context, client: redis.Redis) -> Table:
    def write() -> None:
        client.set("bench:replicas", 1)

    def write_and_wait() -> None:
        pipe = client.pipeline(transaction=False)
        pipe.set("bench:replicas", 1)
        pipe.wait(1, 1000)
        pipe.execute()

    variants = [
        Variant(SET, timed(write), is_floor=True),
        Variant(SET_WAIT, timed(write_and_wait), is_floor=True),
        Variant(SCRIPTS, timed(_scripts(client, wait=False)), is_floor=True),
        Variant(SCRIPTS_WAIT, timed(_scripts(client, wait=True))),
        Variant(FENCE, timed(_cycle(fencing.RedisFence(client, "bench:plain")))),
        Variant(
            FENCE_REPLICATED,
            timed(_cycle(fencing.RedisFence(client, "bench:replicated", min_replicas=1))),
        ),
    ]
    stats = run_rounds(variants, rounds=ctx.scale(10, 40), per_round=ctx.scale(60, 100), warmup=50)
    table = Table(
        "replicas",
        "min_replicas=1 against none, and the replica's ack time (primary + 1 replica)",
        [stats[v.name] for v in variants],
        floor=FENCE,
        floor_of={SET_WAIT: SET, SCRIPTS_WAIT: SCRIPTS, FENCE_REPLICATED: FENCE},
    )
    ack = stats[SET_WAIT].median - stats[SET].median
    script_ack = stats[SCRIPTS_WAIT].median - stats[SCRIPTS].median
    added = stats[FENCE_REPLICATED].median - stats[FENCE].median
    table.notes.append(
        f"min_replicas=1 adds {added / 1e3:.1f} us per acquire + release; a bare WAIT 1 after "
        f"a SET adds {ack / 1e3:.1f} us (ratio {added / ack:.2f}), after the acquire script "
        f"{script_ack / 1e3:.1f} us (ratio {added / script_ack:.2f}). Target: about 1, one "
        "acknowledgement and no extra round trip"
    )
    return table


def added_over_ack(tables: list[Table]) -> float | None:
    """The target's ratio: what ``min_replicas=1`` adds over what ``WAIT 1`` adds to the
    bare acquire script (medians), or ``None`` when the family did not run."""
    for table in tables:
        if table.family == "replicas":
            median = {s.name: s.median for s in table.rows}
            ack = median[SCRIPTS_WAIT] - median[SCRIPTS]
            return (median[FENCE_REPLICATED] - median[FENCE]) / ack
    return None


def _scripts(client: redis.Redis, wait: bool) -> Callable[[], None]:
    """RedisFence's acquire and release scripts by bare EVALSHA, as it sends them."""
    from fencing.redis._scripts import ACQUIRE, RELEASE, fence_keys

    for script in (ACQUIRE, RELEASE):
        client.script_load(script.text)
    lease = fence_keys(f"bench:raw:{wait}").lease
    holder = b"0123456789abcdef0123456789"
    args = (lease, holder, b"10000", b"604800000", b"1500")

    def cycle() -> None:
        if wait:
            pipe = client.pipeline(transaction=False)
            pipe.evalsha(ACQUIRE.sha, 1, *args)
            pipe.wait(1, 1000)
            token = pipe.execute()[0]
        else:
            token = client.evalsha(ACQUIRE.sha, 1, *args)
        client.evalsha(RELEASE.sha, 1, lease, b"%d:%s" % (token, holder))

    return cycle


def _cycle(fence: fencing.RedisFence) -> Callable[[], None]:
    def cycle() -> None:
        fence.release(fence.acquire(timeout=0))

    return cycle
