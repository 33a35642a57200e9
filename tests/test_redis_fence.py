"""RedisFence / RedisIssuer against a real redis-server: keys and scripts, tokens that
survive flushes and restarts, failures, hand-off, logs.

What every issuer promises is the contract's (tests/test_contract_issuers.py).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

import pytest
import redis
import redis.asyncio
from fail_fast import failing_fast
from interrupts import interrupt_before_a_reply

import fencing
from fencing import RedisFence, RedisIssuer
from fencing.issuer import Busy
from fencing.testing.servers import RedisServer, free_port


def keys(name: str) -> tuple[str, str]:
    return f"fencing:{{{name}}}:lease", f"fencing:{{{name}}}:counter"


def test_acquire_is_one_evalsha_and_lays_out_the_keys(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "inv:1", ttl=5)
    fence.release(fence.acquire())  # scripts loaded
    redis_client.config_resetstat()
    token = fence.acquire()
    stats = redis_client.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 1
    assert "cmdstat_eval" not in stats and "cmdstat_script|load" not in stats
    assert isinstance(token, fencing.FenceToken) and token.name == "inv:1"
    lease, counter = keys("inv:1")
    value = redis_client.get(lease)
    assert isinstance(value, bytes) and value.startswith(b"%d:" % token) and len(value) > 20
    assert int(redis_client.get(counter) or 0) == token
    assert 0 < redis_client.pttl(lease) <= 5000
    idle = redis_client.pttl(counter)
    assert 7 * 24 * 3600 * 1000 - 60_000 < idle <= 7 * 24 * 3600 * 1000


def test_busy_reports_remaining_lifetime(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    assert isinstance(issuer.try_acquire("b", "h1", 3000), int)
    busy = issuer.try_acquire("b", "h2", 3000)
    assert isinstance(busy, Busy) and busy.expires_in is not None
    assert 0 < busy.expires_in <= 3.0
    redis_client.persist(keys("b")[0])  # a lease without expiry: expires_in unknown
    assert issuer.try_acquire("b", "h2", 3000) == Busy(None)


def test_script_flush_between_operations_reloads_transparently(
    redis_client: redis.Redis,
) -> None:
    fence = RedisFence(redis_client, "noscript", ttl=5)
    tokens = []
    for _ in range(3):
        redis_client.script_flush()
        token = fence.acquire()
        redis_client.script_flush()
        fence.renew(token)
        redis_client.script_flush()
        fence.release(token)
        tokens.append(token)
    assert tokens == sorted(set(tokens))
    redis_client.script_flush()
    assert isinstance(RedisIssuer(redis_client).try_acquire("noscript", "x", 100), int)


def test_flushall_and_lost_or_stale_counter_never_lower_tokens(
    redis_client: redis.Redis,
) -> None:
    fence = RedisFence(redis_client, "c", ttl=5)
    _, counter = keys("c")
    last = 0

    def next_token() -> int:
        nonlocal last
        token = fence.acquire(timeout=0)
        fence.release(token)
        assert token > last
        last = token
        return token

    next_token()
    redis_client.flushall()
    next_token()
    redis_client.delete(counter)  # evicted
    next_token()
    redis_client.set(counter, last - 1)  # a failover lost the last write
    next_token()
    redis_client.set(counter, 1)  # far behind
    next_token()
    redis_client.set(counter, last + 1000)  # ahead of the clock: counter + 1 wins
    assert next_token() == last
    assert last == int(redis_client.get(counter) or 0)


def test_counter_expires_after_idle_and_tokens_still_increase(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "idle", ttl=5, counter_idle=0.1)
    counter = keys("idle")[1]
    first = fence.acquire()
    fence.release(first)
    assert 0 < redis_client.pttl(counter) <= 100
    time.sleep(0.25)
    assert redis_client.exists(counter) == 0
    assert fence.acquire() > first
    keep = RedisFence(redis_client, "keep", counter_idle=None)
    keep.acquire()
    assert redis_client.pttl(keys("keep")[1]) == -1


@pytest.mark.parametrize("persistent", [False, True])
def test_server_restart_keeps_tokens_increasing(
    redis_factory: Callable[..., RedisServer], persistent: bool
) -> None:
    server = redis_factory(persistent=persistent)
    client = redis.Redis(port=server.port, socket_timeout=2, socket_connect_timeout=2)
    fence = RedisFence(client, "restart", ttl=30)
    before = fence.acquire()
    server.restart()
    counter = client.get(keys("restart")[1])
    if persistent:
        assert counter is not None and int(counter) == before
        with pytest.raises(fencing.AcquireTimeout):  # the lease survived too
            fence.acquire(timeout=0)
        fence.release(before)
    else:
        assert counter is None
    after = fence.acquire(timeout=0)
    assert after > before
    client.close()


def test_stopped_server_gives_fence_unavailable_fast_then_recovers(
    redis_factory: Callable[..., RedisServer],
) -> None:
    server = redis_factory()
    client = failing_fast(server.port)
    fence = RedisFence(client, "down", ttl=30)
    token = fence.acquire()
    server.stop()
    started = time.monotonic()
    for call in (fence.acquire, lambda: fence.renew(token), lambda: fence.release(token)):
        with pytest.raises(fencing.FenceUnavailable) as info:
            call()
        assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
    assert time.monotonic() - started < 10
    server.start()
    assert fence.acquire(timeout=0) > token
    client.close()


def test_frozen_server_gives_fence_unavailable_not_a_hang(
    redis_factory: Callable[..., RedisServer],
) -> None:
    server = redis_factory()
    client = failing_fast(server.port, 0.3)
    fence = RedisFence(client, "frozen", ttl=30)
    token = fence.acquire()
    server.freeze()
    try:
        started = time.monotonic()
        with pytest.raises(fencing.FenceUnavailable) as info:
            fence.renew(token)
        assert isinstance(info.value.__cause__, redis.exceptions.TimeoutError)
        assert time.monotonic() - started < 5
    finally:
        server.thaw()
    fence.renew(token)
    fence.release(token)


def test_blocked_acquire_hands_off_to_waiting_thread(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "handoff", ttl=30)
    token = fence.acquire()
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(fence.acquire(timeout=20)))
    waiter.start()
    time.sleep(0.1)
    assert not got
    fence.release(token)
    waiter.join(20)
    assert got and got[0] > token


def test_wait_is_cut_below_the_client_socket_timeout(redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port, socket_timeout=0.4)
    fence = RedisFence(client, "sockwait", ttl=30)
    token = fence.acquire()
    started = time.monotonic()
    assert isinstance(fence.issuer, RedisIssuer)
    fence.issuer.await_handoff("sockwait", "w", 3)  # would outlast socket_timeout: cut
    assert time.monotonic() - started < 3
    with pytest.raises(fencing.AcquireTimeout):
        RedisFence(client, "sockwait").acquire(timeout=1.2)
    fence.release(token)
    client.close()


def test_hold_renews_past_several_ttls_and_reports_loss(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="fencing")
    fence = RedisFence(redis_client, "hold", ttl=0.3)
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost), hold as token:
        time.sleep(1.2)  # 4 ttls: only renewal keeps the lease
        assert not hold.lost
        value = redis_client.get(keys("hold")[0])
        assert isinstance(value, bytes) and value.startswith(b"%d:" % token)
        redis_client.delete(keys("hold")[0])  # the lease vanishes under the holder
        deadline = time.monotonic() + 10
        while not hold.lost and time.monotonic() < deadline:
            time.sleep(0.02)
        assert hold.lost
    names = {r.name for r in caplog.records}
    assert {"fencing.acquire", "fencing.renew", "fencing.lost"} <= names
    lost = [r for r in caplog.records if r.name == "fencing.lost"]
    assert lost[0].levelno == logging.WARNING and str(int(token)) in lost[0].getMessage()


def test_logs_acquire_and_release(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="fencing")
    fence = RedisFence(redis_client, "log", ttl=5)
    token = fence.acquire()
    fence.release(token)
    messages = [(r.name, r.getMessage()) for r in caplog.records]
    assert ("fencing.acquire", f"fence 'log': acquired token {int(token)} (ttl 5.0s)") in messages
    assert ("fencing.release", f"fence 'log': released token {int(token)}") in messages


BAD_NAMES = [(None, TypeError), (b"x", TypeError), (1, TypeError), ("", ValueError)]
BAD_TTLS = [
    (True, TypeError),
    ("1", TypeError),
    (None, TypeError),
    (-1, ValueError),
    (0, ValueError),
    (math.nan, ValueError),
]
BAD_TOKENS = [
    (True, TypeError),
    ("1", TypeError),
    (1.0, TypeError),
    (None, TypeError),
    (-1, ValueError),
]


def test_bad_input_is_refused_before_any_io() -> None:
    # Nothing listens on this port: any I/O would raise FenceUnavailable instead.
    client = failing_fast(free_port(), 0.2)
    for name, error in BAD_NAMES:
        with pytest.raises(error):
            RedisFence(client, name)  # type: ignore[arg-type]
    for ttl, error in BAD_TTLS:
        with pytest.raises(error):
            RedisFence(client, "x", ttl)  # type: ignore[arg-type]
    for idle, error in [*BAD_TTLS[:2], *BAD_TTLS[3:]]:
        with pytest.raises(error):
            RedisFence(client, "x", counter_idle=idle)  # type: ignore[arg-type]
    for wrong in ("redis://localhost", None, redis.asyncio.Redis(port=1)):
        with pytest.raises(TypeError):
            RedisFence(wrong, "x")  # type: ignore[arg-type]
    fence = RedisFence(client, "x")
    for timeout, error in [(-1, ValueError), ("1", TypeError), (True, TypeError)]:
        with pytest.raises(error):
            fence.acquire(timeout)  # type: ignore[arg-type]
    for token, error in BAD_TOKENS:
        with pytest.raises(error):
            fence.renew(token)  # type: ignore[arg-type]
        with pytest.raises(error):
            fence.release(token)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fence.release(fencing.FenceToken(5, "another"))
    with pytest.raises(fencing.FenceUnavailable):  # the same client, now doing I/O
        fence.acquire(timeout=0)


@pytest.mark.parametrize("client_kind", ["redis_client", "cluster_client"])
def test_an_interrupt_before_a_reply_leaves_no_reply_for_the_next_call(
    request: pytest.FixtureRequest, client_kind: str
) -> None:
    """redis-py pools a connection stopped between sending and reading; read by the next
    acquire, the old reply (a granted token) would let a second holder in."""
    client = request.getfixturevalue(client_kind)
    fence = RedisFence(client, "interrupted", ttl=30)
    fence.release(fence.acquire(timeout=0))  # loads the script: the interrupt hits EVALSHA
    interrupt_before_a_reply(lambda: fence.acquire(timeout=0))  # granted, reply lost
    with pytest.raises(fencing.AcquireTimeout):
        fence.acquire(timeout=0)
    assert client.incr("{interrupted}:unrelated") == 1
