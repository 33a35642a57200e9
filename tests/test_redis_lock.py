"""FencedLock: redis-py's Lock API, drop-in via ``lock_class=``, plus fence tokens.

redis-py's own lock tests run against it in ``scripts/peer-suite.sh``; these are the
promises of our own: tokens, hand-off, the keys beside the lock, checked arguments.
"""

from __future__ import annotations

import functools
import gc
import math
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis
from fail_fast import failing_fast
from interrupts import interrupt_at_call, interrupt_before_a_reply
from redis.exceptions import LockError, LockNotOwnedError
from waiting import NEVER, joined, wait_until

import fencing
from fencing import FencedLock, RedisFence
from fencing.testing.servers import RedisServer, free_port

LEASE = "invoice:42"  # the lock's own key, as redis-py keeps it
COUNTER = "fencing:{invoice:42}:counter"


def lock(client: redis.Redis, name: str = "invoice:42", **kwargs: object) -> FencedLock:
    made = client.lock(name, lock_class=FencedLock, **kwargs)  # type: ignore[arg-type]
    assert isinstance(made, FencedLock) and isinstance(made, redis.lock.Lock)
    return made


def test_acquire_release_locked_owned_and_fence_token(redis_client: redis.Redis) -> None:
    first = lock(redis_client, timeout=10)
    assert first.fence_token is None and not first.locked() and not first.owned()
    assert first.acquire(blocking=False) is True
    token = first.fence_token
    assert isinstance(token, fencing.FenceToken) and token.name == "invoice:42"
    assert first.locked() and first.owned()
    assert redis_client.get(LEASE) == first.local.token
    assert redis_client.get(COUNTER) == b"%d" % token
    assert 0 < redis_client.pttl(LEASE) <= 10_000
    other = lock(redis_client, timeout=10)
    assert other.acquire(blocking=False) is False
    assert other.locked() and not other.owned() and other.fence_token is None
    first.release()
    assert first.fence_token is None and not first.locked()
    assert redis_client.get(LEASE) is None
    assert other.acquire(blocking=False)
    assert other.fence_token is not None and other.fence_token > token
    other.release()


def test_shares_the_token_counter_with_redis_fence_not_the_lease(
    redis_client: redis.Redis,
) -> None:
    fence = RedisFence(redis_client, "invoice:42", ttl=10)
    held = fence.acquire()
    the_lock = lock(redis_client, timeout=10)
    assert the_lock.acquire(blocking=False) is True  # another lease: no exclusion
    locked_token = the_lock.fence_token
    assert locked_token is not None and locked_token > held
    fence.release(held)
    assert fence.acquire(timeout=0) > locked_token  # one counter: tokens still increase
    assert the_lock.owned()
    the_lock.release()


def test_no_timeout_means_no_expiry(redis_client: redis.Redis) -> None:
    forever = lock(redis_client)
    assert forever.acquire()
    assert redis_client.pttl(LEASE) == -1
    with pytest.raises(LockError):
        forever.extend(5)
    with pytest.raises(LockError):
        forever.reacquire()
    forever.release()


def test_user_token_and_decoded_client(redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port, decode_responses=True)
    named = lock(client, "decoded", timeout=5)
    assert named.acquire(token="mine")
    assert named.local.token == b"mine" and client.get("decoded") == "mine"
    assert named.fence_token is not None
    assert named.owned() is True
    named.release()
    assert named.owned() is False
    client.close()


def test_expired_lock_cannot_be_released_or_extended(redis_client: redis.Redis) -> None:
    short = lock(redis_client, timeout=0.05)
    short.acquire()
    wait_until(lambda: redis_client.exists(LEASE) == 0, "the short lock expires")
    newer = lock(redis_client, timeout=60)
    assert newer.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        short.extend(1)
    with pytest.raises(LockNotOwnedError):
        short.reacquire()
    with pytest.raises(LockNotOwnedError):
        short.release()
    assert newer.owned() and redis_client.pttl(LEASE) > 30_000  # untouched
    with pytest.raises(LockError):
        short.release()  # not held any more: redis-py's LockError
    newer.release()


