"""``fencing.issuer``: what an issuer backend implements, for people who write one.

An issuer grants leases and issues tokens, one fence name at a time. Wrap one in
``fencing.Fence(issuer, name, ttl)`` (or ``fencing.aio.Fence`` for an ``AsyncIssuer``)
and the fence adds everything else: argument checks, holder ids, waiting with a
deadline, ``hold()`` with background renewal, logs. Check it with the public contract,
``fencing.testing.contract`` (see docs/issuers.md).

The three calls every issuer has (``Issuer``, or ``AsyncIssuer`` with coroutines):

- ``try_acquire(name, holder, ttl_ms)``: take the lease if free or expired, for
  ``ttl_ms`` milliseconds by the issuer's clock, and return a token larger than every
  token issued for ``name`` before; else ``Busy``. Atomic on the issuer.
- ``renew(name, token, holder, ttl_ms)`` and ``release(name, token, holder)``: act only
  if ``token`` *and* ``holder`` still hold the lease, in the same atomic step; return
  whether they did.

Optional capabilities, each its own protocol; a fence checks for them once:

- ``WakesOnRelease``: ``await_release(name, seconds)`` blocks until a release may have
  happened (or ``seconds`` pass), so waiters need not poll. Without it, waiters back
  off with jitter.
- ``WatchesLease``: ``await_change(name, token, seconds)`` blocks on the engine's watch
  until the lease of ``name`` may no longer be the one of ``token`` (or ``seconds``
  pass), so ``Election.observe`` need not poll (etcd, ZooKeeper, Redis).
- ``HandOff``: a release hands the lease straight to the first queued waiter (Redis).
  ``try_acquire_queued`` also queues a waiter that finds the lease busy, and
  ``await_handoff`` waits for the token a release hands over.
- ``TakesSlots``: ``try_acquire_slot(group, slot, permits, holder, ttl_ms)`` takes the
  fence ``f"{group}{slot}"`` as ``try_acquire`` does, but only while fewer than
  ``permits`` fences ``f"{group}{k}"`` (any ``k``, also ``k >= permits``) are held,
  counted in the same atomic step; else ``Busy``. A semaphore uses it so that a client
  with a lower ``permits`` lets no new holder in until the count is under it
  (docs/limits.md); without it, a semaphore counts only the slots below its own.
- ``WakesSlots`` (with ``TakesSlots``): a semaphore's waiters are woken by the release
  of any of its slots. ``try_acquire_slot(..., wait_ms)`` answers a refused take with a
  ``SlotBusy`` whose ``since`` marks the semaphore's releases so far, read in the same
  atomic step (so no release after the refusal is missed), and keeps that mark alive
  ``wait_ms``; ``await_slot_release(group, since, seconds)`` blocks until a slot was
  released after ``since``; ``release_slot`` is ``release`` of a slot that also wakes
  them. Without it, a semaphore waits as its slots' fences would (``WakesOnRelease``
  on the slot whose lease ends first, else backing off with jitter).

Read-write locks (``fencing.RWLock``, docs/rwlock.md), a protocol of their own:

- ``ReadWrites``: ``rw_acquire(name, mode, holder, ttl_ms, queue_ms)`` grants a
  ``"read"`` or ``"write"`` lease of the read-write lock ``name`` and returns its token
  (readers that hold together share one, the read epoch), else ``Busy``; a refused
  writer with ``queue_ms`` > 0 sets the waiting-writer marker that stops new readers;
  ``rw_renew``/``rw_release`` act only for that exact lease; ``rw_await(name, seconds)``
  blocks until a lease of ``name`` may have ended. Each call is one atomic step. Tokens
  come from the counter of the fence ``name``.

Operations (the ``fencing status``, ``list`` and ``release --force`` commands), each its
own protocol too; an issuer without them works, the command line says it cannot
inspect it:

- ``Inspects``: ``status(name)`` returns a ``FenceStatus`` (held?, holder, token, time
  left, waiters if known, last token issued), read in one atomic step; ``names(prefix)``
  lists the fences that exist.
- ``AsyncInspects``: ``await status(name)``, the same read for an asyncio issuer.
- ``ForceReleases``: ``force_release(name)`` ends the current lease whoever holds it, in
  one atomic step that also makes sure the next token is above the evicted one, and
  returns a ``FenceStatus`` of the lease it ended (``held`` False when there was none).
- ``OperatesLocks``: the same two for a lock kept as redis-py's ``Lock`` keeps it (the
  ``--lock`` option of ``fencing status`` and ``fencing release --force``).
- ``OperatesReadWrites``: the same two for a read-write lock (the ``--rwlock`` option),
  reported as an ``RWStatus``: the writer or the readers, and their token.

Errors: translate your driver's errors into ``fencing.FenceUnavailable`` (``raise
FenceUnavailable(...) from exc``), or ``fencing.FenceSetupError`` when the store answers
but is not set up (a missing table, a permission), with a message that says what to
run or grant; never leave a lease half taken.

Imports nothing from the package: the core imports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Busy:
    """Reply to ``try_acquire`` when another holder has the lease.

    ``expires_in`` is the lease's remaining lifetime in seconds by the issuer's clock,
    or ``None`` when the issuer cannot tell.
    """

    expires_in: float | None


@dataclass(frozen=True)
class SlotBusy(Busy):
    """``WakesSlots.try_acquire_slot``'s refusal when the caller will wait: ``since`` marks
    the semaphore's releases as they were at the refusal (read in the same atomic step);
    ``await_slot_release(group, since, seconds)`` returns at the first release after it."""

    since: str


class Issuer(Protocol):
    """A blocking issuer: grants leases and issues tokens (see the module docstring)."""

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        """Take the free or expired lease and return the new token, else ``Busy``."""
        ...

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        """Extend the lease to ``ttl_ms`` from now if ``token``/``holder`` still hold it."""
        ...

    def release(self, name: str, token: int, holder: str) -> bool:
        """End the lease if ``token``/``holder`` still hold it."""
        ...


class AsyncIssuer(Protocol):
    """The asyncio ``Issuer``: the same calls as coroutines."""

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        """See ``Issuer.try_acquire``."""
        ...

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        """See ``Issuer.renew``."""
        ...

    async def release(self, name: str, token: int, holder: str) -> bool:
        """See ``Issuer.release``."""
        ...


@runtime_checkable
class TakesSlots(Protocol):
    """Capability: a semaphore's slot is taken only while fewer than ``permits`` of its
    slots are held, counted in the same atomic step as the take."""

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> int | Busy:
        """``try_acquire(f"{group}{slot}", holder, ttl_ms)``, refused (``Busy``) while
        ``permits`` or more fences ``f"{group}{k}"``, any ``k``, are held."""
        ...


@runtime_checkable
class AsyncTakesSlots(Protocol):
    """The asyncio ``TakesSlots``."""

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> int | Busy:
        """See ``TakesSlots.try_acquire_slot``."""
        ...


@runtime_checkable
class WakesSlots(TakesSlots, Protocol):
    """Capability: a semaphore's waiters are woken by the release of any of its slots."""

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        """``TakesSlots.try_acquire_slot``; with ``wait_ms`` > 0 a refusal is a ``SlotBusy``
        whose mark stays usable for at least ``wait_ms`` milliseconds."""
        ...

    def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """``release(f"{group}{slot}", token, holder)``; a slot left free wakes the
        semaphore's waiters."""
        ...

    def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """Block up to ``seconds``, returning early once a slot of the semaphore was released
        after ``since`` (a ``SlotBusy`` mark): that slot if known, else ``None``."""
        ...


