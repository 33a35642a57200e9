"""The Redis issuers and fences: ``RedisIssuer`` (blocking) and ``AsyncRedisIssuer``
(asyncio) run the operations that ``RedisFlows`` writes once (``_flows``) on a redis-py
client; ``RedisFence`` and ``AsyncRedisFence`` are fences on them.

Each operation is one EVALSHA of a script in ``_scripts`` (the script text is sent only
after the server answered NOSCRIPT, e.g. after SCRIPT FLUSH or a restart), so an
acquire is one round trip. An issuer has two drivers, the only code written once
blocking and once awaited: ``run`` (a ``Call``: one script, on the path every acquire
and release takes, so no step object is made there) and ``drive`` (a flow: the waits,
and a write that grants or renews a lease, ``RedisFlows.write``, which the replicas
acknowledge with ``min_replicas``); each maps redis-py's errors to ``fencing``'s in one
place. Every operation is a line or two on them.

Tokens come from ``max(counter + 1, server clock in microseconds)`` inside the script, so
they keep increasing even when the counter key is lost (eviction, restart without
persistence, FLUSHALL, a failover that lost the last write), unless the Redis server's
clock stepped back by more than the time that passed since the last token was issued.

``await_change`` (what ``Election.observe`` waits on) subscribes to the lease key's
keyspace notifications (``_watch``); the scripts publish nothing of their own.

Imports the core (fences, errors, flows), the flows, clients, scripts and watch modules
and redis-py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Any, ClassVar, TypeVar

import redis.asyncio.cluster
from redis.exceptions import NoScriptError, RedisError

from .._base.flow import Flow, run_async, run_sync
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from .._primitives.limiter import Admission, LimitUse
from ..issuer import Busy, FenceStatus, RWStatus
from ._clients import (
    ASYNC_CLIENTS,
    ASYNC_KINDS,
    SYNC_CLIENTS,
    SYNC_KINDS,
    AsyncClient,
    SyncClient,
    arerun_script,
    check_client,
    check_replicated_client,
    client_encoder,
    rerun_script,
    socket_timeout_of,
)
from ._errors import drop_unread_replies, redis_failure
from ._flows import RedisFlows, RedisStep
from ._scripts import DEFAULT_COUNTER_IDLE, Call, LockKeys, lock_keys, name_of, names_patterns
from ._watch import aawait_change, await_change

R = TypeVar("R")


class BaseRedisIssuer:
    """What the blocking and the asyncio issuer share: the client and the flows.

    ``counter_idle`` (seconds, default a week; ``None`` = never) is how long a fence's
    token counter survives without an acquisition. Losing it is harmless: the next
    token still exceeds every earlier one (see the module docstring for the limit).
    ``min_replicas`` and ``replica_timeout``: see ``RedisIssuer``.
    """

    #: The driver errors that the drivers turn into ``FenceUnavailable``.
    wrapped: ClassVar[tuple[type[Exception], ...]] = (RedisError,)

    def __init__(
        self,
        client: Any,
        counter_idle: float | None,
        min_replicas: int,
        replica_timeout: float | None,
    ) -> None:
        check_replicated_client(client, min_replicas)
        self.client = client
        self.flows = RedisFlows(
            counter_idle, socket_timeout_of(client), min_replicas, replica_timeout
        )
        #: No replica to wait for: a grant is ``run`` directly, not a flow.
        self.direct = not min_replicas

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"

    def _lock_keys(self, name: str) -> LockKeys:
        return lock_keys(name, client_encoder(self.client).encode)


class RedisIssuer(BaseRedisIssuer):
    """Leases and tokens in Redis (a ``redis.Redis`` or ``redis.cluster.RedisCluster``).

    It has the hand-off capability: a release hands the lease straight to the first
    queued waiter, which ``BLPOP``s its own wake key (see ``_scripts``): no polling,
    and no second round trip after the wake-up. A semaphore's waiters are woken by the
    release of any of its slots (``fencing.issuer.WakesSlots``: a stream per semaphore,
    read with ``XREAD``; see ``SLOT_ACQUIRE``). Operators can inspect and force-release
    its fences (``fencing.issuer.Inspects``, ``ForceReleases``: one script each), and
    the locks kept as redis-py's ``Lock`` keeps them, ``FencedLock``'s and
    ``redis.lock.Lock``'s (``fencing.issuer.OperatesLocks``). See ``BaseRedisIssuer``
    for ``counter_idle``.

    ``min_replicas`` (default 0): a lease counts only once that many replicas have
    acknowledged it, within ``replica_timeout`` seconds (default 1 s, or half the
    client's ``socket_timeout`` if shorter); else ``NotReplicated`` (see ``_flows``).
    Renewals wait too: a renewal too few replicas saw raises ``NotReplicated`` with the
    lease kept, and ``hold()`` retries it.
    """

    def __init__(
        self,
        client: SyncClient,
        *,
        counter_idle: float | None = DEFAULT_COUNTER_IDLE,
        min_replicas: int = 0,
        replica_timeout: float | None = None,
    ) -> None:
        check_client(client, SYNC_CLIENTS, SYNC_KINDS)
        super().__init__(client, counter_idle, min_replicas, replica_timeout)

    # -- the drivers

    def run(self, call: Call[R]) -> R:
        """``call`` on the client: its parsed reply; redis-py errors become
        ``FenceUnavailable`` (``FenceSetupError`` when the server's ACL refuses).

        ``run_script``, its first EVALSHA inline: this is on every acquire's and every
        release's path."""
        script, args, parse = call
        client = self.client
        try:
            try:
                execute: Callable[..., Any] = client.execute_command
                reply = execute("EVALSHA", script.sha_arg, script.numkeys_arg, *args)
            except NoScriptError:
                reply = rerun_script(client, script, args)
        except BaseException as exc:
            raise self._raised(exc)  # noqa: B904 (its cause is set)
        return parse(reply)

    def drive(self, flow: Flow[RedisStep, R]) -> R:
        """``flow`` to its end on the client (errors as ``run``)."""
        try:
            return run_sync(flow, self.client)
        except BaseException as exc:
            raise self._raised(exc)  # noqa: B904 (its cause is set)

    def _raised(self, exc: BaseException) -> BaseException:
        """What a call on the client that ``exc`` ended raises: a redis-py error as its
        ``fencing`` error (caused by it); anything else (an interrupt) unchanged, once
        the client has no reply left unread (``drop_unread_replies``)."""
        if isinstance(exc, self.wrapped):
            error = redis_failure("redis", exc)
            error.__cause__ = exc
            return error
        drop_unread_replies(self.client, exc)
        return exc

    # -- the operations: a line or two each on the drivers

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self.try_acquire_queued(name, holder, ttl_ms, 0, False)

    def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        call = self.flows.acquire(name, holder, ttl_ms, queue_ms, queued)
        return self.run(call) if self.direct else self.drive(self.flows.write(call, name, holder))

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self.drive(self.flows.renew(name, token, holder, ttl_ms))

    def release(self, name: str, token: int, holder: str) -> bool:
        return self.run(self.flows.release(name, token, holder))

    def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        return self.drive(self.flows.await_handoff(name, holder, seconds))

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        """``fencing.issuer.TakesSlots`` and ``WakesSlots``: one script (``SLOT_ACQUIRE``)."""
        call = self.flows.slot_acquire(group, slot, permits, holder, ttl_ms, wait_ms)
        lease = f"{group}{slot}"  # the slot's lease, as a fence's name
        return self.run(call) if self.direct else self.drive(self.flows.write(call, lease, holder))

    def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """``fencing.issuer.WakesSlots``: one script (``SLOT_RELEASE``)."""
        return self.run(self.flows.slot_release(group, slot, token, holder))

    def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """``fencing.issuer.WakesSlots``: XREAD BLOCK on the semaphore's release stream."""
        return self.drive(self.flows.await_slot_release(group, since, seconds))

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """``fencing.issuer.ReadWrites``: one script (``RW_ACQUIRE``), run directly; with
        ``min_replicas``, a lease the replicas did not acknowledge is given back."""
        call = self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        return (
            self.run(call)
            if self.direct
            else self.drive(self.flows.rw_written(call, name, mode, holder))
        )

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """``fencing.issuer.ReadWrites``: one script (``RW_RENEW``)."""
        return self.drive(self.flows.rw_renew(name, mode, token, holder, ttl_ms))

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        """``fencing.issuer.ReadWrites``: one script (``RW_RELEASE``), which wakes waiters."""
        return self.run(self.flows.rw_release(name, mode, token, holder))

    def rw_await(self, name: str, seconds: float) -> None:
        """``fencing.issuer.ReadWrites``: XREAD BLOCK on the lock's release stream."""
        self.drive(self.flows.rw_await(name, seconds))

    def rw_await_after(self, name: str, holder: str, seconds: float) -> int | None:
        """``rw_await`` from ``holder``'s last refusal: wakes at a release that landed
        between that refusal and this wait (``rwlock.Side`` waits with it); the token of
        the write lease that release handed to ``holder``, if it did."""
        return self.drive(self.flows.rw_await(name, seconds, holder))

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """One request of the rate limiter ``name``: one script, on the server's clock."""
        return self.run(self.flows.admit(name, limit, per_ms, window))

    def admitter(self, name: str, limit: int, per_ms: int, window: str) -> Callable[[], bool]:
        """``admit``'s decision alone, prepared for one limiter (``PreparesAdmits``): the
        same script and arguments, looked up once; no ``Admission`` built."""
        return partial(self.run, self.flows.admission(name, limit, per_ms, window))

    def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """The use of the rate limiter ``name`` now: one read-only script, server's clock."""
        return self.run(self.flows.limit_use(name, per_ms, window))

    def rw_status(self, name: str) -> RWStatus:
        """``fencing.issuer.OperatesReadWrites``: one script (``RW_STATUS``)."""
        return self.run(self.flows.rw_status(name))

    def rw_force_release(self, name: str) -> RWStatus:
        """``fencing.issuer.OperatesReadWrites``: one script (``RW_FORCE_RELEASE``)."""
        return self.run(self.flows.rw_force_release(name))

    def status(self, name: str) -> FenceStatus:
        return self.run(self.flows.status(name))

    def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.WatchesLease``: up to ``seconds``, until the server publishes
        a change of the lease key (keyspace notifications, see ``_watch``; a server
        that publishes none makes this a ``seconds`` sleep)."""
        await_change(self.client, self.status, name, token, seconds)

    def force_release(self, name: str) -> FenceStatus:
        return self.run(self.flows.force_release(name))

    def lock_status(self, name: str) -> FenceStatus:
        """The lock ``name`` kept as redis-py's ``Lock`` keeps it (``OperatesLocks``):
        the holder's lock token, its time left, the counter, the lock's waiters; the
        holder's fence token is not stored (``token`` None, see ``parse_lock_status``).
        ``ValueError`` when the key ``name`` holds something else than a lock."""
        return self.run(self.flows.lock_status(name, self._lock_keys(name)))

    def force_release_lock(self, name: str) -> FenceStatus:
        """End the lock ``name`` whoever holds it (``OperatesLocks``); the next token is
        above every token its holder could have (see ``LOCK_FORCE_RELEASE``)."""
        return self.run(self.flows.force_release_lock(name, self._lock_keys(name)))

    def names(self, prefix: str = "") -> Iterator[str]:
        """The fences with a lease or a counter key, by ``SCAN`` (never ``KEYS``), in no
        particular order; on Redis Cluster redis-py scans every primary."""
        seen: set[str] = set()
        try:
            for pattern in names_patterns(prefix):
                for key in self.client.scan_iter(match=pattern, count=1000):
                    name = name_of(key)
                    if name is not None and name.startswith(prefix) and name not in seen:
                        seen.add(name)
                        yield name
        except RedisError as exc:
            raise redis_failure("redis", exc) from exc


class AsyncRedisIssuer(BaseRedisIssuer):
    """``RedisIssuer`` on ``redis.asyncio``: the same operations, keys and replies."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        counter_idle: float | None = DEFAULT_COUNTER_IDLE,
        min_replicas: int = 0,
        replica_timeout: float | None = None,
    ) -> None:
        check_client(client, ASYNC_CLIENTS, ASYNC_KINDS)
        super().__init__(client, counter_idle, min_replicas, replica_timeout)
        # redis-py 8.1's asyncio cluster client, used by several tasks at once while it
        # (re)discovers the cluster from inside a command, drops connections in use
        # ("'NoneType' object has no attribute 'writelines'"); its own initialize(),
        # awaited first, does the discovery under a lock (and costs nothing once done).
        self._ready: Callable[[], Awaitable[object]] | None = (
            client.initialize if isinstance(client, redis.asyncio.cluster.RedisCluster) else None
        )

    # -- the drivers

    async def run(self, call: Call[R]) -> R:
        """See ``RedisIssuer.run``."""
        script, args, parse = call
        try:
            if self._ready is not None:
                await self._ready()
            client = self.client
            try:  # arun_script, its first EVALSHA inline (every acquire's and release's path)
                reply = await client.execute_command(
                    "EVALSHA", script.sha_arg, script.numkeys_arg, *args
                )
            except NoScriptError:
                reply = await arerun_script(client, script, args)
        except self.wrapped as exc:
            raise redis_failure("redis", exc) from exc
        return parse(reply)

    async def drive(self, flow: Flow[RedisStep, R]) -> R:
        """See ``RedisIssuer.drive``."""
        try:
            if self._ready is not None:
                await self._ready()
            return await run_async(flow, self.client)
        except self.wrapped as exc:
            raise redis_failure("redis", exc) from exc

    # -- the operations: see ``RedisIssuer``'s

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await self.try_acquire_queued(name, holder, ttl_ms, 0, False)

    async def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        call = self.flows.acquire(name, holder, ttl_ms, queue_ms, queued)
        if self.direct:
            return await self.run(call)
        return await self.drive(self.flows.write(call, name, holder))

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await self.drive(self.flows.renew(name, token, holder, ttl_ms))

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await self.run(self.flows.release(name, token, holder))

    async def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        return await self.drive(self.flows.await_handoff(name, holder, seconds))

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        call = self.flows.slot_acquire(group, slot, permits, holder, ttl_ms, wait_ms)
        if self.direct:
            return await self.run(call)
        return await self.drive(self.flows.write(call, f"{group}{slot}", holder))

    async def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        return await self.run(self.flows.slot_release(group, slot, token, holder))

    async def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        return await self.drive(self.flows.await_slot_release(group, since, seconds))

    async def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        call = self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        if self.direct:
            return await self.run(call)
        return await self.drive(self.flows.rw_written(call, name, mode, holder))

    async def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await self.drive(self.flows.rw_renew(name, mode, token, holder, ttl_ms))

    async def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        return await self.run(self.flows.rw_release(name, mode, token, holder))

    async def rw_await(self, name: str, seconds: float) -> None:
        await self.drive(self.flows.rw_await(name, seconds))

    async def rw_await_after(self, name: str, holder: str, seconds: float) -> int | None:
        return await self.drive(self.flows.rw_await(name, seconds, holder))

    async def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        return await self.run(self.flows.admit(name, limit, per_ms, window))

    def admitter(
        self, name: str, limit: int, per_ms: int, window: str
    ) -> Callable[[], Awaitable[bool]]:
        return partial(self.run, self.flows.admission(name, limit, per_ms, window))

    async def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        return await self.run(self.flows.limit_use(name, per_ms, window))

    async def status(self, name: str) -> FenceStatus:
        """``fencing.issuer.AsyncInspects``: see ``RedisIssuer.status``."""
        return await self.run(self.flows.status(name))

    async def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.AsyncWatchesLease``: see ``RedisIssuer.await_change``."""
        await aawait_change(self.client, self.status, name, token, seconds)

    async def aclose(self) -> None:
        """Close the client's connections (it reconnects if used again): for the client
        that a backend made for one asyncio object, which that object's ``aclose`` calls."""
        await self.client.aclose()


class RedisFence(Fence):
    """A fence whose leases and tokens live in Redis; safe across processes and hosts.

    ``RedisFence(redis.Redis(...), "invoice:42", ttl=10)``; ``acquire()`` is one round
    trip. See ``RedisIssuer`` for ``counter_idle``, ``min_replicas`` and
    ``replica_timeout``.
    """

    def __init__(
        self,
        client: SyncClient,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        counter_idle: float | None = DEFAULT_COUNTER_IDLE,
        min_replicas: int = 0,
        replica_timeout: float | None = None,
        reentrant: bool = False,
    ) -> None:
        issuer = RedisIssuer(
            client,
            counter_idle=counter_idle,
            min_replicas=min_replicas,
            replica_timeout=replica_timeout,
        )
        super().__init__(issuer, name, ttl, reentrant=reentrant)


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
        min_replicas: int = 0,
        replica_timeout: float | None = None,
        reentrant: bool = False,
    ) -> None:
        issuer = AsyncRedisIssuer(
            client,
            counter_idle=counter_idle,
            min_replicas=min_replicas,
            replica_timeout=replica_timeout,
        )
        super().__init__(issuer, name, ttl, reentrant=reentrant)
