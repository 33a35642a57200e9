"""``fencing.aio.FencedLock``: the drop-in for ``redis.asyncio.lock.Lock``.

``await r.lock("invoice:42", timeout=10, lock_class=fencing.aio.FencedLock).acquire()``
behaves like redis-py's asyncio ``Lock`` and adds ``lock.fence_token``. It shares keys,
scripts, the acquire plan and the fence token with the blocking ``FencedLock``
(``_lock.BaseFencedLock``) and runs the same acquire flow, awaited (``acquire_async``).

Cancellation (redis-py issue #3847): a cancelled ``release`` makes sure of its outcome
(it releases again, shielded, to the end) before the cancellation goes on, so the lock
is free (or was not ours) by the time the caller sees ``CancelledError``; a cancelled
``acquire`` gives back the lock or the place in the queue its lost reply may have taken.

Imports the blocking lock's shared parts, the core's protocol and redis-py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

import redis.asyncio.lock
from redis.exceptions import LockError, LockNotOwnedError

from .._base.errors import AcquireTimeout
from .._base.flow import run_async
from .._lease.protocol import AsyncCalls, acquire_async
from ._clients import ASYNC_CLIENTS
from ._lock import AsyncLockIssuer, BaseFencedLock

T = TypeVar("T")


#: redis-py's asyncio lock module, whose ``asyncio`` its ``Lock`` reads at each call.
_REDIS_PY_LOCK: Any = redis.asyncio.lock


def _redis_py_clock() -> float:
    """redis-py's asyncio ``Lock`` clock (the running loop's), looked up on each call as
    redis-py does, so that whatever drives its lock time (its tests' fake) drives ours."""
    now: float = _REDIS_PY_LOCK.asyncio.get_running_loop().time()
    return now


async def _redis_py_sleep(seconds: float) -> bool:
    """redis-py's asyncio ``Lock`` sleep (see ``_redis_py_clock``); never asked to stop."""
    await _REDIS_PY_LOCK.asyncio.sleep(seconds)
    return False


class AsyncFencedLock(BaseFencedLock, redis.asyncio.lock.Lock):
    """redis-py's asyncio ``Lock``, granted by the fencing scripts, with ``fence_token``.

    Everything ``fencing.FencedLock`` says holds here, awaited: the same keys (a
    blocking ``FencedLock``, a ``redis.lock.Lock`` and a ``redis.asyncio.lock.Lock`` on
    the name exclude it), the hand-off, the token counter. Exported as
    ``fencing.aio.FencedLock`` and ``fencing.redis.aio.FencedLock``.
    """

    _clients = ASYNC_CLIENTS
    _client_kind = "redis.asyncio.Redis"
    _clock = staticmethod(_redis_py_clock)
    _owner = staticmethod(asyncio.current_task)

    def __init__(self, redis: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(redis, name, *args, **kwargs)
        self._issuer = AsyncLockIssuer(redis, self._flows)
        self._calls = AsyncCalls(self._issuer, name, _redis_py_sleep)

    async def acquire(
        self,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """Take the lock; True once held. See ``redis.asyncio.lock.Lock.acquire``."""
        holder, timeout, waiting = self._plan(None, blocking, blocking_timeout, token)
        if self._reenter(token):
            return True
        try:
            granted = await acquire_async(holder, self._ttl_ms, timeout, waiting, self._calls)
        except AcquireTimeout:
            return False
        except BaseException:
            with contextlib.suppress(Exception):  # best effort: the caller needs the error
                await finish(run_async(self._abandon_flow(holder, timeout, waiting), self._calls))
            raise
        return self._granted(holder, granted)

    # redis-py's hooks: see ``FencedLock``'s

    async def do_acquire(self, token: str | bytes) -> bool:
        holder = self._holder_of(token)
        return self._granted(holder, await self._calls.attempt(holder, self._ttl_ms, 0))

    async def release(self) -> None:
        """Release the lock; see ``redis.asyncio.lock.Lock.release``.

        A cancellation while it runs is raised only once the lock is released (see the
        module docstring); the token is kept only when nothing ran (cancelled before it
        started) or Redis could not be reached: then ``release`` can be called again.
        On a reentrant lock acquired more than once, it only counts down (no I/O).
        """
        if self._count_down():
            return
        expected = self.local.token
        if expected is None:
            raise LockError(
                "Cannot release a lock that's not owned or is already unlocked.",
                lock_name=self.name,
            )
        try:
            await self._release(expected)
        except asyncio.CancelledError:
            # The call may or may not have reached the server (redis-py drops the
            # connection of a cancelled call): release again, to the end, then go on
            # with the cancellation. The script compares the lock token, so a lock that
            # the first call released (or handed over) is left alone.
            with contextlib.suppress(LockNotOwnedError):
                await finish(self._release(expected))
            raise

    async def _release(self, expected: bytes) -> None:
        try:
            await self.do_release(expected)
        except LockNotOwnedError:
            self._forget()  # not ours any more
            raise
        self._forget()

    async def do_release(self, expected_token: str | bytes) -> None:
        if not await self._issuer.run(self._release_call(expected_token)):
            raise self._not_owned()

    async def do_extend(self, additional_time: float, replace_ttl: bool) -> Any:
        with self._forgets_if_lost():
            return await super().do_extend(additional_time, replace_ttl)

    async def do_reacquire(self) -> Any:
        with self._forgets_if_lost():
            return await super().do_reacquire()


async def finish(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile.

    ``work`` runs in a task of its own, shielded; a cancellation of the caller waits for
    it to finish (a second cancellation waits again) and is then raised, so that a
    Redis call that may have reached the server is never left half-known.
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        if not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation is what goes on
        raise