def test_extend_adds_or_replaces_and_reacquire_resets(redis_client: redis.Redis) -> None:
    held = lock(redis_client, timeout=100)
    held.acquire()
    assert held.extend(100) is True
    assert 150_000 < redis_client.pttl(LEASE) <= 200_000
    assert held.extend(50, replace_ttl=True) is True
    assert 25_000 < redis_client.pttl(LEASE) <= 50_000
    assert held.reacquire() is True
    assert 50_000 < redis_client.pttl(LEASE) <= 100_000
    held.release()


def test_blocking_timeout_and_context_manager(redis_client: redis.Redis) -> None:
    holder = lock(redis_client, timeout=10)
    holder.acquire()
    waiter = lock(redis_client, timeout=10, blocking_timeout=0.2)
    assert waiter.acquire() is False  # (that it waits, and is woken, is checked below)
    with pytest.raises(LockError):
        waiter.__enter__()
    holder.release()
    with waiter as entered:
        assert entered is waiter and waiter.owned()
    assert not waiter.locked()


def test_waiter_is_woken_by_release_not_by_sleep(redis_client: redis.Redis) -> None:
    holder = lock(redis_client, timeout=30, thread_local=False)
    holder.acquire()
    # a poller would sleep longer than the test waits: only the release can wake it
    waiter = lock(redis_client, timeout=30, sleep=NEVER)
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(waiter.acquire()), daemon=True)
    thread.start()
    queue = "fencing:{invoice:42}:lock:queue"
    wait_until(lambda: redis_client.llen(queue) == 1, "the waiter queues")
    holder.release()
    joined(thread)
    assert result == [True]


def test_thread_local_tokens(redis_client: redis.Redis) -> None:
    shared = lock(redis_client, timeout=10)
    shared.acquire()
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(shared.fence_token))
    worker.start()
    joined(worker)
    assert seen == [None]  # another thread does not see this thread's lease
    shared.release()
    passed = lock(redis_client, timeout=10, thread_local=False)
    passed.acquire()
    token = passed.fence_token
    worker = threading.Thread(target=passed.release)  # released by another thread
    worker.start()
    joined(worker)
    assert token is not None and not passed.locked()


def test_script_flush_and_redis_errors_pass_through(redis_factory: object) -> None:
    server: RedisServer = redis_factory()  # type: ignore[operator]
    client = failing_fast(server.port)
    held = lock(client, "flush", timeout=10)
    held.acquire()
    client.script_flush()
    held.extend(1)
    client.script_flush()
    held.release()
    server.stop()
    with pytest.raises(redis.exceptions.ConnectionError):  # redis-py's own error
        held.acquire(blocking=False)
    client.close()


def test_bad_input_is_refused_before_any_io() -> None:
    client = failing_fast(free_port(), 0.2)
    with pytest.raises(TypeError):
        FencedLock("not a client", "x")
    with pytest.raises(TypeError):
        lock(client, b"bytes-name")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        lock(client, "")
    cases: list[tuple[dict[str, Any], type[Exception]]] = [
        ({"timeout": -1}, ValueError),
        ({"timeout": "10"}, TypeError),
        ({"timeout": True}, TypeError),
        ({"sleep": -1}, ValueError),
        ({"sleep": None}, TypeError),
        ({"blocking_timeout": "1"}, TypeError),
    ]
    for kwargs, error in cases:
        with pytest.raises(error):
            lock(client, "x", **kwargs)
    made = lock(client, "x", timeout=5)
    with pytest.raises(ValueError):
        made.acquire(blocking_timeout=-1)
    with pytest.raises(TypeError):
        made.acquire(sleep="1")  # type: ignore[arg-type]
    with pytest.raises(redis.exceptions.ConnectionError):  # only now does it do I/O
        made.acquire(blocking=False)