@runtime_checkable
class AsyncWakesSlots(AsyncTakesSlots, Protocol):
    """The asyncio ``WakesSlots``."""

    async def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> int | Busy:
        """See ``WakesSlots.try_acquire_slot``."""
        ...

    async def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """See ``WakesSlots.release_slot``."""
        ...

    async def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """See ``WakesSlots.await_slot_release``."""
        ...


@runtime_checkable
class WakesOnRelease(Protocol):
    """Capability: waiters block until a release instead of polling."""

    def await_release(self, name: str, seconds: float) -> None:
        """Block up to ``seconds``, returning early when the lease of ``name`` may be free."""
        ...


@runtime_checkable
class AsyncWakesOnRelease(Protocol):
    """The asyncio ``WakesOnRelease``."""

    async def await_release(self, name: str, seconds: float) -> None:
        """See ``WakesOnRelease.await_release``."""
        ...


@runtime_checkable
class WatchesLease(Protocol):
    """Capability: wait on the engine's watch for the lease of a name to change
    (``Election.observe`` wakes on it instead of polling)."""

    def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """Block up to ``seconds``, returning early when the lease of ``name`` may no
        longer be the one of ``token`` (``None``: when a lease may exist)."""
        ...


@runtime_checkable
class AsyncWatchesLease(Protocol):
    """The asyncio ``WatchesLease``."""

    async def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """See ``WatchesLease.await_change``."""
        ...


