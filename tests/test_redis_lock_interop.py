"""A rolling migration: ``redis.lock.Lock`` and ``FencedLock`` on one name exclude each other.

Both keep the lease under the lock's own name, holding the bare lock token, so each
sees the other's lease as held, and each one's release (a compare-and-delete of its own
token) leaves the other's lease alone. The last test runs processes of both kinds (and
one that switches kind halfway, as a deploy does) against one name and a resource with
an in-Redis overlap detector and a non-atomic counter: no overlap, no lost update.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any

import pytest
import redis
import redis.asyncio
from processes import CONTEXT
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock
from waiting import joined, wait_until

import fencing.aio
from fencing import FencedLock
from fencing.testing.servers import RedisServer

NAME = "invoice:7"


def fenced(client: redis.Redis, **kwargs: object) -> FencedLock:
    made = client.lock(NAME, lock_class=FencedLock, **kwargs)  # type: ignore[arg-type]
    assert isinstance(made, FencedLock)
    return made


def old(client: redis.Redis, **kwargs: object) -> Lock:
    made = client.lock(NAME, **kwargs)  # type: ignore[arg-type]
    assert type(made) is Lock
    return made


def test_an_old_lock_excludes_a_fenced_lock(redis_client: redis.Redis) -> None:
    held = old(redis_client, timeout=10)
    assert held.acquire(blocking=False)
    new = fenced(redis_client, timeout=10, sleep=0.05)
    assert new.locked() and not new.owned()
    assert new.acquire(blocking=False) is False
    assert new.acquire(blocking_timeout=0.2) is False  # queued meanwhile; left the queue
    with pytest.raises(LockError):
        new.release()  # never held
    assert redis_client.get(NAME) == held.local.token
    held.release()
    assert new.acquire(blocking=False) is True
    assert redis_client.get(NAME) == new.local.token
    assert redis_client.exists("fencing:{invoice:7}:lock:queue") == 0
    new.release()


def test_a_fenced_lock_excludes_an_old_lock(redis_client: redis.Redis) -> None:
    held = fenced(redis_client, timeout=10)
    assert held.acquire(blocking=False)
    previous = old(redis_client, timeout=10, sleep=0.05)
    assert previous.locked() and not previous.owned()
    assert previous.acquire(blocking=False) is False
    assert previous.acquire(blocking_timeout=0.2) is False
    with pytest.raises(LockError):
        previous.release()
    held.release()
    assert previous.acquire(blocking=False) is True
    assert held.acquire(blocking=False) is False
    previous.release()


def test_neither_release_frees_the_others_lease(redis_client: redis.Redis) -> None:
    # the old lock's lease expires and a FencedLock takes the name ...
    stale_old = old(redis_client, timeout=0.05)
    assert stale_old.acquire(blocking=False)
    wait_until(lambda: redis_client.exists(NAME) == 0, "the old lock's lease expires")
    new = fenced(redis_client, timeout=60)
    assert new.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):  # ... and the old holder wakes up
        stale_old.extend(1)
    with pytest.raises(LockNotOwnedError):
        stale_old.reacquire()
    with pytest.raises(LockNotOwnedError):
        stale_old.release()
    assert new.owned() and redis_client.pttl(NAME) > 30_000
    new.release()
    # and the other way round
    stale_new = fenced(redis_client, timeout=0.05)
    assert stale_new.acquire(blocking=False)
    wait_until(lambda: redis_client.exists(NAME) == 0, "the fenced lock's lease expires")
    taker = old(redis_client, timeout=60)
    assert taker.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        stale_new.extend(1)
    with pytest.raises(LockNotOwnedError):
        stale_new.release()
    assert taker.owned() and redis_client.pttl(NAME) > 30_000
    taker.release()


def wait_for(lock: Lock, got: list[bool]) -> None:
    got.append(lock.acquire(blocking_timeout=20))


def tried(client: redis.Redis, name: str) -> bool:
    """Whether the connection named ``name`` sent the server more than its name."""
    commands = [seen["cmd"] for seen in client.client_list() if seen["name"] == name]
    return bool(commands) and commands[0] != "client|setname"


def test_blocked_waiters_of_either_kind_get_the_lock(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    """The holder releases once the waiter's connection has tried (the server saw an
    acquire from it, not only its ``CLIENT SETNAME``); the release then finds the lock
    still the holder's (``LockNotOwnedError`` otherwise), and hands it to the waiter."""
    for holder_kind, waiter_kind in ((old, fenced), (fenced, old)):
        holder = holder_kind(redis_client, timeout=10)
        assert holder.acquire(blocking=False)
        name = f"waiter-{waiter_kind.__name__}"
        with redis.Redis(port=redis_server.port, client_name=name) as own:
            waiter = waiter_kind(own, timeout=10, sleep=0.02, thread_local=False)
            got: list[bool] = []
            thread = threading.Thread(target=wait_for, args=(waiter, got), daemon=True)
            thread.start()
            wait_until(partial(tried, redis_client, name), "the waiter tries while it is held")
            holder.release()
            joined(thread)
            assert got == [True] and waiter.owned()
            waiter.release()


