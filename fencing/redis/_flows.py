"""The Redis issuer's operations, written once: ``RedisFlows`` (and ``LockFlows``, a
``FencedLock``'s), and the steps their flows yield.

An operation that acquires, releases or reads is one script: a ``Call`` (the script, its
KEYS and ARGV, its reply parser), which ``RedisFlows`` builds and an issuer runs directly
(``RedisIssuer.run``, one EVALSHA: every acquire's and release's path makes no step
object). The rest are flows (``_flow``): the waits, and the writes that renew a lease or
take a read-write lease, each its script as an ``Eval`` step followed, with
``min_replicas``, by the replicas' acknowledgement (``write``; an acquire's ``Call``
becomes such a flow when replicated). Their steps are carried out on a redis-py client,
the only I/O here, each a few lines written blocking (``perform``) and awaited
(``aperform``): ``Eval``, ``Pop`` (the BLPOP of a hand-off), ``ReadReleased`` (the XREAD
of a release stream), ``Probe`` and ``Replicated``.

With ``min_replicas`` N > 0, a write that grants or renews a lease (the acquire script,
the renew script, the BLPOP that takes a handed-over lease) is followed by ``WAIT N ms``
(``WAITAOF 0 N ms`` on Redis >= 7.2 with the append-only file on, found once by
``Probe``) in the same pipeline, on the same connection (``Replicated``): one round
trip plus the replicas' acknowledgement. Too few acknowledgements: an acquired lease is
released again and ``NotReplicated`` raised (``RedisFlows.replicated``).

Imports the core (flows, errors, validation, the limiter's results), the scripts and the
clients' script runners.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any, Generic, Protocol, TypeVar, cast

from redis.exceptions import NoScriptError, RedisError, ResponseError

from .._base.errors import NotReplicated, issuer_error
from .._base.flow import Flow
from .._base.validate import check_ttl
from .._lease.core import millis
from .._primitives.limiter import Admission, LimitUse
from ..issuer import Busy, FenceStatus, RWStatus, SlotBusy
from ._clients import AsyncClient, SyncClient, arun_script, run_script
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
    parse_handed,
    rw_acquire_args,
    rw_keys,
    rw_release_args,
    rw_renew_args,
)
from ._scripts import (
    ACQUIRE,
    FORCE_RELEASE,
    LOCK_ACQUIRE,
    LOCK_FORCE_RELEASE,
    LOCK_RELEASE,
    RELEASE,
    RENEW,
    SLOT_ACQUIRE,
    SLOT_RELEASE,
    STATUS,
    Call,
    LockKeys,
    Script,
    block_seconds,
    fence_keys,
    force_release_args,
    holder_bytes,
    idle_millis,
    lease_value,
    lock_acquire_args,
    lock_force_release_args,
    lock_release_args,
    lock_status_args,
    parse_acquire,
    parse_flag,
    parse_force_release,
    parse_lock_force_release,
    parse_lock_status,
    parse_release,
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

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: What gives back a lease granted by a write the replicas did not acknowledge: the
#: release of that token (``RedisFlows.replicated``).
GiveBack = Callable[[int], Call[bool]]


# -- steps: the only I/O -----------------------------------------------------------------------


class Eval(Generic[R]):
    """A ``Call`` in a flow: EVALSHA its script and parse the reply into ``result``; after
    NOSCRIPT (SCRIPT FLUSH, restart, failover) load the script and retry.

    redis-py errors pass through unchanged (the issuers map them).
    """

    __slots__ = ("call", "result")
    result: R

    def __init__(self, call: Call[R]) -> None:
        self.call = call

    @property
    def script(self) -> Script:
        """The script a NOSCRIPT reply asks to load (``Replicated``)."""
        return self.call[0]

    def command(self) -> tuple[Any, ...]:
        """The EVALSHA as a command, for a pipeline (``Replicated``)."""
        script, args, _ = self.call
        return ("EVALSHA", script.sha_arg, script.numkeys_arg, *args)

    def take(self, reply: Any) -> None:
        self.result = self.call[2](reply)

    def perform(self, client: SyncClient) -> None:
        script, args, parse = self.call
        self.result = parse(run_script(client, script, args))

    async def aperform(self, client: AsyncClient) -> None:
        script, args, parse = self.call
        self.result = parse(await arun_script(client, script, args))


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
    """XREAD a release stream from ``since``, blocking up to ``ms``: what ``parse`` reads
    in the entry it woke on (by default the slot released after ``since``), or ``None``
    (timed out, or nothing to read in it)."""

    __slots__ = ("key", "ms", "parse", "result", "since")
    result: int | None

    def __init__(
        self,
        key: bytes,
        since: str,
        ms: int,
        parse: Callable[[Any], int | None] = parse_released,
    ) -> None:
        self.key = key
        self.since = since
        self.ms = ms
        self.parse = parse

    def perform(self, client: SyncClient) -> None:
        self.result = self.parse(client.xread({self.key: self.since}, 1, self.ms))

    async def aperform(self, client: AsyncClient) -> None:
        self.result = self.parse(await client.xread({self.key: self.since}, 1, self.ms))


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


class Sendable(Protocol[R_co]):
    """A step that can also go into a pipeline (``Eval``, ``Pop``)."""

    @property
    def result(self) -> R_co: ...

    @property
    def script(self) -> Script | None: ...

    def command(self) -> tuple[Any, ...]: ...

    def take(self, reply: Any) -> None: ...

    def perform(self, client: SyncClient) -> None: ...

    async def aperform(self, client: AsyncClient) -> None: ...


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


#: The steps of the Redis flows, each performed on a redis-py client.
RedisStep = Eval[Any] | Pop | ReadReleased | Probe | Replicated[Any]


# -- the operations ----------------------------------------------------------------------------


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


def _admission(reply: Any) -> bool:
    """A limiter script's reply as its decision alone (``RedisFlows.admission``): an
    admission's plain integer taken first, anything else checked as ``admitted`` does."""
    return type(reply) is int or admitted(reply)


