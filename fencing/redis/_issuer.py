"""The Redis issuer, written once as steps (``RedisSteps``) and driven blocking
(``RedisIssuer``) or asyncio (``AsyncRedisIssuer``).

Each operation is one EVALSHA of a script in ``_scripts`` (the script text is sent only
after the server answered NOSCRIPT, e.g. after SCRIPT FLUSH or a restart), so an
acquire is one round trip. Every operation is one step (``Eval``, or ``Pop`` for the
BLPOP of a hand-off) built by ``RedisSteps`` with its arguments and reply parser, and
carried out by the step itself (``perform`` blocking, ``aperform`` asyncio; see
``_flow``); the two issuer classes only choose which, and map redis-py's errors to
``FenceUnavailable`` in one place each.

Tokens come from ``max(counter + 1, server clock in microseconds)`` inside the script, so
they keep increasing even when the counter key is lost (eviction, restart without
persistence, FLUSHALL, a failover that lost the last write), unless the Redis server's
clock stepped back by more than the time that passed since the last token was issued.

Imports the core (fences, errors, validation), the scripts module and redis-py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, TypeVar, Union

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import NoScriptError, RedisError

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._fence import Fence
from .._validate import check_ttl
from ..issuer import Busy, FenceStatus
from ._errors import redis_failure
from ._scripts import (
    ACQUIRE,
    DEFAULT_COUNTER_IDLE,
    FORCE_RELEASE,
    LOCK_FORCE_RELEASE,
    RELEASE,
    RENEW,
    STATUS,
    LockKeys,
    Script,
    acquire_args,
    block_seconds,
    fence_keys,
    force_release_args,
    idle_millis,
    lease_value,
    lock_force_release_args,
    lock_keys,
    lock_status_args,
    name_of,
    names_pattern,
    parse_acquire,
    parse_flag,
    parse_force_release,
    parse_lock_force_release,
    parse_lock_status,
    parse_status,
    parse_wake,
    release_args,
    renew_args,
    status_args,
)

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
SyncClient = Union[redis.Redis, "redis.cluster.RedisCluster"]
AsyncClient = Union[redis.asyncio.Redis, "redis.asyncio.cluster.RedisCluster"]
SYNC_CLIENTS = (redis.Redis, redis.cluster.RedisCluster)
ASYNC_CLIENTS = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)


def check_client(client: object, kinds: tuple[type, ...], wanted: str) -> None:
    """A ``TypeError`` now, rather than a confusing failure at the first call."""
    if not isinstance(client, kinds):
        raise TypeError(f"client must be a {wanted} client, not {type(client).__name__}")


def client_encoder(client: Any) -> Any:
    """The client's encoder (a cluster client has it itself, a plain one in its pool):
    redis-py writes a lock's name with it, so the lock's keys are built with it too."""
    get = getattr(client, "get_encoder", None)
    return get() if get is not None else client.connection_pool.get_encoder()


def socket_timeout_of(client: Any) -> float | None:
    """The client's ``socket_timeout``: a BLPOP must not block longer than that."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:  # a cluster client keeps them elsewhere
        kwargs = getattr(client, "nodes_manager", None)
        kwargs = getattr(kwargs, "connection_kwargs", {})
    timeout = kwargs.get("socket_timeout")
    return None if timeout is None else float(timeout)


# -- steps: the only I/O of the Redis issuer ---------------------------------------------------


class ClientStep(Protocol[R_co]):
    """One round trip to Redis that keeps its parsed reply in ``result`` (``Eval``, ``Pop``)."""

    @property
    def result(self) -> R_co: ...

    def perform(self, client: SyncClient) -> None: ...

    async def aperform(self, client: AsyncClient) -> None: ...


class Eval(Generic[R]):
    """EVALSHA ``script`` and parse its reply into ``result``; after NOSCRIPT (SCRIPT
    FLUSH, restart, failover) load the script and retry.

    redis-py errors pass through unchanged (``FencedLock`` keeps them, issuers map them).
    """

    __slots__ = ("args", "parse", "result", "script")
    result: R

    def __init__(self, script: Script, args: tuple[Any, ...], parse: Callable[[Any], R]) -> None:
        self.script = script
        self.args = args
        self.parse = parse

    def perform(self, client: SyncClient) -> None:
        script = self.script
        try:
            reply = client.evalsha(script.sha, script.numkeys, *self.args)
        except NoScriptError:
            client.script_load(script.text)
            reply = client.evalsha(script.sha, script.numkeys, *self.args)
        self.result = self.parse(reply)

    async def aperform(self, client: AsyncClient) -> None:
        script = self.script
        try:
            reply = await client.evalsha(script.sha, script.numkeys, *self.args)
        except NoScriptError:
            await client.script_load(script.text)
            reply = await client.evalsha(script.sha, script.numkeys, *self.args)
        self.result = self.parse(reply)


