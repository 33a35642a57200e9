"""RedisFence / RedisIssuer against a real redis-server: keys and scripts, tokens that
survive flushes and restarts, failures, hand-off, logs.

What every issuer promises is the contract's (tests/test_contract_issuers.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, cast

import pytest
import redis
import redis.asyncio
from fail_fast import failing_fast
from interrupts import interrupt_before_a_reply
from waiting import joined, wait_until, woken_only

import fencing
from fencing import RedisFence, RedisIssuer
from fencing.issuer import Busy
from fencing.testing.servers import RedisServer, free_port


def keys(name: str) -> tuple[str, str]:
    return f"fencing:{{{name}}}:lease", f"fencing:{{{name}}}:counter"


def test_acquire_is_one_evalsha_and_lays_out_the_keys(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "inv:1", ttl=30)
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
    assert 0 < redis_client.pttl(lease) <= 30_000
    idle = redis_client.pttl(counter)
    assert 7 * 24 * 3600 * 1000 - 60_000 < idle <= 7 * 24 * 3600 * 1000


def test_busy_reports_remaining_lifetime(redis_client: redis.Redis) -> None:
    issuer = RedisIssuer(redis_client)
    assert isinstance(issuer.try_acquire("b", "h1", 60_000), int)
    busy = issuer.try_acquire("b", "h2", 60_000)
    assert isinstance(busy, Busy) and busy.expires_in is not None
    assert 30 < busy.expires_in <= 60.0  # seconds left of the 60 s lease
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
    counter = keys("idle")[1]
    lasting = RedisFence(redis_client, "idle", ttl=5, counter_idle=60)
    lasting.release(lasting.acquire())
    assert 50_000 < redis_client.pttl(counter) <= 60_000  # the idle lifetime, set
    fence = RedisFence(redis_client, "idle", ttl=5, counter_idle=0.1)
    first = fence.acquire()
    fence.release(first)
    wait_until(lambda: redis_client.exists(counter) == 0, "the idle counter expires")
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
    redis_factory: Callable[..., RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fast: each call tries the server once and reports (fencing adds no retry to the
    client's, here none), counted as connection attempts, not timed."""
    server = redis_factory()
    client = failing_fast(server.port)
    fence = RedisFence(client, "down", ttl=30)
    token = fence.acquire()
    server.stop()
    connects: list[object] = []
    connect: Callable[[redis.connection.Connection], object] = cast(
        Any, redis.connection.Connection._connect
    )

    def counted(self: redis.connection.Connection) -> object:
        connects.append(self)
        return connect(self)

    monkeypatch.setattr(redis.connection.Connection, "_connect", counted)
    for call in (fence.acquire, lambda: fence.renew(token), lambda: fence.release(token)):
        with pytest.raises(fencing.FenceUnavailable) as info:
            call()
        assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
    assert 0 < len(connects) <= 3  # each call tried once: no retry, no wait between tries
    monkeypatch.undo()
    server.start()
    assert fence.acquire(timeout=0) > token
    client.close()


def test_frozen_server_gives_fence_unavailable_not_a_hang(
    redis_factory: Callable[..., RedisServer],
) -> None:
    server = redis_factory()
    client = failing_fast(server.port, 1.0)
    fence = RedisFence(client, "frozen", ttl=30)
    token = fence.acquire()
    server.freeze()
    try:
        with pytest.raises(fencing.FenceUnavailable) as info:
            fence.renew(token)
        # the client's socket timeout ended the call (a frozen server never answers)
        assert isinstance(info.value.__cause__, redis.exceptions.TimeoutError)
    finally:
        server.thaw()
    fence.renew(token)
    fence.release(token)


def test_blocked_acquire_hands_off_to_waiting_thread(redis_client: redis.Redis) -> None:
    fence = RedisFence(redis_client, "handoff", ttl=30)
    woken_only(fence)  # between attempts it waits longer than the test: only a hand-off serves it
    token = fence.acquire()
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(fence.acquire()), daemon=True)
    waiter.start()
    queue = "fencing:{handoff}:queue"
    wait_until(lambda: redis_client.llen(queue) == 1, "the waiter queues")
    assert not got
    fence.release(token)
    joined(waiter)
    assert got and got[0] > token


def test_wait_is_cut_below_the_client_socket_timeout(redis_server: RedisServer) -> None:
    """A wait longer than the socket timeout blocks for half of it, then returns (an
    uncut BLPOP would fail with the client's TimeoutError, a looped one take an hour)."""
    client = redis.Redis(port=redis_server.port, socket_timeout=4)
    fence = RedisFence(client, "sockwait", ttl=30)
    token = fence.acquire()
    issuer = fence.issuer
    assert isinstance(issuer, RedisIssuer)
    woke: list[int | None] = []
    waiting = threading.Thread(
        target=lambda: woke.append(issuer.await_handoff("sockwait", "w", 3600)), daemon=True
    )
    waiting.start()
    joined(waiting)
    assert woke == [None]  # cut, returned, nothing handed over
    with pytest.raises(fencing.AcquireTimeout):
        RedisFence(client, "sockwait").acquire(timeout=1.2)
    fence.release(token)
    client.close()


def test_hold_keeps_renewing_and_reports_loss(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="fencing")
    fence = RedisFence(redis_client, "hold", ttl=5)
    lease = keys("hold")[0]
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost), hold as token:
        renewals, last = 0, redis_client.pttl(lease)

        def renewed_twice() -> bool:
            nonlocal renewals, last
            left = redis_client.pttl(lease)
            renewals += left > last  # only a renewal moves the expiry later
            last = left
            return renewals >= 2

        wait_until(renewed_twice, "the renewer renews the lease twice")
        assert not hold.lost
        value = redis_client.get(lease)
        assert isinstance(value, bytes) and value.startswith(b"%d:" % token)
        redis_client.delete(lease)  # the lease vanishes under the holder
        wait_until(lambda: hold.lost, "the renewal finds the lease lost")
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


#: ``counter_idle`` values ``RedisFence`` refuses (its own argument: no contract has it).
BAD_IDLES = [(True, TypeError), ("1", TypeError), (-1, ValueError), (0, ValueError)]


def test_bad_input_is_refused_before_any_io() -> None:
    """``RedisFence``'s own arguments (the client, ``counter_idle``) refused before any
    I/O; the arguments every fence takes are ``FenceContract``'s bad-input checks."""
    # Nothing listens on this port: any I/O would raise FenceUnavailable instead.
    client = failing_fast(free_port(), 0.2)
    for idle, error in BAD_IDLES:
        with pytest.raises(error):
            RedisFence(client, "x", counter_idle=idle)  # type: ignore[arg-type]
    for wrong in ("redis://localhost", None, redis.asyncio.Redis(port=1)):
        with pytest.raises(TypeError):
            RedisFence(wrong, "x")  # type: ignore[arg-type]
    fence = RedisFence(client, "x")
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
