"""The in-memory issuer: real leases and tokens inside one process, for tests and examples.

It has the same semantics as the server issuers (exclusive leases with a TTL, strictly
increasing tokens, holder-checked renew/release, wake-up on release) but its state
dies with the process, so it fences threads and tasks of one process only.
Imports the fence classes and the issuer protocols.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ._lease.async_fence import AsyncFence
from ._lease.core import DEFAULT_TTL
from ._lease.fence import Fence
from ._primitives.limiter import Admission, AsyncLimiter, Limiter, LimitUse
from ._primitives.rwlock import AsyncRWLock, RWLock
from ._primitives.semaphore import AsyncSemaphore, Semaphore
from .issuer import READ, WRITE, Busy, FenceStatus, RWStatus


@dataclass
class _Lease:
    token: int
    holder: str
    expires_at: float


@dataclass
class _ReadWrite:
    """The state of one read-write lock (docs/rwlock.md): the writer's lease, the readers'
    expiries by holder id, the epoch they share, and the waiting writer's marker."""

    writer: _Lease | None = None
    readers: dict[str, float] = field(default_factory=dict)
    epoch: int = 0
    waiting: tuple[str, float] | None = None

    def drop_expired(self, now: float) -> None:
        if self.writer is not None and self.writer.expires_at <= now:
            self.writer = None
        readers = self.readers
        if readers and min(readers.values()) <= now:  # a scan only when one has ended
            for holder in [h for h, expires_at in readers.items() if expires_at <= now]:
                del readers[holder]
        if self.waiting is not None and self.waiting[1] <= now:
            self.waiting = None