def test_sleep_is_a_finite_number_of_seconds_and_its_errors_say_so() -> None:
    """``sleep`` is no timeout: ``math.inf`` does not mean "for ever" (the waiter would
    never try again); the messages name ``sleep``, never a ``timeout`` or ``None``."""
    client = redis.Redis(port=free_port(), socket_connect_timeout=1)
    for bad in (math.inf, -math.inf, math.nan, -0.5):
        with pytest.raises(ValueError, match=r"^sleep must be a finite number of seconds >= 0"):
            lock(client, "x", sleep=bad)
    with pytest.raises(TypeError, match=r"^sleep must be a number of seconds, not NoneType$"):
        lock(client, "x", sleep=None)
    made = lock(client, "x", timeout=5, sleep=0)  # 0 is fine: poll without pausing
    with pytest.raises(ValueError, match=r"^sleep must be a finite .* got inf$"):
        made.acquire(sleep=math.inf)  # refused before any I/O (no server on that port)


def test_queued_waiters_leave_the_lock_value_bare_and_are_handed_the_lock(
    redis_client: redis.Redis,
) -> None:
    holder = lock(redis_client, timeout=30)
    assert holder.acquire(blocking=False)
    first = holder.fence_token
    waiter = lock(redis_client, timeout=30, sleep=20, thread_local=False)
    thread = threading.Thread(target=waiter.acquire, daemon=True)
    thread.start()
    queue = "fencing:{invoice:42}:lock:queue"
    wait_until(lambda: redis_client.llen(queue) == 1, "the waiter queues")  # for the hand-off...
    assert redis_client.get(LEASE) == holder.local.token  # ...without marking the value
    assert holder.owned() and holder.extend(1)
    holder.release()  # hands the lock over: the waiter holds it with a fresh token
    joined(thread)
    assert redis_client.get(LEASE) == waiter.local.token
    assert first is not None and waiter.fence_token is not None and waiter.fence_token > first
    assert redis_client.llen(queue) == 0
    waiter.release()
    assert redis_client.get(LEASE) is None


def test_a_redis_fence_release_never_hands_its_lease_to_a_lock_waiter(
    redis_client: redis.Redis,
) -> None:
    fence = RedisFence(redis_client, "invoice:42", ttl=30)
    holder = lock(redis_client, timeout=30)
    assert holder.acquire(blocking=False)
    waiter = lock(redis_client, timeout=30, sleep=0.05)
    assert waiter.acquire(blocking_timeout=0.2) is False  # it queued, then left
    fence.release(fence.acquire(timeout=0))
    assert redis_client.get(LEASE) == holder.local.token and waiter.fence_token is None
    holder.release()


