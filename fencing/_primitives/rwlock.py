"""``RWLock`` and ``AsyncRWLock``: read-write locks whose readers are fenced too.

A read-write lock is two fences over one issuer: ``rw.read`` and ``rw.write`` are a
``Fence`` (``AsyncFence``) each, whose issuer is a ``Side`` of the lock, an adapter that
turns the fence protocol's calls into the issuer's read-write operations
(``fencing.issuer.ReadWrites``) for its mode. So acquiring (waiting, deadlines, leaving
the queue), renewing, releasing and ``hold()`` with its loss signals are the fence's
own flows, driven blocking or asyncio by the fence's drivers; nothing of them is written
again here. The issuer keeps the rules (docs/rwlock.md): exclusion, writer preference
through a waiting-writer marker (the fence's queue: ``try_acquire_queued``), and one
token sequence per name in which readers that hold together share the read epoch.

Readers of one epoch share a token value, so a read token (``ReadToken``) also names its
lease (the holder id) for this process: two threads reading through one ``rw.read``
each renew and release their own lease.

Imports the fences, the token, the validation helpers and the issuer protocols.
"""

from __future__ import annotations

from logging import DEBUG
from typing import Any, cast

from .._base.errors import LeaseLost
from .._base.log import acquire_log
from .._base.owned import Owner
from .._base.token import FenceToken
from .._base.validate import check_name, check_token_for
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL, BaseFence, Clock
from .._lease.fence import Fence
from ..issuer import READ, WRITE, AsyncIssuer, AsyncReadWrites, Issuer, ReadWrites


class ReadToken(FenceToken):
    """A read epoch's token as one read lease holds it: a ``FenceToken`` (the epoch, an
    ``int``) that also names its lease in this process (``lease``, the holder id).

    Pass it back to ``rw.read.renew``/``release``; a plain ``int`` names one of the
    epoch's leases the same ``rw.read`` holds. Pickled, it is a plain ``FenceToken``:
    the lease means nothing to another process, the token is all a guard needs.
    """

    lease: str

    def __new__(cls, value: int, name: str, lease: str) -> ReadToken:
        token = int.__new__(cls, value)  # FenceToken.__new__, inline: every read acquire's
        token.name = name
        token.lease = lease
        return token

    def __repr__(self) -> str:
        return f"ReadToken({int(self)}, name={self.name!r})"


class WriteToken(FenceToken):
    """A write lease's token (a ``FenceToken``); the type tells ``rw.read`` to refuse it."""

    def __repr__(self) -> str:
        return f"WriteToken({int(self)}, name={self.name!r})"


class Side:
    """One side (``READ`` or ``WRITE``) of the read-write locks of an issuer, seen as a
    fence's issuer with the hand-off capability (``fencing.issuer.HandOff``).

    Each method returns what the issuer's returns: a value on a blocking issuer, an
    awaitable on an asyncio one; so this one adapter serves ``Fence`` and ``AsyncFence``.
    ``try_acquire_queued`` passes the fence's queue time on as the waiting-writer
    marker's lifetime (a reader's is ignored), and ``await_handoff`` waits for any lease
    of the name to end: the next attempt takes the lock. An issuer with
    ``rw_await_after(name, holder, seconds)`` (Redis) waits from the holder's last
    refusal, so a release between that refusal and the wait is not missed, and returns
    the token of a write lease that release handed to the marked writer ``holder``
    (else ``None``), as a fence's queued hand-off does; a writer that gives up leaves
    the queue as the fence's waiters do, its next attempt returning a lease handed to it.
    Tokens reach the issuer as plain ``int``s (a ``ReadToken`` is one, with a lease).
    """

    __slots__ = ("await_after", "issuer", "mode")

    def __init__(self, issuer: ReadWrites | AsyncReadWrites, mode: str) -> None:
        self.issuer = issuer
        self.mode = mode
        self.await_after: Any = getattr(issuer, "rw_await_after", None)

    def __repr__(self) -> str:
        return f"Side({self.issuer!r}, {self.mode!r})"

    @property
    def adapted(self) -> object:
        """The issuer this side stands for (telemetry names its backend)."""
        return self.issuer

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> Any:
        return self.issuer.rw_acquire(name, self.mode, holder, ttl_ms, 0)

    def try_acquire_queued(
        self, name: str, holder: str, ttl_ms: int, queue_ms: int, queued: bool
    ) -> Any:
        return self.issuer.rw_acquire(name, self.mode, holder, ttl_ms, queue_ms)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Any:
        return self.issuer.rw_renew(name, self.mode, int(token), holder, ttl_ms)

    def release(self, name: str, token: int, holder: str) -> Any:
        return self.issuer.rw_release(name, self.mode, int(token), holder)

    def await_handoff(self, name: str, holder: str, seconds: float) -> Any:
        if self.await_after is not None:
            return self.await_after(name, holder, seconds)
        return self.issuer.rw_await(name, seconds)