class MemoryWindows:
    """The windows of a memory store: per limiter name, the times of its admissions
    (sliding) or its window's start and count (fixed), in whole microseconds of
    ``clock`` (so that a waiter that slept exactly ``retry_in`` finds the admission free,
    whatever the float rounding). Not thread-safe by itself: the memory issuer calls it
    under its lock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._logs: dict[str, collections.deque[int]] = {}
        self._fixed: dict[str, tuple[int, int]] = {}

    def use(self, name: str, per_ms: int, window: str) -> LimitUse:
        now, per = round(self._clock() * 1e6), per_ms * 1000
        if window == "fixed":
            start, count = self._fixed.get(name, (now - per, 0))
            if now >= start + per or not count:
                return LimitUse(0, None, now / 1e6)
            return LimitUse(count, (start + per - now) / 1e6, now / 1e6)
        counted = [at for at in self._logs.get(name, ()) if at > now - per]
        if not counted:
            return LimitUse(0, None, now / 1e6)
        return LimitUse(len(counted), (counted[0] + per - now) / 1e6, now / 1e6)

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        now, per = round(self._clock() * 1e6), per_ms * 1000
        if window == "fixed":
            start, count = self._fixed.get(name, (now - per, 0))
            if now >= start + per:
                start, count = now, 0
            if count < limit:
                self._fixed[name] = (start, count + 1)
                return Admission(True, 0.0, now / 1e6)
            return Admission(False, (start + per - now) / 1e6, now / 1e6)
        log = self._logs.setdefault(name, collections.deque())
        while log and log[0] <= now - per:
            log.popleft()
        if len(log) < limit:
            log.append(now)
            return Admission(True, 0.0, now / 1e6)
        return Admission(False, (log[len(log) - limit] + per - now) / 1e6, now / 1e6)


class MemoryIssuer:
    """Leases and counters in this process's memory; thread-safe; wakes waiters on release.

    It can also be inspected and force-released (``fencing.issuer.Inspects``,
    ``ForceReleases``), like the server issuers.

    ``clock`` is the issuer's clock for lease lifetimes (a test may pass a virtual one).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._changed = threading.Condition()
        self._leases: dict[str, _Lease] = {}
        self._counters: dict[str, int] = {}
        self._windows = MemoryWindows(clock)
        self._rw: dict[str, _ReadWrite] = {}

    def _live(self, name: str) -> _Lease | None:
        lease = self._leases.get(name)
        if lease is not None and lease.expires_at <= self._clock():
            del self._leases[name]
            return None
        return lease

    def _held_by(self, name: str, token: int, holder: str) -> _Lease | None:
        lease = self._live(name)
        if lease is None or lease.token != token or lease.holder != holder:
            return None
        return lease

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        with self._changed:
            lease = self._live(name)
            now = self._clock()
            if lease is not None:
                return Busy(lease.expires_at - now)
            token = self._counters.get(name, 0) + 1
            self._counters[name] = token
            self._leases[name] = _Lease(token, holder, now + ttl_ms / 1000)
            return token

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> int | Busy:
        """``fencing.issuer.TakesSlots``: the slot ``f"{group}{slot}"``, refused while
        ``permits`` other slots of the group are held."""
        name = f"{group}{slot}"
        with self._changed:
            others = [
                other
                for other in self._leases
                if other != name and other.startswith(group) and other[len(group) :].isdigit()
            ]
            if sum(self._live(other) is not None for other in others) >= permits:
                return Busy(None)
            return self.try_acquire(name, holder, ttl_ms)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        with self._changed:
            lease = self._held_by(name, token, holder)
            if lease is not None:
                lease.expires_at = self._clock() + ttl_ms / 1000
            return lease is not None

    def release(self, name: str, token: int, holder: str) -> bool:
        with self._changed:
            if self._held_by(name, token, holder) is None:
                return False
            del self._leases[name]
            self._changed.notify_all()
            return True

    def await_release(self, name: str, seconds: float) -> None:
        with self._changed:
            self._changed.wait(seconds)

    def _next_token(self, name: str) -> int:
        token = self._counters[name] = self._counters.get(name, 0) + 1
        return token

    def _read_write(self, name: str) -> _ReadWrite:
        state = self._rw.get(name)
        if state is None:
            state = self._rw[name] = _ReadWrite()
        state.drop_expired(self._clock())
        return state

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """``fencing.issuer.ReadWrites``: a read or write lease of the lock ``name``; the
        token comes from the fence ``name``'s counter."""
        with self._changed:
            state = self._read_write(name)
            now = self._clock()
            writer, waiting = state.writer, state.waiting
            if mode == READ:
                if writer is not None:
                    return Busy(writer.expires_at - now)
                if waiting is not None:  # a writer waits: new readers wait behind it
                    return Busy(waiting[1] - now)
                if not state.readers:  # the first reader of an empty lock: a new epoch
                    state.epoch = self._next_token(name)
                state.readers[holder] = now + ttl_ms / 1000
                return state.epoch
            if waiting is not None and waiting[0] == holder and not queue_ms:
                state.waiting = waiting = None  # it waits no more
            if writer is not None or state.readers:
                if queue_ms and (waiting is None or waiting[0] == holder):
                    state.waiting = (holder, now + queue_ms / 1000)
                ends = max([*state.readers.values(), writer.expires_at if writer else now])
                return Busy(ends - now)
            if waiting is not None and waiting[0] == holder:
                state.waiting = None
            state.writer = _Lease(self._next_token(name), holder, now + ttl_ms / 1000)
            return state.writer.token

    def _rw_held(self, name: str, mode: str, token: int, holder: str) -> _ReadWrite | None:
        state = self._read_write(name)
        if mode == READ:
            held = holder in state.readers and state.epoch == token
        else:
            writer = state.writer
            held = writer is not None and writer.token == token and writer.holder == holder
        return state if held else None

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """``fencing.issuer.ReadWrites``: extend that exact lease."""
        with self._changed:
            state = self._rw_held(name, mode, token, holder)
            if state is None:
                return False
            expires_at = self._clock() + ttl_ms / 1000
            if mode == READ:
                state.readers[holder] = expires_at
            elif state.writer is not None:
                state.writer.expires_at = expires_at
            return True

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        """``fencing.issuer.ReadWrites``: end that exact lease; wakes the waiters."""
        with self._changed:
            state = self._rw_held(name, mode, token, holder)
            if state is None:
                return False
            if mode == READ:
                del state.readers[holder]
            else:
                state.writer = None
            self._changed.notify_all()
            return True

    def rw_await(self, name: str, seconds: float) -> None:
        """``fencing.issuer.ReadWrites``: until a lease may have ended, at most ``seconds``."""
        self.await_release(name, seconds)

    def rw_status(self, name: str) -> RWStatus:
        """``fencing.issuer.OperatesReadWrites``: the writer or the readers of ``name``."""
        with self._changed:
            return self._rw_status(name)

    def _rw_status(self, name: str) -> RWStatus:
        state = self._rw.get(name) or _ReadWrite()
        state.drop_expired(now := self._clock())
        last, waiting = self._counters.get(name), state.waiting and state.waiting[0]
        if state.writer is not None:
            writer = state.writer
            left = {writer.holder: writer.expires_at - now}
            return RWStatus(name, True, WRITE, writer.token, left, waiting, last)
        if state.readers:
            left = {holder: ends - now for holder, ends in state.readers.items()}
            return RWStatus(name, True, READ, state.epoch, left, waiting, last)
        return RWStatus(name, False, waiting=waiting, last_token=last)

    def rw_force_release(self, name: str) -> RWStatus:
        """``fencing.issuer.OperatesReadWrites``: end every lease of ``name``; the counter
        stays, so the next token is higher; wakes the waiters."""
        with self._changed:
            ended = self._rw_status(name)
            if ended.held:
                state = self._rw[name]
                state.writer = None
                state.readers.clear()
                self._changed.notify_all()
            return ended

    def status(self, name: str) -> FenceStatus:
        with self._changed:
            return self._status(name)

    def _status(self, name: str) -> FenceStatus:
        lease = self._live(name)
        last = self._counters.get(name)
        if lease is None:
            return FenceStatus(name, held=False, last_token=last)
        left = lease.expires_at - self._clock()
        return FenceStatus(name, True, lease.holder, lease.token, left, last_token=last)

    def names(self, prefix: str = "") -> Iterator[str]:
        with self._changed:
            found = sorted(name for name in self._counters if name.startswith(prefix))
        return iter(found)

    def force_release(self, name: str) -> FenceStatus:
        """End the lease whoever holds it; the counter stays, so the next token is higher."""
        with self._changed:
            ended = self._status(name)
            if ended.held:
                del self._leases[name]
                self._changed.notify_all()
            return ended

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """One request of the rate limiter ``name``, decided on this issuer's clock."""
        with self._changed:
            return self._windows.admit(name, limit, per_ms, window)

    def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """The use of the rate limiter ``name`` now, on this issuer's clock."""
        with self._changed:
            return self._windows.use(name, per_ms, window)

    def limiter(self, name: str, limit: int, per: float, window: str = "sliding") -> Limiter:
        """At most ``limit`` admissions per ``per`` seconds, on this issuer's clock."""
        return Limiter(self, name, limit, per, window)

    def aio_limiter(
        self, name: str, limit: int, per: float, window: str = "sliding"
    ) -> AsyncLimiter:
        """The asyncio twin of ``limiter``: the same windows."""
        return AsyncLimiter(AsyncMemoryIssuer(self), name, limit, per, window)

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        """A semaphore of ``permits`` slots on this issuer (waiters woken on release)."""
        return Semaphore(self, name, permits, ttl)

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        """The asyncio twin of ``semaphore``: the same slots, leases and tokens."""
        return AsyncSemaphore(AsyncMemoryIssuer(self), name, permits, ttl)

    def rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> RWLock:
        """A read-write lock on this issuer (docs/rwlock.md)."""
        return RWLock(self, name, ttl)

    def aio_rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncRWLock:
        """The asyncio twin of ``rwlock``: the same leases and tokens."""
        return AsyncRWLock(AsyncMemoryIssuer(self), name, ttl)