def interrupt_after(seconds: float, call: Callable[[], object]) -> bool:
    """Run ``call`` with a KeyboardInterrupt due after ``seconds``; True if it landed in
    ``call`` (or just after it, before the alarm was disarmed).

    The garbage collector is off meanwhile: an interrupt that lands in a gc callback
    (Hypothesis installs one in every worker that ran a state machine) is printed and
    dropped by Python, and the call then ran to its end as if never interrupted."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    collecting = gc.isenabled()
    gc.disable()
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        call()
        signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        return True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if collecting:
            gc.enable()
    return False


DELAYS = [0.0002 * 1.5**i for i in range(16)]  # 0.2 ms .. 88 ms: before, in and after calls


def test_an_interrupted_acquire_leaves_no_orphan_lock_and_no_place_in_the_queue(
    redis_client: redis.Redis,
) -> None:
    """An interrupt at each call into ``fencing`` of an acquire in turn, uncontended (a
    lost reply may have taken the lock, a grant may not be recorded yet) and contended
    (the waiter queued), then at growing delays into a blocked waiter's waits: no lock
    and no place in the queue is left behind, and ``local`` never names a lock given back.

    (A sweep of delays alone lands where the clock happens to: on a busy machine once in
    the gap between the grant and its record, which then leaked the lock.)"""
    queue = ("fencing:{invoice:42}:lock:queue", "fencing:{invoice:42}:lock:waiting")
    point = 0
    while True:  # uncontended, until an acquire finishes before the point comes
        point += 1
        mine = lock(redis_client, timeout=30)
        landed = interrupt_at_call(point, mine.acquire)
        if not landed:
            assert mine.owned()
            mine.release()
            break
        assert mine.local.token is None, f"local names a lock given back (call {point})"
        assert redis_client.get(LEASE) is None, f"an orphan lock (interrupt at call {point})"
    assert point > 5  # the sweep went through the acquire
    holder = lock(redis_client, timeout=30)
    for point in range(1, 41):  # contended: the waiter queues, blocks, tries again...
        assert holder.acquire(blocking=False)
        waiter = lock(redis_client, timeout=30)
        assert interrupt_at_call(point, functools.partial(waiter.acquire, blocking_timeout=20))
        assert redis_client.exists(*queue) == 0, f"still queued (interrupt at call {point})"
        holder.release()  # nobody to hand it to
        assert redis_client.get(LEASE) is None
    for delay in DELAYS:  # and in the middle of its waits (BLPOP) or between them
        assert holder.acquire(blocking=False)
        waiter = lock(redis_client, timeout=30)
        assert interrupt_after(delay, functools.partial(waiter.acquire, blocking_timeout=20))
        assert redis_client.exists(*queue) == 0, f"still queued after {delay * 1000:.1f} ms"
        holder.release()
        assert redis_client.get(LEASE) is None


@pytest.mark.parametrize("step", ["acquire", "release"])
def test_an_interrupt_between_a_command_and_its_reply_leaves_no_reply_for_the_next_call(
    redis_client: redis.Redis, step: str
) -> None:
    """redis-py pools a connection stopped between sending and reading: without care its
    next command would read the old reply (a stale ``Busy`` taken as the answer to the
    waiter's leaving, a stale integer as anything)."""
    holder = lock(redis_client, timeout=30)
    with holder:  # loads the scripts: the interrupted call is the script's EVALSHA
        pass
    assert holder.acquire(blocking=False)
    if step == "acquire":
        waiter = lock(redis_client, timeout=30)
        interrupt_before_a_reply(functools.partial(waiter.acquire, blocking_timeout=20))
        assert redis_client.exists("fencing:{invoice:42}:lock:queue") == 0
        assert redis_client.ping() is True
        holder.release()
    else:
        interrupt_before_a_reply(holder.release)
        assert redis_client.ping() is True
    assert redis_client.get(LEASE) is None
    assert redis_client.incr("unrelated") == 1


def test_the_lock_issuer_inspects_and_force_releases_the_lock_not_the_fence(
    redis_client: redis.Redis,
) -> None:
    """A ``FencedLock``'s issuer reports and ends the lock (its own key), never the lease
    of a ``RedisFence`` of the same name, which is another key."""
    from fencing.redis._lock import LockIssuer

    held = lock(redis_client, timeout=30, thread_local=False)
    assert held.acquire(blocking=False)
    fence = RedisFence(redis_client, LEASE, ttl=30)
    fence_token = fence.acquire(timeout=0)  # shares the counter, not the lease
    issuer = LockIssuer(redis_client, held._flows)
    status = issuer.status(LEASE)
    value = redis_client.get(LEASE)
    assert isinstance(value, bytes) and status.held and status.holder == value.decode()
    assert status.token is None and status.last_token == fence_token
    ended = issuer.force_release(LEASE)
    assert ended.held and ended.holder == status.holder and redis_client.get(LEASE) is None
    assert not held.owned()
    fence.renew(fence_token)  # the fence's lease was not touched
    fence.release(fence_token)
