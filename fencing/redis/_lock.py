"""``FencedLock``: a drop-in for redis-py's ``Lock`` that also issues fence tokens.

``r.lock("invoice:42", timeout=10, lock_class=fencing.FencedLock)`` behaves like
``redis.lock.Lock`` (acquire/release/extend/reacquire/locked/owned, blocking,
blocking_timeout, sleep, thread_local, the context manager, ``LockError`` and
``LockNotOwnedError``, and redis-py's own connection errors) and adds
``lock.fence_token``.

Its lease is the lock's own key, holding the lock token exactly as redis-py's ``Lock``
keeps it, so during a rolling migration a ``redis.lock.Lock`` and a ``FencedLock`` on
one name exclude each other, and either one's release leaves the other's lease alone.
The token counter lives beside it, under ``key_prefix(name)`` (see ``_scripts``): the
same counter as a ``RedisFence`` of that name, whose lease is another key, so the two
share tokens but do not exclude each other.

``BaseFencedLock`` is everything but I/O, shared with the asyncio lock (``_async_lock``):
arguments, keys, the plan of an acquire (run by ``_protocol``'s one acquire flow), the
fence token and what a lost lock forgets; redis-py's hooks (``do_acquire``,
``do_release``, ``do_extend``, ``do_reacquire``) are a line or two on it, each side. The
lock's operations are ``LockFlows`` (``_flows``), run by the Redis issuer's drivers
(``LockIssuer``, ``AsyncLockIssuer``). Imports the core's protocol, the Redis flows,
issuers, clients and scripts, redis-py.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import redis.lock
from redis.exceptions import LockNotOwnedError

from .._base.errors import AcquireTimeout
from .._base.flow import Flow, run_sync
from .._base.token import FenceToken
from .._base.validate import check_name, check_timeout, check_ttl
from .._lease.core import millis, new_holder_id
from .._lease.protocol import (
    Calls,
    Op,
    Release,
    Waiting,
    acquire_sync,
    first_queue_millis,
    leave_queue,
)
from ..issuer import Busy
from ._clients import SYNC_CLIENTS, check_client, client_encoder, socket_timeout_of
from ._flows import LockFlows
from ._issuer import AsyncRedisIssuer, RedisIssuer
from ._scripts import DEFAULT_COUNTER_IDLE, Call, holder_bytes, lock_keys


class LockIssuer(RedisIssuer):
    """The Redis issuer as a ``FencedLock`` needs it: its flows; redis-py's errors pass."""

    wrapped = ()

    def __init__(self, client: Any, flows: LockFlows) -> None:
        self.client = client
        self.flows = flows
        self.direct = True


class AsyncLockIssuer(AsyncRedisIssuer):
    """``LockIssuer`` on ``redis.asyncio``: redis-py's errors pass unchanged."""

    wrapped = ()

    def __init__(self, client: Any, flows: LockFlows) -> None:
        self.client = client
        self.flows = flows
        self.direct = True
        self._ready = None


