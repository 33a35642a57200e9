"""The Redis issuer, blocking (``RedisIssuer``) and asyncio (``AsyncRedisIssuer``).

Each operation is one EVALSHA of a script in ``_scripts`` (the script text is sent
only after the server answered NOSCRIPT, e.g. after SCRIPT FLUSH or a restart), so an
acquire is one round trip. The two issuers share everything but the I/O call itself.

Tokens come from ``max(counter + 1, server clock in microseconds)`` inside the script, so
they keep increasing even when the counter key is lost (eviction, restart without
persistence, FLUSHALL, a failover that lost the last write), unless the Redis server's
clock stepped back by more than the time that passed since the last token was issued.

Imports the fence classes, the scripts module, the error mapping and redis-py.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import NoScriptError, RedisError

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._errors import issuer_error
from .._fence import Fence
from .._protocol import Busy
from .._validate import check_ttl
from ._scripts import (
    ACQUIRE,
    DEFAULT_COUNTER_IDLE,
    RELEASE,
    RENEW,
    Script,
    acquire_args,
    block_seconds,
    fence_keys,
    idle_millis,
    lease_value,
    parse_acquire,
    parse_flag,
    parse_wake,
    release_args,
    renew_args,
)

SYNC_CLIENTS = (redis.Redis, redis.cluster.RedisCluster)
ASYNC_CLIENTS = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)


def check_client(client: object, kinds: tuple[type, ...], wanted: str) -> None:
    """A ``TypeError`` now, rather than a confusing failure at the first call."""
    if not isinstance(client, kinds):
        raise TypeError(f"client must be a {wanted} client, not {type(client).__name__}")


def socket_timeout_of(client: Any) -> float | None:
    """The client's ``socket_timeout``: a BLPOP must not block longer than that."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:  # a cluster client keeps them elsewhere
        kwargs = getattr(client, "nodes_manager", None)
        kwargs = getattr(kwargs, "connection_kwargs", {})
    timeout = kwargs.get("socket_timeout")
    return None if timeout is None else float(timeout)


def run_script(client: Any, script: Script, args: tuple[Any, ...]) -> Any:
    """EVALSHA ``script``; after NOSCRIPT (SCRIPT FLUSH, restart, failover) load it and retry.

    redis-py errors pass through unchanged (``FencedLock`` keeps them, issuers map them).
    """
    try:
        return client.evalsha(script.sha, script.numkeys_arg, *args)
    except NoScriptError:
        client.script_load(script.text)
        return client.evalsha(script.sha, script.numkeys_arg, *args)


async def run_script_async(client: Any, script: Script, args: tuple[Any, ...]) -> Any:
    """The asyncio twin of ``run_script``."""
    try:
        return await client.evalsha(script.sha, script.numkeys_arg, *args)
    except NoScriptError:
        await client.script_load(script.text)
        return await client.evalsha(script.sha, script.numkeys_arg, *args)