class AsyncMemoryIssuer:
    """``MemoryIssuer`` for asyncio: its calls never block, and waiting runs in a thread."""

    def __init__(self, issuer: MemoryIssuer) -> None:
        self.sync = issuer

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self.sync.try_acquire(name, holder, ttl_ms)

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> int | Busy:
        return self.sync.try_acquire_slot(group, slot, permits, holder, ttl_ms)

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self.sync.renew(name, token, holder, ttl_ms)

    async def release(self, name: str, token: int, holder: str) -> bool:
        return self.sync.release(name, token, holder)

    async def await_release(self, name: str, seconds: float) -> None:
        await asyncio.to_thread(self.sync.await_release, name, seconds)

    async def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        return self.sync.admit(name, limit, per_ms, window)

    async def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        return self.sync.limit_use(name, per_ms, window)

    async def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        return self.sync.rw_acquire(name, mode, holder, ttl_ms, queue_ms)

    async def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self.sync.rw_renew(name, mode, token, holder, ttl_ms)

    async def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        return self.sync.rw_release(name, mode, token, holder)

    async def rw_await(self, name: str, seconds: float) -> None:
        await asyncio.to_thread(self.sync.rw_await, name, seconds)

    async def status(self, name: str) -> FenceStatus:
        """``fencing.issuer.AsyncInspects``: see ``MemoryIssuer.status``."""
        return self.sync.status(name)


#: The issuer shared by every ``MemoryFence`` created without one.
default_memory_issuer = MemoryIssuer()


class MemoryFence(Fence):
    """A fence issued in this process's memory (threads of one process share it)."""

    def __init__(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: MemoryIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        super().__init__(issuer or default_memory_issuer, name, ttl, reentrant=reentrant)


class AsyncMemoryFence(AsyncFence):
    """The asyncio ``MemoryFence``; shares leases and tokens with sync memory fences."""

    def __init__(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: MemoryIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        super().__init__(
            AsyncMemoryIssuer(issuer or default_memory_issuer), name, ttl, reentrant=reentrant
        )
