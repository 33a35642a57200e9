"""``fencing.issuer``: what an issuer backend implements, for people who write one.

An issuer grants leases and issues tokens, one fence name at a time. Wrap one in
``fencing.Fence(issuer, name, ttl)`` (or ``fencing.AsyncFence`` for an ``AsyncIssuer``)
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
- ``HandOff``: a release hands the lease straight to the first queued waiter (Redis).
  ``try_acquire_queued`` also queues a waiter that finds the lease busy, and
  ``await_handoff`` waits for the token a release hands over.

Errors: translate your driver's errors into ``fencing.FenceUnavailable`` (``raise
FenceUnavailable(...) from exc``); never leave a lease half taken.

Imports nothing from the package: the core imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Busy:
    """Reply to ``try_acquire`` when another holder has the lease.

    ``expires_in`` is the lease's remaining lifetime in seconds by the issuer's clock,
    or ``None`` when the issuer cannot tell.
    """

    expires_in: float | None


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


__all__ = [
    "AsyncHandOff",
    "AsyncIssuer",
    "AsyncWakesOnRelease",
    "Busy",
    "HandOff",
    "Issuer",
    "WakesOnRelease",
]