class _RedisIssuerBase:
    """What the sync and asyncio Redis issuers share: settings, checks, no I/O."""

    wakes_on_release = True

    def __init__(self, client: Any, counter_idle: float | None) -> None:
        self.counter_idle = (
            None if counter_idle is None else check_ttl(counter_idle, "counter_idle")
        )
        self.client = client
        self._idle_ms = idle_millis(self.counter_idle)
        self._socket_timeout = socket_timeout_of(client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"


class RedisIssuer(_RedisIssuerBase):
    """Leases and tokens in Redis (a ``redis.Redis`` or ``redis.cluster.RedisCluster``).

    ``counter_idle`` (seconds, default a week; ``None`` = never) is how long a fence's
    token counter survives without an acquisition. Losing it is harmless: the next
    token still exceeds every earlier one (see the module docstring for the limit).
    A release hands the lease straight to the first queued waiter, which ``BLPOP``s its
    own wake key in ``await_release`` (see ``_scripts``): no polling, and no
    second round trip after the wake-up.
    """

    def __init__(self, client: Any, *, counter_idle: float | None = DEFAULT_COUNTER_IDLE) -> None:
        check_client(client, SYNC_CLIENTS, "redis.Redis")
        super().__init__(client, counter_idle)

    def _eval(self, script: Script, args: tuple[Any, ...]) -> Any:
        try:  # the hot path: no context manager
            return run_script(self.client, script, args)
        except RedisError as exc:
            raise issuer_error("redis", exc) from exc

    def _blpop(self, key: bytes, seconds: float) -> Any:
        try:
            return self.client.blpop([key], seconds)
        except RedisError as exc:
            raise issuer_error("redis", exc) from exc

    def try_acquire(
        self, name: str, holder: str | bytes, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> int | Busy:
        args = acquire_args(name, holder, ttl_ms, self._idle_ms, queue_ms, queued)
        return parse_acquire(self._eval(ACQUIRE, args))

    def renew(self, name: str, token: int, holder: str | bytes, ttl_ms: int) -> bool:
        value = lease_value(token, holder)
        return parse_flag(self._eval(RENEW, renew_args(name, value, ttl_ms)), "renew")

    def release(self, name: str, token: int, holder: str | bytes) -> bool:
        value = lease_value(token, holder)
        return parse_flag(self._eval(RELEASE, release_args(name, value)), "release")

    def await_release(self, name: str, holder: str | bytes, seconds: float) -> int | None:
        wait = block_seconds(seconds, self._socket_timeout)
        if wait is None:
            return None
        return parse_wake(self._blpop(fence_keys(name).wake(holder), wait))


class AsyncRedisIssuer(_RedisIssuerBase):
    """``RedisIssuer`` on ``redis.asyncio``: the same scripts, keys and replies."""

    def __init__(self, client: Any, *, counter_idle: float | None = DEFAULT_COUNTER_IDLE) -> None:
        check_client(client, ASYNC_CLIENTS, "redis.asyncio.Redis")
        super().__init__(client, counter_idle)

    async def _eval(self, script: Script, args: tuple[Any, ...]) -> Any:
        try:
            return await run_script_async(self.client, script, args)
        except RedisError as exc:
            raise issuer_error("redis", exc) from exc

    async def try_acquire(
        self, name: str, holder: str | bytes, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> int | Busy:
        args = acquire_args(name, holder, ttl_ms, self._idle_ms, queue_ms, queued)
        return parse_acquire(await self._eval(ACQUIRE, args))

    async def renew(self, name: str, token: int, holder: str | bytes, ttl_ms: int) -> bool:
        value = lease_value(token, holder)
        return parse_flag(await self._eval(RENEW, renew_args(name, value, ttl_ms)), "renew")

    async def release(self, name: str, token: int, holder: str | bytes) -> bool:
        value = lease_value(token, holder)
        return parse_flag(await self._eval(RELEASE, release_args(name, value)), "release")

    async def await_release(self, name: str, holder: str | bytes, seconds: float) -> int | None:
        wait = block_seconds(seconds, self._socket_timeout)
        if wait is None:
            return None
        try:
            reply = await self.client.blpop([fence_keys(name).wake(holder)], wait)
        except RedisError as exc:
            raise issuer_error("redis", exc) from exc
        return parse_wake(reply)


class RedisFence(Fence):
    """A fence whose leases and tokens live in Redis; safe across processes and hosts.

    ``RedisFence(redis.Redis(...), "invoice:42", ttl=10)``; ``acquire()`` is one round
    trip. See ``RedisIssuer`` for ``counter_idle``.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        counter_idle: float | None = DEFAULT_COUNTER_IDLE,
    ) -> None:
        super().__init__(RedisIssuer(client, counter_idle=counter_idle), name, ttl)


class AsyncRedisFence(AsyncFence):
    """The asyncio ``RedisFence`` (``fencing.aio.RedisFence``) on a ``redis.asyncio`` client.

    Shares keys, leases and tokens with sync ``RedisFence`` objects of the same name.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        counter_idle: float | None = DEFAULT_COUNTER_IDLE,
    ) -> None:
        super().__init__(AsyncRedisIssuer(client, counter_idle=counter_idle), name, ttl)
