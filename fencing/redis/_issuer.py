"""The Redis issuer, written once as steps (``RedisFlows``) and driven blocking
(``RedisIssuer``) or asyncio (``AsyncRedisIssuer``).

Each operation is one EVALSHA of a script in ``_scripts`` (the script text is sent only
after the server answered NOSCRIPT, e.g. after SCRIPT FLUSH or a restart), so an
acquire is one round trip. Every operation is one step (``Eval``, ``Pop`` for the BLPOP
of a hand-off, ``ReadReleased`` for a semaphore waiter's XREAD) built by ``RedisFlows``
with its arguments and reply parser, and carried out by the step itself (``perform``
blocking, ``aperform`` asyncio; see ``_flow``); the two issuer classes only choose which,
and map redis-py's errors to ``FenceUnavailable`` in one place each. Both issuers'
uncontended acquire and their release run the script directly (``RedisIssuer.run``,
``AsyncRedisIssuer.run``: the script and arguments ``RedisFlows`` gives, no step
object), which spares the path every acquire takes the step objects' construction
(docs/performance.md has what it saves).

With ``min_replicas`` N > 0, a write that grants or renews a lease (the acquire script,
the renew script, the BLPOP that takes a handed-over lease) is followed by ``WAIT N ms``
(``WAITAOF 0 N ms`` on Redis >= 7.2 with the append-only file on, found once by
``Probe``) in the same pipeline, on the same connection (``Replicated``): one round
trip plus the replicas' acknowledgement. Too few acknowledgements: an acquired lease is
released again and ``NotReplicated`` raised (``RedisFlows.replicated``, a flow).

Tokens come from ``max(counter + 1, server clock in microseconds)`` inside the script, so
they keep increasing even when the counter key is lost (eviction, restart without
persistence, FLUSHALL, a failover that lost the last write), unless the Redis server's
clock stepped back by more than the time that passed since the last token was issued.

``await_change`` (what ``Election.observe`` waits on) subscribes to the lease key's
keyspace notifications (``_watch``); the scripts publish nothing of their own.

Imports the core (fences, errors, validation), the scripts and watch modules and redis-py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import suppress
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, TypeVar, Union, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import NoScriptError, RedisError, ResponseError

from .._base.errors import NotReplicated, issuer_error
from .._base.flow import Flow, run_async, run_sync
from .._base.validate import check_ttl
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL, millis
from .._lease.fence import Fence
from .._primitives.limiter import Admission, LimitUse
from ..issuer import Busy, FenceStatus, RWStatus
from ._errors import drop_unread_replies, redis_failure
from ._limits import admitted, limit_call, parse_admission, parse_use, use_call
from ._rwlock_operate import (
    RW_FORCE_RELEASE,
    RW_STATUS,
    parse_rw_status,
    rw_force_release_args,
    rw_status_args,
)
from ._rwlock_scripts import (
    RW_ACQUIRE,
    RW_RELEASE,
    RW_RENEW,
    rw_acquire_args,
    rw_keys,
    rw_release_args,
    rw_renew_args,
)
from ._scripts import (
    ACQUIRE,
    DEFAULT_COUNTER_IDLE,
    FORCE_RELEASE,
    LOCK_FORCE_RELEASE,
    RELEASE,
    RENEW,
    SLOT_ACQUIRE,
    SLOT_RELEASE,
    STATUS,
    LockKeys,
    Script,
    block_seconds,
    fence_keys,
    force_release_args,
    idle_millis,
    lease_value,
    lock_force_release_args,
    lock_keys,
    lock_status_args,
    name_of,
    names_patterns,
    parse_acquire,
    parse_flag,
    parse_force_release,
    parse_lock_force_release,
    parse_lock_status,
    parse_released,
    parse_slot_acquire,
    parse_status,
    parse_wake,
    released_key,
    renew_args,
    slot_acquire_args,
    slot_release_args,
    status_args,
)
from ._watch import aawait_change, await_change

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
SyncClient = Union[redis.Redis, "redis.cluster.RedisCluster"]
AsyncClient = Union[redis.asyncio.Redis, "redis.asyncio.cluster.RedisCluster"]
#: What gives back a lease granted by a step the replicas did not acknowledge: the
#: release of that token (``RedisFlows.replicated``).
GiveBack = Callable[[int], "Eval[bool]"]
SYNC_CLIENTS = (redis.Redis, redis.cluster.RedisCluster)
ASYNC_CLIENTS = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
SYNC_KINDS = "redis.Redis or redis.cluster.RedisCluster"
ASYNC_KINDS = "redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster"


def check_client(client: object, kinds: tuple[type, ...], wanted: str) -> None:
    """A ``TypeError`` at construction, rather than a confusing failure at the first
    call; a client of the other kind (blocking or asyncio) is told which class takes it."""
    if isinstance(client, kinds):
        return
    kind = type(client)
    message = f"client must be a {wanted} client, not {kind.__module__}.{kind.__qualname__}"
    if isinstance(client, ASYNC_CLIENTS):
        message += " (an asyncio client: use fencing.aio.RedisFence)"
    elif isinstance(client, SYNC_CLIENTS):
        message += " (a blocking client: use fencing.RedisFence)"
    raise TypeError(message)


def client_encoder(client: Any) -> Any:
    """The client's encoder (a cluster client has it itself, a plain one in its pool):
    redis-py writes a lock's name with it, so the lock's keys are built with it too."""
    get = getattr(client, "get_encoder", None)
    return get() if get is not None else client.connection_pool.get_encoder()


def check_replicated_client(client: object, min_replicas: int) -> None:
    """``min_replicas`` needs one primary to WAIT on: a standalone or Sentinel client."""
    cluster = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)
    if min_replicas and isinstance(client, cluster):
        raise TypeError(
            "min_replicas needs a redis.Redis client (standalone or from Sentinel), "
            "not a Redis Cluster client"
        )


def socket_timeout_of(client: Any) -> float | None:
    """The client's ``socket_timeout``: a BLPOP must not block longer than that."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:  # a cluster client keeps them elsewhere (asyncio: on itself)
        kwargs = getattr(client, "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})
    timeout = kwargs.get("socket_timeout")
    return None if timeout is None else float(timeout)


# -- steps: the only I/O of the Redis issuer ---------------------------------------------------


class ClientStep(Protocol[R_co]):
    """One round trip to Redis that keeps its parsed reply in ``result`` (``Eval``, ``Pop``,
    ``ReadReleased``)."""

    @property
    def result(self) -> R_co: ...

    def perform(self, client: SyncClient) -> None: ...

    async def aperform(self, client: AsyncClient) -> None: ...


#: A script and its KEYS and ARGV, as ``RedisFlows`` builds them for one EVALSHA.
ScriptCall = tuple[Script, tuple[Any, ...]]


def run_script(client: SyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """EVALSHA ``script``; after NOSCRIPT (SCRIPT FLUSH, restart, failover) load it and
    retry. The raw reply; redis-py errors pass through unchanged.

    ``execute_command`` is what redis-py's ``evalsha`` calls; the arguments here are
    bytes (``Script.sha_arg``, ``numkeys_arg``), which ``evalsha``'s types do not admit.
    """
    execute: Callable[..., Any] = client.execute_command  # untyped in redis-py
    try:
        return execute("EVALSHA", script.sha_arg, script.numkeys_arg, *args)
    except NoScriptError:
        return rerun_script(client, script, args)


def rerun_script(client: SyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """``run_script`` after its EVALSHA met NOSCRIPT: load ``script``, EVALSHA again."""
    client.script_load(script.text)
    execute: Callable[..., Any] = client.execute_command
    return execute("EVALSHA", script.sha_arg, script.numkeys_arg, *args)


async def arun_script(client: AsyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """The asyncio twin of ``run_script``."""
    try:
        return await client.execute_command("EVALSHA", script.sha_arg, script.numkeys_arg, *args)
    except NoScriptError:
        return await arerun_script(client, script, args)


async def arerun_script(client: AsyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """The asyncio twin of ``rerun_script``."""
    await client.script_load(script.text)
    return await client.execute_command("EVALSHA", script.sha_arg, script.numkeys_arg, *args)


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

    def command(self) -> tuple[Any, ...]:
        """The EVALSHA as a command, for a pipeline (``Replicated``)."""
        return ("EVALSHA", self.script.sha_arg, self.script.numkeys_arg, *self.args)

    def take(self, reply: Any) -> None:
        self.result = self.parse(reply)

    def perform(self, client: SyncClient) -> None:
        self.result = self.parse(run_script(client, self.script, self.args))

    async def aperform(self, client: AsyncClient) -> None:
        self.result = self.parse(await arun_script(client, self.script, self.args))


class Pop:
    """BLPOP a wake key for up to ``seconds``: the token a release handed over, or ``None``."""

    __slots__ = ("key", "result", "seconds")
    result: int | None

    script: Script | None = None  # nothing to load

    def __init__(self, key: bytes, seconds: float) -> None:
        self.key = key
        self.seconds = seconds

    def command(self) -> tuple[Any, ...]:
        """The BLPOP as a command, for a pipeline (``Replicated``)."""
        return ("BLPOP", self.key, self.seconds)

    def take(self, reply: Any) -> None:
        self.result = parse_wake(reply)

    def perform(self, client: SyncClient) -> None:
        self.result = parse_wake(client.blpop([self.key], self.seconds))

    async def aperform(self, client: AsyncClient) -> None:
        self.result = parse_wake(await client.blpop([self.key], self.seconds))


class ReadReleased:
    """XREAD a semaphore's release stream from ``since``, blocking up to ``ms``: the slot
    released after it, or ``None`` (timed out, or the slot is not known)."""

    __slots__ = ("key", "ms", "result", "since")
    result: int | None

    def __init__(self, key: bytes, since: str, ms: int) -> None:
        self.key = key
        self.since = since
        self.ms = ms

    def perform(self, client: SyncClient) -> None:
        self.result = parse_released(client.xread({self.key: self.since}, 1, self.ms))

    async def aperform(self, client: AsyncClient) -> None:
        self.result = parse_released(await client.xread({self.key: self.since}, 1, self.ms))


# -- replication: WAIT after a write, in the same pipeline ------------------------------------


def check_min_replicas(min_replicas: object) -> int:
    if type(min_replicas) is not int:  # bool is an int: refused too
        raise TypeError(f"min_replicas must be an int, not {type(min_replicas).__name__}")
    if min_replicas < 0:
        raise ValueError(f"min_replicas must not be negative, got {min_replicas}")
    return min_replicas


def replica_timeout_for(timeout: float | None, socket_timeout: float | None) -> float:
    """The checked replica timeout: by default 1 s, or half the client's ``socket_timeout``
    if that is shorter. WAIT's reply must come before the socket times out."""
    if timeout is None:
        return 1.0 if socket_timeout is None else min(1.0, socket_timeout / 2)
    seconds = check_ttl(timeout, "replica_timeout")
    if socket_timeout is not None and seconds >= socket_timeout:
        raise ValueError(
            f"replica_timeout ({seconds}s) must be shorter than the client's socket_timeout "
            f"({socket_timeout}s): the WAIT reply would time out first"
        )
    return seconds


class WaitFor:
    """The acknowledgement a replicated write waits for: ``WAIT n ms`` or, with ``aof``,
    ``WAITAOF 0 n ms`` (replicas that wrote it to their append-only file)."""

    __slots__ = ("aof", "ms", "replicas")

    def __init__(self, replicas: int, ms: int, aof: bool) -> None:
        self.replicas = replicas
        self.ms = ms
        self.aof = aof

    def command(self) -> tuple[Any, ...]:
        if self.aof:
            return ("WAITAOF", 0, self.replicas, self.ms)
        return ("WAIT", self.replicas, self.ms)

    def acks(self, reply: Any) -> int:
        """How many replicas acknowledged, from the reply of ``command``."""
        count = reply[1] if self.aof and isinstance(reply, list) else reply
        if type(count) is not int:
            raise issuer_error("redis", ValueError(f"unexpected reply {reply!r} to WAIT"))
        return count

    def __str__(self) -> str:
        return f"{'WAITAOF' if self.aof else 'WAIT'} {self.replicas} within {self.ms} ms"


class Probe:
    """``INFO``: whether the server has WAITAOF (Redis >= 7.2) and its append-only file on.

    WAITAOF counts only replicas whose append-only file is on; where the primary runs
    without one, WAIT is used (and the replicas are assumed to be configured alike).
    """

    __slots__ = ("result",)
    result: bool

    def perform(self, client: SyncClient) -> None:
        try:
            info = client.info()
        except ResponseError:  # INFO refused (an ACL, a renamed command): plain WAIT
            info = {}
        self.result = self.waitaof(info)

    async def aperform(self, client: AsyncClient) -> None:
        try:
            info = await client.info()
        except ResponseError:
            info = {}
        self.result = self.waitaof(info)

    @staticmethod
    def waitaof(info: dict[str, Any]) -> bool:
        version = tuple(int(part) for part in str(info.get("redis_version", "0")).split(".")[:2])
        return version >= (7, 2) and str(info.get("aof_enabled", 0)) == "1"


class Sendable(ClientStep[R_co], Protocol[R_co]):
    """A ``ClientStep`` that can also go into a pipeline (``Eval``, ``Pop``)."""

    @property
    def script(self) -> Script | None: ...

    def command(self) -> tuple[Any, ...]: ...

    def take(self, reply: Any) -> None: ...


class Replicated(Generic[R]):
    """``step`` then ``wait`` in one pipeline on one connection (WAIT counts the writes of
    its own connection): ``result`` is the step's, ``acks`` the replicas that acknowledged.
    After NOSCRIPT the script is loaded and both are sent again."""

    __slots__ = ("acks", "result", "step", "wait")
    result: R
    acks: int

    def __init__(self, step: Sendable[R], wait: WaitFor) -> None:
        self.step = step
        self.wait = wait

    def perform(self, client: SyncClient) -> None:
        if not self._took(self._pipeline(client).execute(raise_on_error=False), first=True):
            client.script_load(self._script().text)
            self._took(self._pipeline(client).execute(raise_on_error=False), first=False)

    async def aperform(self, client: AsyncClient) -> None:
        replies = await self._pipeline(client).execute(raise_on_error=False)
        if not self._took(replies, first=True):
            await client.script_load(self._script().text)
            self._took(await self._pipeline(client).execute(raise_on_error=False), first=False)

    def _pipeline(self, client: Any) -> Any:
        """The step's command, then the wait, in one pipeline (not a transaction)."""
        pipe = client.pipeline(transaction=False)
        pipe.execute_command(*self.step.command())
        pipe.execute_command(*self.wait.command())
        return pipe

    def _took(self, replies: list[Any], first: bool) -> bool:
        """Keep the replies; False after a first NOSCRIPT (load the script, send again)."""
        reply, waited = replies
        if first and isinstance(reply, NoScriptError) and self.step.script is not None:
            return False
        for error in (reply, waited):
            if isinstance(error, Exception):
                raise error
        self.step.take(reply)
        self.result = self.step.result
        self.acks = self.wait.acks(waited)
        return True

    def _script(self) -> Script:
        assert self.step.script is not None  # only an Eval answers NOSCRIPT
        return self.step.script


#: The steps of a replicated operation's flow, performed on the client.
ReplicaStep = Probe | Replicated[Any] | Eval[Any]


class RedisFlows:
    """The Redis issuer's operations as steps and flows: arguments, script and reply
    parser, no I/O.

    Every operation is one step (one round trip), so the issuers perform it directly
    rather than through a flow; only ``replicated`` (a write, then WAIT) is a flow.
    ``counter_idle`` (seconds, ``None`` = never) is how long a fence's token counter
    survives without an acquisition; ``socket_timeout`` bounds one BLPOP.
    """

    def __init__(
        self,
        counter_idle: float | None,
        socket_timeout: float | None,
        min_replicas: int = 0,
        replica_timeout: float | None = None,
    ) -> None:
        self.counter_idle = (
            None if counter_idle is None else check_ttl(counter_idle, "counter_idle")
        )
        self._idle_ms = idle_millis(self.counter_idle)
        self._idle_arg = b"%d" % self._idle_ms  # as ACQUIRE takes it, formatted once
        self._socket_timeout = socket_timeout
        self.min_replicas = check_min_replicas(min_replicas)
        self.replica_timeout = replica_timeout_for(replica_timeout, socket_timeout)
        self._wait: WaitFor | None = None  # found by the first replicated operation

    def acquire_call(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> ScriptCall:
        """The script and arguments of ``acquire``: KEYS[1] the lease, ARGV the holder id
        (``holder_bytes``, inline), the ttl, the counter's idle lifetime (ms, 0: no
        expiry), how long to queue the holder, and ``1`` when it is queued already. Built
        here in one step: this is on every acquire's path."""
        args = (
            fence_keys(name).lease,
            holder.encode("latin-1"),
            b"%d" % ttl_ms,
            self._idle_arg,
            b"%d" % queue_ms,
        )
        return ACQUIRE, ((*args, b"1") if queued else args)

    def acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> Eval[int | Busy]:
        return Eval(*self.acquire_call(name, holder, ttl_ms, queue_ms, queued), parse_acquire)

    def slot_acquire_call(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int
    ) -> ScriptCall:
        """``SLOT_ACQUIRE``: the slot ``f"{group}{slot}"``, unless ``permits`` are held;
        with ``wait_ms``, a refusal carries the release stream's last id."""
        args = slot_acquire_args(group, slot, permits, holder, ttl_ms, self._idle_ms, wait_ms)
        return SLOT_ACQUIRE, args

    def slot_release_call(self, group: str, slot: int, token: int, holder: str) -> ScriptCall:
        """``SLOT_RELEASE``: ``release_call`` of a semaphore's slot, waking its waiters."""
        return SLOT_RELEASE, slot_release_args(group, slot, token, holder)

    def await_slot_release(self, group: str, since: str, seconds: float) -> ReadReleased | None:
        """The XREAD of the semaphore's release stream, or ``None`` when the wait is too
        short (bounded as a BLPOP is: ``block_seconds``)."""
        wait = block_seconds(seconds, self._socket_timeout)
        return (
            None if wait is None else ReadReleased(released_key(group), since, round(wait * 1000))
        )

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Eval[bool]:
        return self.extend(name, lease_value(token, holder), ttl_ms, add=False, what="renew")

    def extend(self, name: str, value: bytes, ms: int, *, add: bool, what: str) -> Eval[bool]:
        """Set (or, with ``add``, extend by) ``ms`` the lease holding ``value``."""
        return Eval(RENEW, renew_args(name, value, ms, add=add), partial(parse_flag, script=what))

    def release_call(self, name: str, token: int, holder: str) -> ScriptCall:
        """The script and arguments of ``release`` (the issuers run it directly); the
        ``lease_value`` inline: this is on every release's path."""
        return RELEASE, (fence_keys(name).lease, b"%d:%s" % (token, holder.encode("latin-1")))

    def release(self, name: str, token: int, holder: str) -> Eval[bool]:
        """A release as a step (for a flow: giving back an unreplicated lease)."""
        return Eval(*self.release_call(name, token, holder), parse_release)

    def await_handoff(self, name: str, holder: str, seconds: float) -> Pop | None:
        """The BLPOP of ``holder``'s wake key, or ``None`` when the wait is too short."""
        wait = block_seconds(seconds, self._socket_timeout)
        return None if wait is None else Pop(fence_keys(name).wake(holder), wait)

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> Eval[int | Busy]:
        """``RW_ACQUIRE``: a read or write lease of the read-write lock ``name``."""
        args = rw_acquire_args(name, mode, holder, ttl_ms, self._idle_ms, queue_ms)
        return Eval(RW_ACQUIRE, args, parse_acquire)

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> Eval[bool]:
        args = rw_renew_args(name, mode, token, holder, ttl_ms)
        return Eval(RW_RENEW, args, partial(parse_flag, script="rw renew"))

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Eval[bool]:
        args = rw_release_args(name, mode, token, holder)
        return Eval(RW_RELEASE, args, partial(parse_flag, script="rw release"))

    def rw_await(self, name: str, seconds: float) -> ReadReleased | None:
        """The XREAD of the lock's release stream from now on, or ``None`` when the wait
        is too short (a release just before it is missed: the waiter's wait is bounded by
        the refusing leases' end and ``WaitSchedule.MAX_BLOCK``, so it only delays)."""
        wait = block_seconds(seconds, self._socket_timeout)
        return (
            None if wait is None else ReadReleased(rw_keys(name).released, "$", round(wait * 1000))
        )

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

    def replicated(
        self,
        step: Sendable[R],
        name: str,
        holder: str,
        renewed: int | None = None,
        give_back: GiveBack | None = None,
    ) -> Flow[ReplicaStep, R]:
        """``step`` followed by the wait for ``min_replicas`` acknowledgements (a flow).

        Too few: ``NotReplicated``. A lease the step granted (acquire, hand-off) is
        released first (by ``give_back(token)``, default the fence's release), best
        effort (if that fails too, it expires after its ttl); a lease it renewed
        (``renewed``: its token) is kept.
        """
        if self._wait is None:
            probe = Probe()
            yield probe
            self._wait = WaitFor(self.min_replicas, millis(self.replica_timeout), probe.result)
        sent = Replicated(step, self._wait)
        yield sent
        result = sent.result
        if sent.acks >= self.min_replicas or not result or isinstance(result, Busy):
            return result  # acknowledged, or nothing granted or renewed
        if renewed is not None:
            detail = f"the renewal is held on the primary only ({self._wait})"
            raise NotReplicated(name, renewed, sent.acks, self.min_replicas, detail)
        token = cast(int, result)
        with suppress(RedisError):  # else the lease expires after its ttl
            yield self.release(name, token, holder) if give_back is None else give_back(token)
        detail = f"the lease was released ({self._wait})"
        raise NotReplicated(name, token, sent.acks, self.min_replicas, detail)


#: ``RELEASE``'s (and ``LOCK_RELEASE``'s) reply: True if the lease was held.
parse_release = partial(parse_flag, script="release")


def rw_give_back(flows: RedisFlows, name: str, mode: str, holder: str) -> GiveBack:
    """The release of a read-write lease of ``holder`` that the replicas did not
    acknowledge (``RedisFlows.replicated``'s ``give_back``)."""
    return lambda token: flows.rw_release(name, mode, token, holder)


class RedisIssuer:
    """Leases and tokens in Redis (a ``redis.Redis`` or ``redis.cluster.RedisCluster``).

    ``counter_idle`` (seconds, default a week; ``None`` = never) is how long a fence's
    token counter survives without an acquisition. Losing it is harmless: the next
    token still exceeds every earlier one (see the module docstring for the limit).
    It has the hand-off capability: a release hands the lease straight to the first
    queued waiter, which ``BLPOP``s its own wake key (see ``_scripts``): no polling,
    and no second round trip after the wake-up. A semaphore's waiters are woken by the
    release of any of its slots (``fencing.issuer.WakesSlots``: a stream per semaphore,
    read with ``XREAD``; see ``SLOT_ACQUIRE``). Operators can inspect and force-release
    its fences (``fencing.issuer.Inspects``, ``ForceReleases``: one script each), and
    the locks kept as redis-py's ``Lock`` keeps them, ``FencedLock``'s and
    ``redis.lock.Lock``'s (``fencing.issuer.OperatesLocks``).

    ``min_replicas`` (default 0): a lease counts only once that many replicas have
    acknowledged it, within ``replica_timeout`` seconds (default 1 s, or half the
    client's ``socket_timeout`` if shorter); else ``NotReplicated`` (see the module
    docstring). Renewals wait too: a renewal too few replicas saw raises
    ``NotReplicated`` with the lease kept, and ``hold()`` retries it.
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
        check_replicated_client(client, min_replicas)
        self.client = client
        self.flows = RedisFlows(
            counter_idle, socket_timeout_of(client), min_replicas, replica_timeout
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"

    #: The driver errors that ``result_of`` turns into ``FenceUnavailable``.
    wrapped: ClassVar[tuple[type[Exception], ...]] = (RedisError,)

    def result_of(self, step: ClientStep[R]) -> R:
        """Perform ``step`` on the client; redis-py errors become ``FenceUnavailable``
        (``FenceSetupError`` when the server's ACL refuses)."""
        try:
            step.perform(self.client)
        except BaseException as exc:
            raise self._raised(exc)  # noqa: B904 (its cause is set)
        return step.result

    def run(self, script: Script, args: tuple[Any, ...]) -> Any:
        """``script`` with ``args`` on the client: its raw reply (errors as ``result_of``).

        ``run_script``, its first EVALSHA inline: this is on every acquire's and every
        release's path."""
        client = self.client
        try:
            try:
                execute: Callable[..., Any] = client.execute_command
                return execute("EVALSHA", script.sha_arg, script.numkeys_arg, *args)
            except NoScriptError:
                return rerun_script(client, script, args)
        except BaseException as exc:
            raise self._raised(exc)  # noqa: B904 (its cause is set)

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """One request of the rate limiter ``name``: one script, on the server's clock."""
        return parse_admission(self.run(*limit_call(name, limit, per_ms, window)))

    def admitter(self, name: str, limit: int, per_ms: int, window: str) -> Callable[[], bool]:
        """``admit``'s decision alone, prepared for one limiter (``PreparesAdmits``): the
        same script and arguments, looked up once; no ``Admission`` built."""
        script, args = limit_call(name, limit, per_ms, window)
        run = self.run

        def decide() -> bool:
            reply = run(script, args)
            return type(reply) is int or admitted(reply)  # an admission, or else checked

        return decide

    def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """The use of the rate limiter ``name`` now: one read-only script, server's clock."""
        return parse_use(self.run(*use_call(name, per_ms, window)))

    def confirmed(
        self,
        step: Sendable[R],
        name: str,
        holder: str,
        renewed: int | None = None,
        give_back: GiveBack | None = None,
    ) -> R:
        """``step``'s result; with ``min_replicas``, once the replicas acknowledged it."""
        if not self.flows.min_replicas:
            return self.result_of(step)
        flow = self.flows.replicated(step, name, holder, renewed, give_back)
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

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self.try_acquire_queued(name, holder, ttl_ms, 0, False)

    def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        if self.flows.min_replicas:
            step = self.flows.acquire(name, holder, ttl_ms, queue_ms, queued)
            return self.confirmed(step, name, holder)
        reply = self.run(*self.flows.acquire_call(name, holder, ttl_ms, queue_ms, queued))
        return reply if type(reply) is int and reply > 0 else parse_acquire(reply)

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        """``fencing.issuer.TakesSlots`` and ``WakesSlots``: one script (``SLOT_ACQUIRE``)."""
        call = self.flows.slot_acquire_call(group, slot, permits, holder, ttl_ms, wait_ms)
        if self.flows.min_replicas:
            return self.confirmed(Eval(*call, parse_slot_acquire), f"{group}{slot}", holder)
        reply = self.run(*call)
        return reply if type(reply) is int and reply > 0 else parse_slot_acquire(reply)

    def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """``fencing.issuer.WakesSlots``: one script (``SLOT_RELEASE``)."""
        reply = self.run(*self.flows.slot_release_call(group, slot, token, holder))
        return reply == 1 or parse_release(reply)

    def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """``fencing.issuer.WakesSlots``: XREAD BLOCK on the semaphore's release stream."""
        step = self.flows.await_slot_release(group, since, seconds)
        return None if step is None else self.result_of(step)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self.confirmed(self.flows.renew(name, token, holder, ttl_ms), name, holder, token)

    def release(self, name: str, token: int, holder: str) -> bool:
        reply = self.run(*self.flows.release_call(name, token, holder))
        return reply == 1 or parse_release(reply)

    def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        step = self.flows.await_handoff(name, holder, seconds)
        return None if step is None else self.confirmed(step, name, holder)

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """``fencing.issuer.ReadWrites``: one script (``RW_ACQUIRE``); with
        ``min_replicas``, a lease the replicas did not acknowledge is given back."""
        step = self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        return self.confirmed(
            step, name, holder, None, rw_give_back(self.flows, name, mode, holder)
        )

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """``fencing.issuer.ReadWrites``: one script (``RW_RENEW``)."""
        step = self.flows.rw_renew(name, mode, token, holder, ttl_ms)
        return self.confirmed(step, name, holder, token)

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        """``fencing.issuer.ReadWrites``: one script (``RW_RELEASE``), which wakes waiters."""
        return self.result_of(self.flows.rw_release(name, mode, token, holder))

    def rw_await(self, name: str, seconds: float) -> None:
        """``fencing.issuer.ReadWrites``: XREAD BLOCK on the lock's release stream."""
        step = self.flows.rw_await(name, seconds)
        if step is not None:
            self.result_of(step)

    def rw_status(self, name: str) -> RWStatus:
        """``fencing.issuer.OperatesReadWrites``: one script (``RW_STATUS``)."""
        return self.result_of(Eval(RW_STATUS, rw_status_args(name), partial(parse_rw_status, name)))

    def rw_force_release(self, name: str) -> RWStatus:
        """``fencing.issuer.OperatesReadWrites``: one script (``RW_FORCE_RELEASE``)."""
        args = rw_force_release_args(name, self.flows._idle_ms)
        return self.result_of(Eval(RW_FORCE_RELEASE, args, partial(parse_rw_status, name)))

    def status(self, name: str) -> FenceStatus:
        return self.result_of(self.flows.status(name))

    def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.WatchesLease``: up to ``seconds``, until the server publishes
        a change of the lease key (keyspace notifications, see ``_watch``; a server
        that publishes none makes this a ``seconds`` sleep)."""
        await_change(self.client, self.status, name, token, seconds)

    def force_release(self, name: str) -> FenceStatus:
        return self.result_of(self.flows.force_release(name))

    def lock_status(self, name: str) -> FenceStatus:
        """The lock ``name`` kept as redis-py's ``Lock`` keeps it (``OperatesLocks``):
        the holder's lock token, its time left, the counter, the lock's waiters; the
        holder's fence token is not stored (``token`` None, see ``parse_lock_status``).
        ``ValueError`` when the key ``name`` holds something else than a lock."""
        return self.result_of(self.flows.lock_status(name, self._lock_keys(name)))

    def force_release_lock(self, name: str) -> FenceStatus:
        """End the lock ``name`` whoever holds it (``OperatesLocks``); the next token is
        above every token its holder could have (see ``LOCK_FORCE_RELEASE``)."""
        return self.result_of(self.flows.force_release_lock(name, self._lock_keys(name)))

    def _lock_keys(self, name: str) -> LockKeys:
        return lock_keys(name, client_encoder(self.client).encode)

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


class AsyncRedisIssuer:
    """``RedisIssuer`` on ``redis.asyncio``: the same steps, keys and replies."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        counter_idle: float | None = DEFAULT_COUNTER_IDLE,
        min_replicas: int = 0,
        replica_timeout: float | None = None,
    ) -> None:
        check_client(client, ASYNC_CLIENTS, ASYNC_KINDS)
        check_replicated_client(client, min_replicas)
        self.client = client
        self.flows = RedisFlows(
            counter_idle, socket_timeout_of(client), min_replicas, replica_timeout
        )
        # redis-py 8.1's asyncio cluster client, used by several tasks at once while it
        # (re)discovers the cluster from inside a command, drops connections in use
        # ("'NoneType' object has no attribute 'writelines'"); its own initialize(),
        # awaited first, does the discovery under a lock (and costs nothing once done).
        self._ready: Callable[[], Awaitable[object]] | None = (
            client.initialize if isinstance(client, redis.asyncio.cluster.RedisCluster) else None
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r})"

    #: The driver errors that ``result_of`` turns into ``FenceUnavailable``.
    wrapped: ClassVar[tuple[type[Exception], ...]] = (RedisError,)

    async def result_of(self, step: ClientStep[R]) -> R:
        """Perform ``step`` on the client; redis-py errors become ``FenceUnavailable``
        (``FenceSetupError`` when the server's ACL refuses)."""
        try:
            if self._ready is not None:
                await self._ready()
            await step.aperform(self.client)
        except self.wrapped as exc:
            raise redis_failure("redis", exc) from exc
        return step.result

    async def run(self, script: Script, args: tuple[Any, ...]) -> Any:
        """``script`` with ``args`` on the client: its raw reply (errors as ``result_of``)."""
        try:
            if self._ready is not None:
                await self._ready()
            client = self.client
            try:  # arun_script, its first EVALSHA inline (every acquire's and release's path)
                return await client.execute_command(
                    "EVALSHA", script.sha_arg, script.numkeys_arg, *args
                )
            except NoScriptError:
                return await arerun_script(client, script, args)
        except self.wrapped as exc:
            raise redis_failure("redis", exc) from exc

    async def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """See ``RedisIssuer.admit``."""
        return parse_admission(await self.run(*limit_call(name, limit, per_ms, window)))

    def admitter(
        self, name: str, limit: int, per_ms: int, window: str
    ) -> Callable[[], Awaitable[bool]]:
        """See ``RedisIssuer.admitter``."""
        script, args = limit_call(name, limit, per_ms, window)
        run = self.run

        async def decide() -> bool:
            reply = await run(script, args)
            return type(reply) is int or admitted(reply)

        return decide

    async def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """See ``RedisIssuer.limit_use``."""
        return parse_use(await self.run(*use_call(name, per_ms, window)))

    async def confirmed(
        self,
        step: Sendable[R],
        name: str,
        holder: str,
        renewed: int | None = None,
        give_back: GiveBack | None = None,
    ) -> R:
        """``step``'s result; with ``min_replicas``, once the replicas acknowledged it."""
        if not self.flows.min_replicas:
            return await self.result_of(step)
        flow = self.flows.replicated(step, name, holder, renewed, give_back)
        try:
            return await run_async(flow, self.client)
        except self.wrapped as exc:
            raise redis_failure("redis", exc) from exc

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await self.try_acquire_queued(name, holder, ttl_ms, 0, False)

    async def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        if self.flows.min_replicas:
            step = self.flows.acquire(name, holder, ttl_ms, queue_ms, queued)
            return await self.confirmed(step, name, holder)
        call = self.flows.acquire_call(name, holder, ttl_ms, queue_ms, queued)
        reply = await self.run(*call)
        return reply if type(reply) is int and reply > 0 else parse_acquire(reply)

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        """See ``RedisIssuer.try_acquire_slot``."""
        call = self.flows.slot_acquire_call(group, slot, permits, holder, ttl_ms, wait_ms)
        if self.flows.min_replicas:
            return await self.confirmed(Eval(*call, parse_slot_acquire), f"{group}{slot}", holder)
        reply = await self.run(*call)
        return reply if type(reply) is int and reply > 0 else parse_slot_acquire(reply)

    async def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """See ``RedisIssuer.release_slot``."""
        reply = await self.run(*self.flows.slot_release_call(group, slot, token, holder))
        return reply == 1 or parse_release(reply)

    async def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """See ``RedisIssuer.await_slot_release``."""
        step = self.flows.await_slot_release(group, since, seconds)
        return None if step is None else await self.result_of(step)

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        step = self.flows.renew(name, token, holder, ttl_ms)
        return await self.confirmed(step, name, holder, token)

    async def release(self, name: str, token: int, holder: str) -> bool:
        reply = await self.run(*self.flows.release_call(name, token, holder))
        return reply == 1 or parse_release(reply)

    async def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """See ``RedisIssuer.rw_acquire``."""
        step = self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        give_back = rw_give_back(self.flows, name, mode, holder)
        return await self.confirmed(step, name, holder, None, give_back)

    async def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """See ``RedisIssuer.rw_renew``."""
        step = self.flows.rw_renew(name, mode, token, holder, ttl_ms)
        return await self.confirmed(step, name, holder, token)

    async def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        """See ``RedisIssuer.rw_release``."""
        return await self.result_of(self.flows.rw_release(name, mode, token, holder))

    async def rw_await(self, name: str, seconds: float) -> None:
        """See ``RedisIssuer.rw_await``."""
        step = self.flows.rw_await(name, seconds)
        if step is not None:
            await self.result_of(step)

    async def status(self, name: str) -> FenceStatus:
        """``fencing.issuer.AsyncInspects``: see ``RedisIssuer.status``."""
        return await self.result_of(self.flows.status(name))

    async def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.AsyncWatchesLease``: see ``RedisIssuer.await_change``."""
        await aawait_change(self.client, self.status, name, token, seconds)

    async def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        step = self.flows.await_handoff(name, holder, seconds)
        return None if step is None else await self.confirmed(step, name, holder)

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