class Pop:
    """BLPOP a wake key for up to ``seconds``: the token a release handed over, or ``None``."""

    __slots__ = ("key", "result", "seconds")
    result: int | None

    def __init__(self, key: bytes, seconds: float) -> None:
        self.key = key
        self.seconds = seconds

    def perform(self, client: SyncClient) -> None:
        self.result = parse_wake(client.blpop([self.key], self.seconds))

    async def aperform(self, client: AsyncClient) -> None:
        self.result = parse_wake(await client.blpop([self.key], self.seconds))


class RedisSteps:
    """The Redis issuer's operations as steps: arguments, script and reply parser, no I/O.

    Every operation is one step (one round trip), so the issuers perform it directly
    rather than through a flow. ``counter_idle`` (seconds, ``None`` = never) is how
    long a fence's token counter survives without an acquisition; ``socket_timeout``
    bounds one BLPOP.
    """

    def __init__(self, counter_idle: float | None, socket_timeout: float | None) -> None:
        self.counter_idle = (
            None if counter_idle is None else check_ttl(counter_idle, "counter_idle")
        )
        self._idle_ms = idle_millis(self.counter_idle)
        self._socket_timeout = socket_timeout

    def acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> Eval[int | Busy]:
        args = acquire_args(name, holder, ttl_ms, self._idle_ms, queue_ms, queued)
        return Eval(ACQUIRE, args, parse_acquire)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Eval[bool]:
        return self.extend(name, lease_value(token, holder), ttl_ms, add=False, what="renew")

    def extend(self, name: str, value: bytes, ms: int, *, add: bool, what: str) -> Eval[bool]:
        """Set (or, with ``add``, extend by) ``ms`` the lease holding ``value``."""
        return Eval(RENEW, renew_args(name, value, ms, add=add), partial(parse_flag, script=what))

    def release(self, name: str, token: int, holder: str) -> Eval[bool]:
        return Eval(RELEASE, release_args(name, lease_value(token, holder)), _parse_release)

    def release_value(self, name: str, value: bytes) -> Eval[bool]:
        """End the lease holding ``value`` (hand it to a queued waiter, if any)."""
        return Eval(RELEASE, release_args(name, value), _parse_release)

    def await_handoff(self, name: str, holder: str, seconds: float) -> Pop | None:
        """The BLPOP of ``holder``'s wake key, or ``None`` when the wait is too short."""
        wait = block_seconds(seconds, self._socket_timeout)
        return None if wait is None else Pop(fence_keys(name).wake(holder), wait)

    def status(self, name: str) -> Eval[FenceStatus]:
        return Eval(STATUS, status_args(name), partial(parse_status, name))

    def force_release(self, name: str) -> Eval[FenceStatus]:
        args = force_release_args(name, self._idle_ms)
        return Eval(FORCE_RELEASE, args, partial(parse_force_release, name))

    def lock_status(self, name: str, keys: LockKeys) -> Eval[FenceStatus]:
        """``status`` of the lock ``name`` (a ``FencedLock``'s or ``redis.lock.Lock``'s)."""
        return Eval(STATUS, lock_status_args(keys), partial(parse_lock_status, name))

    def force_release_lock(self, name: str, keys: LockKeys) -> Eval[FenceStatus]:
        """``force_release`` of the lock ``name``, whoever holds it."""
        args = lock_force_release_args(keys, self._idle_ms)
        return Eval(LOCK_FORCE_RELEASE, args, partial(parse_lock_force_release, name))


def _parse_release(reply: Any) -> bool:
    return parse_flag(reply, "release")