async def test_asyncio_locks_of_every_kind_exclude_each_other(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    client = redis.asyncio.Redis(port=redis_server.port)
    try:
        kinds: list[Callable[[], Any]] = [
            lambda: client.lock(NAME, timeout=10),  # redis.asyncio.lock.Lock
            lambda: client.lock(NAME, timeout=10, lock_class=fencing.aio.FencedLock),
        ]
        for make_holder in kinds:
            holder = make_holder()
            assert await holder.acquire(blocking=False)
            for make_other in kinds:
                assert await make_other().acquire(blocking=False) is False
            assert fenced(redis_client).acquire(blocking=False) is False
            assert old(redis_client).acquire(blocking=False) is False
            await holder.release()
        assert await client.get(NAME) is None
    finally:
        await client.aclose()


# -- the rolling migration ---------------------------------------------------------------

HOLDERS = "resource:holders"  # INCR on entry, DECR on exit: above 1 means two holders
OVERLAPS = "resource:overlaps"
COUNTER = "resource:counter"  # read, pause, write: concurrent holders lose updates
TOKENS = "resource:tokens"  # the fence tokens of FencedLock holders, in grant order
ROUNDS = 40


def hammer(port: int, kinds: str, rounds: int) -> int:
    """Take the lock ``rounds`` times, with the kind ``kinds[i * len(kinds) // rounds]``
    ("o" redis.lock.Lock, "f" FencedLock): "of" is a process redeployed halfway."""
    client = redis.Redis(port=port)
    for i in range(rounds):
        kind = kinds[i * len(kinds) // rounds]
        lock_class = FencedLock if kind == "f" else Lock
        lock = client.lock(NAME, timeout=30, sleep=0.002, lock_class=lock_class)
        assert lock.acquire(blocking_timeout=120)
        if client.incr(HOLDERS) != 1:
            client.incr(OVERLAPS)
        if isinstance(lock, FencedLock):
            client.rpush(TOKENS, int(lock.fence_token or 0))
        value = int(client.get(COUNTER) or 0)
        time.sleep(0.001)
        client.set(COUNTER, value + 1)
        client.decr(HOLDERS)
        lock.release()
    client.close()
    return rounds


def test_a_rolling_migration_never_has_two_holders(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    plan = ["o", "f", "of", "fo"]  # old, new, redeployed old -> new, and a rollback
    with ProcessPoolExecutor(len(plan), mp_context=CONTEXT) as processes:
        runs = [processes.submit(hammer, redis_server.port, kinds, ROUNDS) for kinds in plan]
        total = sum(run.result(timeout=600) for run in runs)
    assert total == len(plan) * ROUNDS
    assert int(redis_client.get(OVERLAPS) or 0) == 0
    assert int(redis_client.get(COUNTER) or 0) == total  # no update lost
    tokens = [int(t) for t in redis_client.lrange(TOKENS, 0, -1)]
    assert len(tokens) == 2 * ROUNDS  # "f", half of "of", half of "fo"
    assert tokens == sorted(set(tokens))  # strictly increasing in grant order
    assert redis_client.get(NAME) is None