@runtime_checkable
class HandOff(Protocol):
    """Capability: a release hands the lease and a fresh token to the first queued waiter.

    The fence queues a waiter in the same atomic step as its attempt (``queue_ms`` > 0:
    keep its place that long), then ``await_handoff`` returns the token a release
    handed over, or ``None`` if none came in time. A waiter that gives up calls
    ``try_acquire_queued`` once more with ``queue_ms`` 0 to leave the queue (which may
    still grant it the lease). ``queued`` says an earlier attempt queued ``holder``: a
    release may have granted it the lease already, whose token is then returned.
    """

    def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        """``try_acquire`` that also queues (or unqueues) ``holder``."""
        ...

    def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        """Block up to ``seconds`` for a lease handed to ``holder``; its token, or ``None``."""
        ...


@runtime_checkable
class AsyncHandOff(Protocol):
    """The asyncio ``HandOff``."""

    async def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> int | Busy:
        """See ``HandOff.try_acquire_queued``."""
        ...

    async def await_handoff(self, name: str, holder: str, seconds: float) -> int | None:
        """See ``HandOff.await_handoff``."""
        ...


#: The two sides of a read-write lock, as ``ReadWrites`` names them.
READ = "read"
WRITE = "write"


@runtime_checkable
class ReadWrites(Protocol):
    """Capability: read-write locks (``fencing.RWLock``; the rules are in docs/rwlock.md).

    ``mode`` is ``READ`` or ``WRITE``. Readers that hold together share one token, the
    read epoch: the next token of the counter of the fence ``name`` when the first
    reader enters an empty lock. A writer gets the next token. A writer refused with
    ``queue_ms`` > 0 marks itself waiting for ``queue_ms`` (no new reader enters while
    the marker lives), unless another writer's marker is live; ``queue_ms`` 0 clears
    ``holder``'s own marker.
    """

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """Grant a ``mode`` lease to ``holder`` for ``ttl_ms``: its token, else ``Busy``."""
        ...

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """Extend the ``mode`` lease of ``token``/``holder``; whether it was still held."""
        ...

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        """End the ``mode`` lease of ``token``/``holder``; whether it was still held."""
        ...

    def rw_await(self, name: str, seconds: float) -> None:
        """Block up to ``seconds``, returning early when a lease of ``name`` may have ended."""
        ...


@runtime_checkable
class AsyncReadWrites(Protocol):
    """The asyncio ``ReadWrites``."""

    async def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """See ``ReadWrites.rw_acquire``."""
        ...

    async def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        """See ``ReadWrites.rw_renew``."""
        ...

    async def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        """See ``ReadWrites.rw_release``."""
        ...

    async def rw_await(self, name: str, seconds: float) -> None:
        """See ``ReadWrites.rw_await``."""
        ...


@dataclass(frozen=True)
class FenceStatus:
    """What an issuer knows about one fence, read in one atomic step.

    - ``held``: a lease is live now (by the issuer's clock);
    - ``holder``, ``token``: the live lease's holder id and token (``None`` when free);
    - ``expires_in``: its remaining lifetime in seconds (``None`` when free, or when the
      lease has no expiry);
    - ``last_token``: the last token issued for the name (``None`` when the issuer has
      no record of it: never used, or a Redis counter that expired; the next token is
      still above every earlier one);
    - ``waiters``: how many waiters are queued for it, where the issuer knows (Redis
      hand-off queue), else ``None``.
    """

    name: str
    held: bool
    holder: str | None = None
    token: int | None = None
    expires_in: float | None = None
    last_token: int | None = None
    waiters: int | None = None


@runtime_checkable
class Inspects(Protocol):
    """Capability: report a fence's state and list the fences (``fencing status``/``list``)."""

    def status(self, name: str) -> FenceStatus:
        """The state of ``name`` (a fence never used is reported free, ``last_token`` None)."""
        ...

    def names(self, prefix: str = "") -> Iterator[str]:
        """The names of the fences that exist and start with ``prefix``, each once."""
        ...