class ReadLeases(BaseFence):
    """The read side's bookkeeping (no I/O), ahead of ``Fence``/``AsyncFence`` in the
    read fences' bases: one entry per read lease, keyed by its holder id, since the
    leases of one epoch share a token value (a fence keys its leases by token)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: holder id -> epoch, for every read lease this object holds
        self._readers: dict[str, int] = {}

    def _granted(self, token: int, holder: str) -> FenceToken:
        self._readers[holder] = token
        if acquire_log.isEnabledFor(DEBUG):
            acquire_log.debug("rwlock %r: read epoch %d (ttl %ss)", self.name, token, self.ttl)
        return ReadToken(token, self.name, holder)

    def _lease_of(self, token: object) -> tuple[int, str]:
        """The lease ``token`` names, as a ``ReadToken`` (so ``_forget`` finds it) and
        its holder id; ``ValueError`` for a write token, ``LeaseLost`` for none held.
        A ``ReadToken`` this side holds is the usual case, on every read release's path:
        it is returned as it is."""
        if (
            type(token) is ReadToken
            and token.name == self.name
            and self._readers.get(token.lease) == token
        ):
            return token, token.lease
        if isinstance(token, WriteToken):
            raise ValueError(
                f"a write token ({int(token)}) passed to the read side of {self.name!r}"
            )
        value = check_token_for(token, self.name)
        if isinstance(token, ReadToken):
            lease: str | None = token.lease
        else:
            lease = next((h for h, epoch in self._readers.items() if epoch == value), None)
        if lease is None or self._readers.get(lease) != value:
            raise LeaseLost(self.name, value, "this read side holds no lease with that token")
        return ReadToken(value, self.name, lease), lease

    def _forget(self, token: int) -> None:
        if isinstance(token, ReadToken):
            self._readers.pop(token.lease, None)

    def _released(self, token: int, held: bool) -> None:
        self._forget(token)
        super()._released(int(token), held)


class WriteLeases(BaseFence):
    """The write side's difference from a fence (no I/O): its tokens are ``WriteToken``s,
    and a read token passed to it is a ``ValueError``."""

    def _granted(self, token: int, holder: str) -> FenceToken:
        self._holders[token] = holder  # the fence's _granted, inline, its token typed
        if acquire_log.isEnabledFor(DEBUG):
            acquire_log.debug("rwlock %r: write token %d (ttl %ss)", self.name, token, self.ttl)
        return WriteToken(token, self.name)

    def _lease_of(self, token: object) -> tuple[int, str]:
        """The write lease ``token`` names; a ``WriteToken`` of this side, the usual case,
        checked inline (every write release's path); ``ValueError`` for a read token."""
        if type(token) is WriteToken and token.name == self.name:
            holder = self._holders.get(token)
            if holder is not None:
                return int(token), holder
        if isinstance(token, ReadToken):
            raise ValueError(
                f"a read token ({int(token)}) passed to the write side of {self.name!r}"
            )
        return super()._lease_of(token)


class ReadFence(ReadLeases, Fence):
    """``rw.read`` of a blocking ``RWLock``: a fence whose leases are shared (see
    ``ReadLeases``)."""


class WriteFence(WriteLeases, Fence):
    """``rw.write`` of a blocking ``RWLock``: an exclusive fence of the lock."""


class AsyncReadFence(ReadLeases, AsyncFence):
    """``rw.read`` of an ``AsyncRWLock``."""


class AsyncWriteFence(WriteLeases, AsyncFence):
    """``rw.write`` of an ``AsyncRWLock``."""


def check_read_writes(issuer: object, protocol: type) -> None:
    """``TypeError`` unless ``issuer`` has read-write locks (before any I/O)."""
    if not isinstance(issuer, protocol):
        raise TypeError(f"{type(issuer).__name__} has no read-write locks ({protocol.__name__})")


class RWLock:
    """A read-write lock on a blocking issuer with ``ReadWrites``: ``rw.read`` (shared)
    and ``rw.write`` (exclusive), each with a fence's ``acquire``, ``renew``, ``release``
    and ``hold``. Readers that hold together share one token, the read epoch, above every
    earlier write token and below every later one (docs/rwlock.md).

    ``RWLock(issuer, "catalog", ttl=30)``, or ``backend.rwlock(...)``.
    """

    def __init__(
        self,
        issuer: ReadWrites,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Clock | None = None,
    ) -> None:
        check_read_writes(issuer, ReadWrites)
        self.name = check_name(name)
        self.read = ReadFence(cast(Issuer, Side(issuer, READ)), self.name, ttl, clock=clock)
        self.write = WriteFence(cast(Issuer, Side(issuer, WRITE)), self.name, ttl, clock=clock)
        self.ttl = self.read.ttl

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, ttl={self.ttl})"


class AsyncRWLock(Owner):
    """The asyncio ``RWLock`` (``fencing.aio.RWLock``), on an issuer with
    ``AsyncReadWrites``: the same leases and tokens as a blocking lock of that name;
    ``aclose`` as ``AsyncFence.aclose``."""

    def __init__(
        self,
        issuer: AsyncReadWrites,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Clock | None = None,
    ) -> None:
        check_read_writes(issuer, AsyncReadWrites)
        self.name = check_name(name)
        read, write = Side(issuer, READ), Side(issuer, WRITE)
        self.read = AsyncReadFence(cast(AsyncIssuer, read), self.name, ttl, clock=clock)
        self.write = AsyncWriteFence(cast(AsyncIssuer, write), self.name, ttl, clock=clock)
        self.ttl = self.read.ttl

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, ttl={self.ttl})"