class BaseFencedLock:
    """What the blocking and the asyncio ``FencedLock`` share: everything but I/O.

    A mixin placed before redis-py's ``Lock`` class; the subclass names its clients.
    """

    #: How long a token counter survives without acquisitions (see ``RedisFence``).
    counter_idle: float | None = DEFAULT_COUNTER_IDLE
    _clients: tuple[type, ...]
    _client_kind: str
    #: Who owns a reentrant acquisition: the thread (blocking) or the task (asyncio).
    _owner: Callable[[], object]
    #: The clock of the redis-py ``Lock`` it replaces (see ``_redis_py_clock``).
    _clock: Callable[[], float]
    # set by redis-py's Lock.__init__
    redis: Any
    name: Any  # a str: checked
    timeout: float | None
    sleep: float
    blocking: bool
    blocking_timeout: float | None
    local: Any

    def __init__(
        self, redis: Any, name: str, *args: Any, reentrant: bool = False, **kwargs: Any
    ) -> None:
        check_client(redis, self._clients, self._client_kind)
        check_name(name)
        if not isinstance(reentrant, bool):
            raise TypeError(f"reentrant must be a bool, not {type(reentrant).__name__}")
        self.reentrant = reentrant
        super().__init__(redis, name, *args, **kwargs)  # type: ignore[call-arg]
        if self.timeout is not None:
            check_ttl(self.timeout, "timeout")
        self.sleep = _check_sleep(self.sleep)
        check_timeout(self.blocking_timeout)
        self.local.fence = None
        self._ttl_ms = 0 if self.timeout is None else millis(self.timeout)
        self._encode = client_encoder(redis).encode
        keys = lock_keys(name, self._encode)
        self._flows = LockFlows(keys, self.counter_idle, socket_timeout_of(redis))
        self._waiting = self._waiting_for(self.sleep)

    @property
    def fence_token(self) -> FenceToken | None:
        """The fence token of the current acquisition, ``None`` when not held.

        It stays set after the lease expired on the server: pass it to the resource,
        whose guard is what rejects a write made after the expiry.
        """
        if getattr(self.local, "token", None) is None:
            return None
        fence: int | None = getattr(self.local, "fence", None)
        return None if fence is None else FenceToken(fence, self.name)

    def extend(self, additional_time: float, replace_ttl: bool = False) -> Any:
        """Add (or, with ``replace_ttl``, set) ``additional_time`` seconds; redis-py's."""
        check_ttl(additional_time, "additional_time")
        return super().extend(additional_time, replace_ttl)  # type: ignore[misc]

    def _plan(
        self,
        sleep: float | None,
        blocking: bool | None,
        blocking_timeout: float | None,
        token: str | bytes | None,
    ) -> tuple[str, float | None, Waiting]:
        """An acquire's holder id, timeout and way of waiting (arguments checked)."""
        waiting = self._waiting if sleep is None else self._waiting_for(_check_sleep(sleep))
        if blocking is None:
            blocking = self.blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        else:
            check_timeout(blocking_timeout)
        holder = new_holder_id() if token is None else self._holder_of(token)
        return holder, blocking_timeout if blocking else 0, waiting

    def _reenter(self, token: str | bytes | None) -> bool:
        """On a reentrant lock that the calling owner holds (with ``token``, if given):
        count one more acquisition and return True. Asks Redis nothing."""
        if not self.reentrant or getattr(self.local, "token", None) is None:
            return False
        if getattr(self.local, "owner", None) != self._owner():
            return False
        if token is not None and self._encode(token) != self.local.token:
            return False
        self.local.depth += 1
        return True

    def _count_down(self) -> bool:
        """On a reentrant lock acquired more than once: count one release down and
        return True (the lock stays held; asks Redis nothing)."""
        if not self.reentrant or getattr(self.local, "depth", 0) <= 1:
            return False
        if getattr(self.local, "token", None) is None:
            return False
        self.local.depth -= 1
        return True

    def _forget(self) -> None:
        """This owner holds nothing any more (released, given back, or found lost)."""
        self.local.token = self.local.fence = self.local.owner = None
        self.local.depth = 0

    @contextlib.contextmanager
    def _forgets_if_lost(self) -> Iterator[None]:
        """Around redis-py's ``do_extend``/``do_reacquire``: when they find the lock gone,
        a reentrant lock forgets its count, so the owner's next ``acquire`` asks Redis
        for a new lease and token."""
        try:
            yield
        except LockNotOwnedError:
            if self.reentrant:
                self._forget()
            raise

    def _holder_of(self, token: str | bytes) -> str:
        """The holder id of lock token ``token`` (latin-1: any bytes pass unchanged)."""
        encoded: bytes = self._encode(token)
        return encoded.decode("latin-1")

    def _abandon_flow(self, holder: str, timeout: float | None, waiting: Waiting) -> Flow[Op, None]:
        """After an acquire stopped by an error mid-call: give back what it may hold.

        An attempt whose reply was lost (a cancelled task, an interrupt) may have taken
        the lock, or queued its waiter; with ``timeout=None`` nothing would ever free it.
        """
        if first_queue_millis(self._ttl_ms, timeout, waiting):
            return leave_queue(holder, self._ttl_ms)
        return _release_flow(holder)

    def _granted(self, holder: str, fence: int | Busy) -> bool:
        """Record an attempt's outcome in ``local``; True if it was granted."""
        if isinstance(fence, Busy):
            return False
        self.local.token = holder_bytes(holder)
        self.local.fence = fence
        self.local.owner = self._owner() if self.reentrant else None
        self.local.depth = 1
        return True

    def _release_call(self, expected_token: str | bytes) -> Call[bool]:
        """The release of the lock held with ``expected_token`` (a hand-off if queued)."""
        return self._flows.release_value(self._encode(expected_token))

    def _not_owned(self) -> LockNotOwnedError:
        return LockNotOwnedError(
            "Cannot release a lock that's no longer owned", lock_name=self.name
        )

    def _waiting_for(self, sleep: float) -> Waiting:
        """Hand-offs (with a ``timeout``), each wait at most ``sleep`` seconds; polling
        every ``sleep`` seconds (without), as redis-py's ``Lock`` does."""
        return Waiting(True, False, self._clock, max_block=sleep, interval=sleep)


def _release_flow(holder: str) -> Flow[Op, None]:
    """Release the lock held by ``holder``, if it is (the lock's release ignores the token)."""
    yield Release(0, holder)


#: redis-py's lock module, whose ``mod_time`` its ``Lock`` reads at each call.
_REDIS_PY_LOCK: Any = redis.lock