class RedisIssuer:
    """Leases and tokens in Redis (a ``redis.Redis`` or ``redis.cluster.RedisCluster``).

    ``counter_idle`` (seconds, default a week; ``None`` = never) is how long a fence's
    token counter survives without an acquisition. Losing it is harmless: the next
    token still exceeds every earlier one (see the module docstring for the limit).
    It has the hand-off capability: a release hands the lease straight to the first
    queued waiter, which ``BLPOP``s its own wake key (see ``_scripts``): no polling,
    and no second round trip after the wake-up. Operators can inspect and force-release
    its fences (``fencing.issuer.Inspects``, ``ForceReleases``: one script each), and
    the locks kept as redis-py's ``Lock`` keeps them, ``FencedLock``'s and
    ``redis.lock.Lock``'s (``fencing.issuer.OperatesLocks``).
    """

    def __init__(
        self, client: SyncClient, *, counter_idle: float | None = DEFAULT_COUNTER_IDLE
    ) -> None:
        check_client(client, SYNC_CLIENTS, "redis.Redis")
        self.client = client
        self.steps = RedisSteps(counter_idle, socket_timeout_of(client))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"

    #: The driver errors that ``result_of`` turns into ``FenceUnavailable``.
    wrapped: ClassVar[tuple[type[Exception], ...]] = (RedisError,)

    def result_of(self, step: ClientStep[R]) -> R:
        """Perform ``step`` on the client; redis-py errors become ``FenceUnavailable``
        (``FenceSetupError`` when the server's ACL refuses)."""
        try:
            step.perform(self.client)
        except self.wrapped as exc:
            raise redis_failure("redis", exc) from exc
        return step.result

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self.result_of(self.steps.acquire(name, holder, ttl_ms))

    def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        return self.result_of(self.steps.acquire(name, holder, ttl_ms, queue_ms, queued))

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self.result_of(self.steps.renew(name, token, holder, ttl_ms))

    def release(self, name: str, token: int, holder: str) -> bool:
        return self.result_of(self.steps.release(name, token, holder))

    def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        step = self.steps.await_handoff(name, holder, seconds)
        return None if step is None else self.result_of(step)

    def status(self, name: str) -> FenceStatus:
        return self.result_of(self.steps.status(name))

    def force_release(self, name: str) -> FenceStatus:
        return self.result_of(self.steps.force_release(name))

    def lock_status(self, name: str) -> FenceStatus:
        """The lock ``name`` kept as redis-py's ``Lock`` keeps it (``OperatesLocks``):
        the holder's lock token, its time left, the counter, the lock's waiters; the
        holder's fence token is not stored (``token`` None, see ``parse_lock_status``).
        ``ValueError`` when the key ``name`` holds something else than a lock."""
        return self.result_of(self.steps.lock_status(name, self._lock_keys(name)))

    def force_release_lock(self, name: str) -> FenceStatus:
        """End the lock ``name`` whoever holds it (``OperatesLocks``); the next token is
        above every token its holder could have (see ``LOCK_FORCE_RELEASE``)."""
        return self.result_of(self.steps.force_release_lock(name, self._lock_keys(name)))

    def _lock_keys(self, name: str) -> LockKeys:
        return lock_keys(name, client_encoder(self.client).encode)

    def names(self, prefix: str = "") -> Iterator[str]:
        """The fences with a lease or a counter key, by ``SCAN`` (never ``KEYS``), in no
        particular order; on Redis Cluster redis-py scans every primary."""
        seen: set[str] = set()
        try:
            for key in self.client.scan_iter(match=names_pattern(prefix), count=1000):
                name = name_of(key)
                if name is not None and name not in seen:
                    seen.add(name)
                    yield name
        except RedisError as exc:
            raise redis_failure("redis", exc) from exc


class AsyncRedisIssuer:
    """``RedisIssuer`` on ``redis.asyncio``: the same steps, keys and replies."""

    def __init__(
        self, client: AsyncClient, *, counter_idle: float | None = DEFAULT_COUNTER_IDLE
    ) -> None:
        check_client(client, ASYNC_CLIENTS, "redis.asyncio.Redis")
        self.client = client
        self.steps = RedisSteps(counter_idle, socket_timeout_of(client))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"

    async def result_of(self, step: ClientStep[R]) -> R:
        """Perform ``step`` on the client; redis-py errors become ``FenceUnavailable``
        (``FenceSetupError`` when the server's ACL refuses)."""
        try:
            await step.aperform(self.client)
        except RedisError as exc:
            raise redis_failure("redis", exc) from exc
        return step.result

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await self.result_of(self.steps.acquire(name, holder, ttl_ms))

    async def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        return await self.result_of(self.steps.acquire(name, holder, ttl_ms, queue_ms, queued))

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await self.result_of(self.steps.renew(name, token, holder, ttl_ms))

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await self.result_of(self.steps.release(name, token, holder))

    async def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        step = self.steps.await_handoff(name, holder, seconds)
        return None if step is None else await self.result_of(step)


class RedisFence(Fence):
    """A fence whose leases and tokens live in Redis; safe across processes and hosts.

    ``RedisFence(redis.Redis(...), "invoice:42", ttl=10)``; ``acquire()`` is one round
    trip. See ``RedisIssuer`` for ``counter_idle``.
    """

    def __init__(
        self,
        client: SyncClient,
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
        client: AsyncClient,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        counter_idle: float | None = DEFAULT_COUNTER_IDLE,
    ) -> None:
        super().__init__(AsyncRedisIssuer(client, counter_idle=counter_idle), name, ttl)
