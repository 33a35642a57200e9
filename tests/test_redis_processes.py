"""RedisFence raced from threads and processes: unique tokens in acquisition order.

Each holder RPUSHes its token to a log list while it holds the lease, through a script
that checks (atomically, like a guard) that the lease still carries that token. Leases
are exclusive, so the log is in grant order: it must be strictly increasing. Holders
use tiny TTLs and some "crash" (never release), so expiry and take-over are raced too.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import cast

import redis
from processes import CONTEXT
from waiting import PATIENCE, wait_until

import fencing
from fencing import RedisFence
from fencing.testing.servers import RedisServer

NAME = "race"
LOG = "race:log"
PER_ACQUIRER = 130
CRASH_EVERY = 40  # every 40th holder never releases: its lease must expire

# KEYS[1] lease, KEYS[2] log. ARGV[1] token. Appends the token if the lease carries it
# (its value is "<token>:<holder>", with a "+" in front while waiters are queued).
RECORD = """
local value = redis.call('GET', KEYS[1])
if value and string.sub(value, 1, 1) == '+' then
  value = string.sub(value, 2)
end
if not value or string.sub(value, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then
  return 0
end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
"""


def race(port: int, count: int) -> tuple[list[int], int]:
    """Acquire ``count`` times; returns the tokens issued and how many were logged."""
    client = redis.Redis(port=port)
    fence = RedisFence(client, NAME, ttl=0.1)
    record = client.register_script(RECORD)
    issued: list[int] = []
    logged = 0
    for i in range(count):
        token = fence.acquire(timeout=60)
        issued.append(int(token))
        logged += record(keys=[f"fencing:{{{NAME}}}:lease", LOG], args=[int(token)])
        if i % CRASH_EVERY == CRASH_EVERY - 1:
            continue  # a crashed holder
        with contextlib.suppress(fencing.LeaseLost):  # expired while we were descheduled
            fence.release(token)
    client.close()
    return issued, logged


def race_in_threads(port: int, threads: int, count: int) -> list[tuple[list[int], int]]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda _: race(port, count), range(threads)))


def test_tokens_unique_and_in_grant_order_across_threads_and_processes(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    with ProcessPoolExecutor(2, mp_context=CONTEXT) as processes:
        children = [
            processes.submit(race_in_threads, redis_server.port, 2, PER_ACQUIRER) for _ in range(2)
        ]
        here = race_in_threads(redis_server.port, 4, PER_ACQUIRER)
        results = here + [r for child in children for r in child.result(timeout=300)]
    issued = [token for tokens, _ in results for token in tokens]
    assert len(issued) == 8 * PER_ACQUIRER >= 1000
    assert len(set(issued)) == len(issued)  # unique across threads and processes
    for tokens, _ in results:
        assert tokens == sorted(tokens)  # each acquirer sees its tokens increase
    log = [int(t) for t in redis_client.lrange(LOG, 0, -1)]
    assert len(log) == sum(logged for _, logged in results)
    # a holder descheduled past its 0.1 s lease before recording is not logged (a loaded
    # machine does that often); a tenth is plenty for the order check to mean something
    assert len(log) >= len(issued) // 10
    assert all(a < b for a, b in itertools.pairwise(log))  # grant order == token order
    assert set(log) <= set(issued)


# -- hand-off between processes ---------------------------------------------------------


def waiter(port: int, rounds: int) -> None:
    """On each ``go``: block in acquire, log the moment it holds and the token, release."""
    client = redis.Redis(port=port, socket_timeout=120)  # our BLPOPs outlast the default
    fence = RedisFence(client, "handoff", ttl=30)
    for _ in range(rounds):
        client.blpop(["handoff:go"], 30)
        token = fence.acquire(timeout=30)
        client.rpush("handoff:held", f"{time.monotonic()}:{int(token)}")
        fence.release(token)
    client.close()


def test_hand_off_to_a_waiter_in_another_process(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    rounds = 15
    child = CONTEXT.Process(target=waiter, args=(redis_server.port, rounds + 1))
    child.start()
    client = redis.Redis(port=redis_server.port, socket_timeout=120)  # BLPOPs > 5 s
    fence = RedisFence(client, "handoff", ttl=30)
    warm = fence.acquire(timeout=30)  # the first round waits for the child to start
    client.rpush("handoff:go", 1)
    fence.release(warm)
    assert client.blpop(["handoff:held"], 60) is not None
    latencies = []
    try:
        for _ in range(rounds):
            token = fence.acquire(timeout=30)
            client.rpush("handoff:go", 1)
            wait_until(lambda: client.llen("fencing:{handoff}:queue") == 1, "the waiter queues")
            released = time.monotonic()
            fence.release(token)
            reply = client.blpop(["handoff:held"], 30)
            assert reply is not None
            held_at, their_token = cast(bytes, reply[1]).split(b":")
            assert int(their_token) > token
            latencies.append(float(held_at) - released)
    finally:
        child.join(PATIENCE)
        client.close()
    assert child.exitcode == 0 and len(latencies) == rounds
    print(
        f"\nhand-off release -> held in another process: median "
        f"{statistics.median(latencies) * 1000:.2f} ms, max {max(latencies) * 1000:.2f} ms"
    )


def test_threads_share_one_fence_object(redis_client: redis.Redis) -> None:
    """One RedisFence used by several threads, like a threading.Lock."""
    fence = RedisFence(redis_client, "shared-object", ttl=5)
    tokens: list[int] = []
    inside = threading.Lock()

    def work() -> None:
        for _ in range(30):
            with fence.hold(timeout=30) as token:
                assert inside.acquire(blocking=False)  # nobody else is inside
                tokens.append(int(token))
                inside.release()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE * 2)
        assert not thread.is_alive()
    assert len(tokens) == 120 and tokens == sorted(set(tokens))