def _redis_py_clock() -> float:
    """redis-py's ``Lock`` clock, looked up on each call as redis-py does, so that
    whatever drives redis-py's lock time (its test suite's fake clock) drives ours."""
    now: float = _REDIS_PY_LOCK.mod_time.monotonic()
    return now


def _redis_py_sleep(seconds: float) -> bool:
    """redis-py's ``Lock`` sleep (see ``_redis_py_clock``); never asked to stop."""
    _REDIS_PY_LOCK.mod_time.sleep(seconds)
    return False


class FencedLock(BaseFencedLock, redis.lock.Lock):
    """redis-py's ``Lock``, granted by the fencing scripts, with ``fence_token``.

    Differences from ``redis.lock.Lock``, all compatible:

    - each acquisition also issues a fence token (``fence_token``), strictly larger than
      every token issued for the name before, by a ``FencedLock`` or a ``RedisFence``;
    - a blocked ``acquire`` of a lock with a ``timeout`` is handed the lock by the
      holder's release (it queues and BLPOPs its own wake key, as ``RedisFence`` does)
      instead of sleeping ``sleep`` seconds between attempts; ``sleep`` still bounds
      each wait. Without a ``timeout`` it polls every ``sleep`` seconds, as redis-py;
    - ``name``, ``timeout``, ``sleep`` and ``blocking_timeout`` are checked: a bad value
      raises ``TypeError``/``ValueError`` at once (``name`` must be a ``str``).

    ``fence_token`` is the ``FenceToken`` of this thread's (or, with
    ``thread_local=False``, this object's) acquisition, or ``None`` when not held.

    ``reentrant=True`` (keyword only; through ``r.lock`` as
    ``lock_class=functools.partial(FencedLock, reentrant=True)``): the owner thread's
    second ``acquire`` returns True with the same ``fence_token`` and counts, each
    ``release`` counts down, the lock ends in Redis at the last; neither asks Redis.
    See docs/leadership.md.
    """

    _clients = SYNC_CLIENTS
    _client_kind = "redis.Redis"
    _clock = staticmethod(_redis_py_clock)
    _owner = staticmethod(threading.get_ident)

    def __init__(self, redis: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(redis, name, *args, **kwargs)
        self._issuer = LockIssuer(redis, self._flows)
        self._calls = Calls(self._issuer, name, _redis_py_sleep)

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """Take the lock; True once held. See ``redis.lock.Lock.acquire``."""
        holder, timeout, waiting = self._plan(sleep, blocking, blocking_timeout, token)
        if self._reenter(token):
            return True
        try:
            granted = acquire_sync(holder, self._ttl_ms, timeout, waiting, self._calls)
            # recorded inside the try: an interrupt (a signal handler's exception lands
            # between any two bytecodes) after the grant but before ``local`` knows of
            # it must give the lock back too, or nothing would ever release it
            return self._granted(holder, granted)
        except AcquireTimeout:
            return False
        except BaseException:
            if getattr(self.local, "token", None) == holder_bytes(holder):
                self._forget()  # recorded, then given back
            with contextlib.suppress(Exception):  # best effort: the caller needs the error
                run_sync(self._abandon_flow(holder, timeout, waiting), self._calls)
            raise

    # redis-py's hooks: a line or two on ``BaseFencedLock``'s parts

    def do_acquire(self, token: str | bytes) -> bool:
        holder = self._holder_of(token)
        return self._granted(holder, self._calls.attempt(holder, self._ttl_ms, 0))

    def release(self) -> None:
        """Release the lock; see ``redis.lock.Lock.release``. On a reentrant lock
        acquired more than once, only count down (the lock stays held)."""
        if not self._count_down():
            super().release()

    def do_release(self, expected_token: str | bytes) -> None:
        self._forget()
        if not self._issuer.run(self._release_call(expected_token)):
            raise self._not_owned()

    def do_extend(self, additional_time: float, replace_ttl: bool) -> Any:
        with self._forgets_if_lost():
            return super().do_extend(additional_time, replace_ttl)

    def do_reacquire(self) -> Any:
        with self._forgets_if_lost():
            return super().do_reacquire()


def _check_sleep(sleep: object) -> float:
    """``sleep``: the longest wait between two attempts, a finite number of seconds >= 0.

    Not a timeout: ``None`` and ``math.inf`` do not mean "for ever" here (a waiter that
    sleeps for ever never tries again), so the messages name ``sleep``, not ``timeout``.
    """
    if isinstance(sleep, bool) or not isinstance(sleep, (int, float)):
        raise TypeError(f"sleep must be a number of seconds, not {type(sleep).__name__}")
    if not math.isfinite(sleep) or sleep < 0:
        raise ValueError(
            "sleep must be a finite number of seconds >= 0 (the longest wait between two "
            f"attempts to take the lock), got {sleep!r}"
        )
    return float(sleep)
