"""``FencedLock``: a drop-in for redis-py's ``Lock`` that also issues fence tokens.

``r.lock("invoice:42", timeout=10, lock_class=fencing.FencedLock)`` behaves like
``redis.lock.Lock`` (acquire/release/extend/reacquire/locked/owned, blocking,
blocking_timeout, sleep, thread_local, the context manager, ``LockError`` and
``LockNotOwnedError``, and redis-py's own connection errors) and adds
``lock.fence_token``. It runs the very scripts and keys of ``RedisFence``, so a
``FencedLock`` and a ``RedisFence`` on one name exclude each other and share a token
counter. Imports the Redis issuer helpers and redis-py.
"""

from __future__ import annotations

from typing import Any, Literal

from redis.exceptions import LockNotOwnedError
from redis.lock import Lock

from .._core import SYSTEM_CLOCK, millis, new_holder_id, pause_with
from .._errors import AcquireTimeout
from .._protocol import Calls, TryAcquire, Waiting, acquire_sync, first_attempt
from .._token import FenceToken
from .._validate import check_name, check_timeout, check_ttl
from ._issuer import SYNC_CLIENTS, RedisIssuer, check_client
from ._scripts import DEFAULT_COUNTER_IDLE, lease_key, lease_value


class FencedLock(Lock):
    """redis-py's ``Lock``, granted by the fencing scripts, with ``fence_token``.

    Differences from ``redis.lock.Lock``, all compatible:

    - the lock's key is ``fencing:{<name>}:lease`` (``name`` must be a ``str``), and it
      holds ``b"<fence token>:<lock token>"``; ``lock.local.token`` is that value;
    - a blocked ``acquire`` is handed the lock by the holder's release (it queues and
      BLPOPs its own wake key, as ``RedisFence`` does) instead of sleeping ``sleep``
      seconds between attempts; ``sleep`` still bounds each wait;
    - ``timeout``, ``sleep`` and ``blocking_timeout`` are checked: a bad value raises
      ``TypeError``/``ValueError`` at once.

    ``fence_token`` is the ``FenceToken`` of this thread's (or, with
    ``thread_local=False``, this object's) acquisition, or ``None`` when not held. It
    stays set after the lease expires on the server: pass it to the resource, whose
    guard is what rejects a write made after expiry.
    """

    #: How long a token counter survives without acquisitions (see ``RedisFence``).
    counter_idle: float | None = DEFAULT_COUNTER_IDLE

    def __init__(self, redis: Any, name: str, *args: Any, **kwargs: Any) -> None:
        check_client(redis, SYNC_CLIENTS, "redis.Redis")
        check_name(name)
        super().__init__(redis, name, *args, **kwargs)
        if self.timeout is not None:
            check_ttl(self.timeout, "timeout")
        self.sleep = _check_sleep(self.sleep)
        check_timeout(self.blocking_timeout)
        self._ttl_ms = 0 if self.timeout is None else millis(self.timeout)
        self._issuer = _LockIssuer(redis, counter_idle=self.counter_idle)
        self._calls = Calls(self._issuer, self.name, pause_with(SYSTEM_CLOCK))
        self._waiting = _waiting(self.sleep)

    def register_scripts(self) -> None:
        """Nothing to register: the fencing scripts are sent by SHA, loaded on NOSCRIPT."""

    @property
    def fence_token(self) -> FenceToken | None:
        """The fence token of the current acquisition, ``None`` when not held."""
        value = getattr(self.local, "token", None)
        if value is None:
            return None
        return FenceToken(int(value.split(b":", 1)[0]), self.name)

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """Take the lock; True once held. See ``redis.lock.Lock.acquire``.

        A blocked attempt queues for a direct hand-off from the holder's release and
        waits at most ``sleep`` seconds (or until the lease expires) for it before it
        tries again.
        """
        sleep = self.sleep if sleep is None else _check_sleep(sleep)
        blocking = self.blocking if blocking is None else blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        else:
            check_timeout(blocking_timeout)
        holder = self._holder(new_holder_id() if token is None else token)
        waiting = self._waiting if sleep == self.sleep else _waiting(sleep)
        timeout = blocking_timeout if blocking else 0
        first = first_attempt(holder, self._ttl_ms, timeout, waiting)
        try:
            granted = acquire_sync(self.name, first, timeout, waiting, self._calls)
        except AcquireTimeout:
            return False
        self.local.token = lease_value(granted, holder)
        return True

    def do_acquire(self, token: str | bytes) -> bool:
        """One attempt with holder ``token`` (redis-py's hook); sets ``local.token``."""
        holder = self._holder(token)
        attempt = TryAcquire(holder, self._ttl_ms)
        attempt.perform(self._calls)
        if not isinstance(attempt.result, int):
            return False
        self.local.token = lease_value(attempt.result, holder)
        return True

    def _holder(self, token: str | bytes) -> str:
        """redis-py's lock token as a holder id: its bytes, as latin-1 (see ``holder_bytes``)."""
        encoded: bytes = self.redis.get_encoder().encode(token)
        return encoded.decode("latin-1")

    def locked(self) -> bool:
        """True if anyone holds the lock."""
        return bool(self.redis.exists(lease_key(self.name)))

    def owned(self) -> bool:
        """True if this lock (this thread, with ``thread_local``) holds it right now."""
        mine = getattr(self.local, "token", None)
        if mine is None:
            return False
        stored = self.redis.get(lease_key(self.name))
        if isinstance(stored, str):
            stored = self.redis.get_encoder().encode(stored)
        return stored in (mine, b"+" + mine)  # "+": marked while waiters queue

    def do_release(self, expected_token: str | bytes) -> None:
        value = self.redis.get_encoder().encode(expected_token)
        if not self._issuer.result_of(self._issuer.steps.release_value(self.name, value)):
            raise LockNotOwnedError(
                "Cannot release a lock that's no longer owned", lock_name=self.name
            )

    def do_extend(self, additional_time: float, replace_ttl: bool) -> Literal[True]:
        seconds = check_ttl(additional_time, "additional_time")
        self._renew(millis(seconds), add=not replace_ttl, what="extend")
        return True

    def do_reacquire(self) -> Literal[True]:
        self._renew(self._ttl_ms, add=False, what="reacquire")
        return True

    def _renew(self, ms: int, *, add: bool, what: str) -> None:
        step = self._issuer.steps.extend(self.name, self.local.token, ms, add=add, what=what)
        if not self._issuer.result_of(step):
            raise LockNotOwnedError(
                f"Cannot {what} a lock that's no longer owned", lock_name=self.name
            )


class _LockIssuer(RedisIssuer):
    """The Redis issuer as ``FencedLock`` needs it: redis-py's errors pass unchanged."""

    wrapped = ()


def _waiting(sleep: float) -> Waiting:
    """How a ``FencedLock`` waits: hand-offs, each wait at most ``sleep`` seconds."""
    return Waiting(True, False, SYSTEM_CLOCK.monotonic, max_block=sleep)


def _check_sleep(sleep: object) -> float:
    seconds = check_timeout(sleep)
    if seconds is None:
        raise TypeError("sleep must be a number of seconds, not None")
    return seconds