class RedisFlows:
    """The Redis issuer's operations, no I/O: each as a ``Call`` when it is one script,
    else as a flow of ``RedisStep``.

    ``counter_idle`` (seconds, ``None`` = never) is how long a fence's token counter
    survives without an acquisition; ``socket_timeout`` bounds one BLPOP or XREAD;
    ``min_replicas`` and ``replica_timeout``: see ``written``.
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
        #: holder id -> the release stream's id its refused ``rw_acquire`` read, until
        #: the wait that follows (``rw_await``) or its next attempt
        self._rw_since: dict[str, str] = {}

    # -- calls: one script each

    def acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> Call[int | Busy]:
        """``ACQUIRE``: KEYS[1] the lease, ARGV the holder id (``holder_bytes``, inline),
        the ttl, the counter's idle lifetime (ms, 0: no expiry), how long to queue the
        holder, and ``1`` when it is queued already. Built here in one step: this is on
        every acquire's path."""
        args = (
            fence_keys(name).lease,
            holder.encode("latin-1"),
            b"%d" % ttl_ms,
            self._idle_arg,
            b"%d" % queue_ms,
        )
        return ACQUIRE, ((*args, b"1") if queued else args), parse_acquire

    def release(self, name: str, token: int, holder: str) -> Call[bool]:
        """``RELEASE``, the ``lease_value`` inline: this is on every release's path."""
        args = (fence_keys(name).lease, b"%d:%s" % (token, holder.encode("latin-1")))
        return RELEASE, args, parse_release

    def slot_acquire(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int
    ) -> Call[int | Busy]:
        """``SLOT_ACQUIRE``: the slot ``f"{group}{slot}"``, unless ``permits`` are held;
        with ``wait_ms``, a refusal carries the release stream's last id."""
        args = slot_acquire_args(group, slot, permits, holder, ttl_ms, self._idle_ms, wait_ms)
        return SLOT_ACQUIRE, args, parse_slot_acquire

    def slot_release(self, group: str, slot: int, token: int, holder: str) -> Call[bool]:
        """``SLOT_RELEASE``: ``release`` of a semaphore's slot, waking its waiters."""
        return SLOT_RELEASE, slot_release_args(group, slot, token, holder), parse_release

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> Call[int | Busy]:
        """``RW_ACQUIRE``: a read or write lease of the read-write lock ``name``; run
        directly without replicas to wait for, else through ``rw_written``."""
        args = rw_acquire_args(name, mode, holder, ttl_ms, self._idle_ms, queue_ms)
        return RW_ACQUIRE, args, partial(self._rw_replied, holder)

    def _rw_replied(self, holder: str, reply: Any) -> int | Busy:
        """``RW_ACQUIRE``'s reply to ``holder``; a refusal to a caller that will wait
        (a ``SlotBusy``) keeps the release stream's id for its ``rw_await``."""
        parsed = parse_slot_acquire(reply)
        if type(parsed) is SlotBusy:
            self._rw_since[holder] = parsed.since
        elif self._rw_since:
            self._rw_since.pop(holder, None)
        return parsed

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Call[bool]:
        """``RW_RELEASE``: which hands the lock to a writer waiting for it, if it is left free."""
        return RW_RELEASE, rw_release_args(name, mode, token, holder), _parse_rw_release

    def rw_status(self, name: str) -> Call[RWStatus]:
        """``RW_STATUS``: the read-write lock ``name``'s writer or readers, for operators."""
        return RW_STATUS, rw_status_args(name), partial(parse_rw_status, name)

    def rw_force_release(self, name: str) -> Call[RWStatus]:
        """``RW_FORCE_RELEASE``: end every lease of the read-write lock ``name``."""
        args = rw_force_release_args(name, self._idle_ms)
        return RW_FORCE_RELEASE, args, partial(parse_rw_status, name)

    def status(self, name: str) -> Call[FenceStatus]:
        return STATUS, status_args(name), partial(parse_status, name)

    def force_release(self, name: str) -> Call[FenceStatus]:
        args = force_release_args(name, self._idle_ms)
        return FORCE_RELEASE, args, partial(parse_force_release, name)

    def lock_status(self, name: str, keys: LockKeys) -> Call[FenceStatus]:
        """``status`` of the lock ``name`` (a ``FencedLock``'s or ``redis.lock.Lock``'s)."""
        return STATUS, lock_status_args(keys), partial(parse_lock_status, name)

    def force_release_lock(self, name: str, keys: LockKeys) -> Call[FenceStatus]:
        """``force_release`` of the lock ``name``, whoever holds it."""
        args = lock_force_release_args(keys, self._idle_ms)
        return LOCK_FORCE_RELEASE, args, partial(parse_lock_force_release, name)

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Call[Admission]:
        """One request of the rate limiter ``name``: one script, on the server's clock."""
        return (*limit_call(name, limit, per_ms, window), parse_admission)

    def admission(self, name: str, limit: int, per_ms: int, window: str) -> Call[bool]:
        """``admit``'s decision alone (``PreparesAdmits``): no ``Admission`` built."""
        return (*limit_call(name, limit, per_ms, window), _admission)

    def limit_use(self, name: str, per_ms: int, window: str) -> Call[LimitUse]:
        """The use of the rate limiter ``name`` now: one read-only script."""
        return (*use_call(name, per_ms, window), parse_use)

    # -- flows: waits, and writes the replicas acknowledge

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Flow[RedisStep, bool]:
        """``RENEW``, a write (with ``min_replicas``, one the replicas acknowledge)."""
        call = RENEW, renew_args(name, lease_value(token, holder), ttl_ms), _parse_renew
        return (yield from self.write(call, name, holder, token))

    def rw_written(
        self, call: Call[int | Busy], name: str, mode: str, holder: str
    ) -> Flow[RedisStep, int | Busy]:
        """``rw_acquire``'s ``call`` as a write the replicas acknowledge: a lease they did
        not is given back by ``RW_RELEASE``."""

        def back(token: int) -> Call[bool]:
            return self.rw_release(name, mode, token, holder)

        return (yield from self.write(call, name, holder, None, back))

    def rw_renew(
        self, name: str, mode: str, token: int, holder: str, ttl_ms: int
    ) -> Flow[RedisStep, bool]:
        """``RW_RENEW``, a write."""
        call = RW_RENEW, rw_renew_args(name, mode, token, holder, ttl_ms), _parse_rw_renew
        return (yield from self.write(call, name, holder, token))

    def await_handoff(self, name: str, holder: str, seconds: float) -> Flow[RedisStep, int | None]:
        """The BLPOP of ``holder``'s wake key (a lease it takes is replicated as any
        grant), or ``None`` at once when the wait is too short (``block_seconds``)."""
        wait = block_seconds(seconds, self._socket_timeout)
        if wait is None:
            return None
        return (yield from self.written(Pop(self._wake_key(name, holder), wait), name, holder))

    def _wake_key(self, name: str, holder: str) -> bytes:
        return fence_keys(name).wake(holder)

    def await_slot_release(
        self, group: str, since: str, seconds: float
    ) -> Flow[RedisStep, int | None]:
        """The XREAD of the semaphore's release stream, or ``None`` at once when the wait
        is too short (bounded as a BLPOP is: ``block_seconds``)."""
        wait = block_seconds(seconds, self._socket_timeout)
        if wait is None:
            return None
        read = ReadReleased(released_key(group), since, round(wait * 1000))
        yield read
        return read.result

    def rw_await(
        self, name: str, seconds: float, holder: str | None = None
    ) -> Flow[RedisStep, int | None]:
        """The XREAD of the lock's release stream from the id ``holder``'s last refusal
        read (so no release after it is missed), else from now on (``"$"``); or nothing
        when the wait is too short. The token of a write lease the release it woke on
        handed to ``holder`` (``RW_RELEASE``), else ``None``. With ``min_replicas`` that
        token is not taken from here (reading it writes nothing a WAIT could count):
        ``None``, and the next ``RW_ACQUIRE``, replicated, returns the lease."""
        since = "$" if holder is None else self._rw_since.pop(holder, "$")
        wait = block_seconds(seconds, self._socket_timeout)
        if wait is None:
            return None
        if holder is None or self.min_replicas:
            yield ReadReleased(rw_keys(name).released, since, round(wait * 1000))
            return None
        handed = partial(parse_handed, holder_bytes(holder))
        read = ReadReleased(rw_keys(name).released, since, round(wait * 1000), handed)
        yield read
        return read.result

    def write(
        self,
        call: Call[R],
        name: str,
        holder: str,
        renewed: int | None = None,
        give_back: GiveBack | None = None,
    ) -> Flow[RedisStep, R]:
        """``call``, a script that grants or renews a lease, as a flow (``written``)."""
        return (yield from self.written(Eval(call), name, holder, renewed, give_back))

    def written(
        self,
        step: Sendable[R],
        name: str,
        holder: str,
        renewed: int | None = None,
        give_back: GiveBack | None = None,
    ) -> Flow[RedisStep, R]:
        """``step``, a write that grants or renews a lease: with ``min_replicas``, once
        the replicas acknowledged it (``replicated``); else as it is."""
        if self.min_replicas:
            return (yield from self.replicated(step, name, holder, renewed, give_back))
        yield cast(RedisStep, step)
        return step.result

    def replicated(
        self,
        step: Sendable[R],
        name: str,
        holder: str,
        renewed: int | None = None,
        give_back: GiveBack | None = None,
    ) -> Flow[RedisStep, R]:
        """``step`` followed by the wait for ``min_replicas`` acknowledgements.

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
        back = self.release(name, token, holder) if give_back is None else give_back(token)
        with suppress(RedisError):  # else the lease expires after its ttl
            yield Eval(back)
        detail = f"the lease was released ({self._wait})"
        raise NotReplicated(name, token, sent.acks, self.min_replicas, detail)


def _parse_renew(reply: Any) -> bool:
    return parse_flag(reply, "renew")


def _parse_rw_renew(reply: Any) -> bool:
    return parse_flag(reply, "rw renew")


def _parse_rw_release(reply: Any) -> bool:
    return parse_flag(reply, "rw release")


class LockFlows(RedisFlows):
    """The operations of one ``FencedLock``: ``LOCK_ACQUIRE``/``LOCK_RELEASE`` on its own
    keys, in redis-py's ``Lock`` form.

    The ``name`` the protocol passes is the lock's own; the keys were built once, with
    the client's encoder. A lock renews through redis-py's ``extend``/``reacquire``.
    ``status`` and ``force_release`` act on the lock too, never on the fence's lease.
    """

    def __init__(
        self, keys: LockKeys, counter_idle: float | None, socket_timeout: float | None
    ) -> None:
        super().__init__(counter_idle, socket_timeout)
        self.keys = keys

    def acquire(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int = 0, queued: bool = False
    ) -> Call[int | Busy]:
        args = lock_acquire_args(self.keys, holder, ttl_ms, self._idle_ms, queue_ms, queued)
        return LOCK_ACQUIRE, args, parse_acquire

    def release(self, name: str, token: int, holder: str) -> Call[bool]:
        return self.release_value(holder_bytes(holder))

    def release_value(self, value: bytes) -> Call[bool]:
        """End the lock holding ``value`` (hand it to a queued waiter, if any)."""
        return LOCK_RELEASE, lock_release_args(self.keys, value), parse_release

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Flow[RedisStep, bool]:
        raise NotImplementedError("a FencedLock renews with redis-py's extend and reacquire")

    def status(self, name: str) -> Call[FenceStatus]:
        return self.lock_status(name, self.keys)

    def force_release(self, name: str) -> Call[FenceStatus]:
        return self.force_release_lock(name, self.keys)

    def _wake_key(self, name: str, holder: str) -> bytes:
        return self.keys.wake(holder)