@runtime_checkable
class AsyncInspects(Protocol):
    """Capability: the asyncio twin of ``Inspects.status`` (what an asyncio election's
    ``leader()`` reads); every asyncio issuer of the package has it."""

    async def status(self, name: str) -> FenceStatus:
        """See ``Inspects.status``."""
        ...


@runtime_checkable
class ForceReleases(Protocol):
    """Capability: end a lease whoever holds it (``fencing release --force``).

    In one atomic step: end the live lease of ``name`` if any, and make sure the next
    token issued for ``name`` is above the ended lease's token, so that its holder is
    refused at every guard once the next holder has written. Returns the ended lease
    (``held=True`` with its holder and token), or a status with ``held=False`` when no
    lease was live (nothing changed).
    """

    def force_release(self, name: str) -> FenceStatus:
        """End the lease of ``name`` whoever holds it; the ended lease, as it was."""
        ...


@runtime_checkable
class OperatesLocks(Protocol):
    """Capability: status and force-release of a *lock*, kept as redis-py's ``Lock`` keeps
    it: the key ``name`` itself holding a lock token (a ``fencing.FencedLock``'s, or an
    old ``redis.lock.Lock``'s during a migration), beside the fence's token counter.

    Separate from ``Inspects``/``ForceReleases`` because a lock's key is the bare name,
    which could as well be any key of the application's: the caller says it means a lock
    (``--lock``), nothing guesses. Both calls raise ``ValueError`` when the key holds
    something a lock never does (nothing changed). The lock's value is only the lock
    token, so a status's ``holder`` is that token and its ``token`` is ``None``.
    """

    def lock_status(self, name: str) -> FenceStatus:
        """The state of the lock ``name``, read in one atomic step (``last_token``: the
        fence's counter; ``waiters``: the lock's queue)."""
        ...

    def force_release_lock(self, name: str) -> FenceStatus:
        """End the lock ``name`` whoever holds it and make sure, in the same atomic step,
        that the next token is above every token its holder could have; the ended lock
        (``last_token``: the counter the next token exceeds), or ``held=False``."""
        ...


@dataclass(frozen=True)
class RWStatus:
    """What an issuer knows about one read-write lock, read in one atomic step.

    - ``held``: a lease of the lock is live now (by the issuer's clock);
    - ``mode``: ``WRITE`` while a writer holds it, ``READ`` while readers do, else None;
    - ``token``: the writer's token, or the readers' epoch (None when free);
    - ``holders``: each live lease's holder id and seconds left: the writer's, or every
      reader's (empty when free; a lease without expiry has ``None``);
    - ``waiting``: the holder id of the writer whose waiting marker is live (no new
      reader enters while it lives), else None;
    - ``last_token``: the last token issued for the name, as ``FenceStatus`` has it.
    """

    name: str
    held: bool
    mode: str | None = None
    token: int | None = None
    holders: Mapping[str, float | None] = field(default_factory=dict)
    waiting: str | None = None
    last_token: int | None = None


@runtime_checkable
class OperatesReadWrites(Protocol):
    """Capability: status and force-release of a read-write lock (``fencing status
    --rwlock``, ``fencing release --rwlock --force``).

    ``rw_force_release`` ends, in one atomic step, every live lease of the lock (the
    writer's, or every reader's) and makes sure the next token issued for ``name`` is
    above the ended leases' token, so that their holders are refused at every guard once
    the next holder has claimed; a waiting writer's marker stays (that writer goes in
    next). Their renewals and releases then fail (``LeaseLost``).
    """

    def rw_status(self, name: str) -> RWStatus:
        """The state of the read-write lock ``name`` (never used: free)."""
        ...

    def rw_force_release(self, name: str) -> RWStatus:
        """End every lease of ``name`` whoever holds it; the ended leases, as they were
        (``held=False`` when none was live: nothing changed)."""
        ...


__all__ = [
    "AsyncHandOff",
    "AsyncInspects",
    "AsyncIssuer",
    "AsyncTakesSlots",
    "AsyncWakesOnRelease",
    "AsyncWakesSlots",
    "AsyncWatchesLease",
    "Busy",
    "FenceStatus",
    "ForceReleases",
    "HandOff",
    "Inspects",
    "Issuer",
    "OperatesLocks",
    "OperatesReadWrites",
    "RWStatus",
    "SlotBusy",
    "TakesSlots",
    "WakesOnRelease",
    "WakesSlots",
    "WatchesLease",
]
