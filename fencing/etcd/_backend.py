"""``fencing.connect("etcd://...")``: fences on the etcd cluster of a URL.

Imports the etcd issuer.
"""

from __future__ import annotations

from .._base.owned import owned
from .._connect import NoLimiter
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from .._primitives.election import AsyncElection, Election
from .._primitives.rwlock import AsyncRWLock, RWLock
from .._primitives.semaphore import AsyncSemaphore, Semaphore
from ._issuer import AsyncEtcdFence, AsyncEtcdIssuer, EtcdFence, EtcdIssuer
from ._url import parse_etcd_url


class EtcdBackend(NoLimiter):
    """Fences on the etcd cluster of ``url`` (one issuer, so one set of channels, for all
    blocking fences; each asyncio fence, election and semaphore has an issuer of its own,
    its channels opened on the event loop that uses it and closed by its ``aclose()``)."""

    def __init__(self, url: str) -> None:
        self.options = parse_etcd_url(url)  # a bad URL fails here, not at the first acquire
        self.url = url
        self._issuer: EtcdIssuer | None = None

    def __repr__(self) -> str:
        return f"EtcdBackend({self.options.endpoints!r})"

    @property
    def issuer(self) -> EtcdIssuer:
        """The blocking issuer (what ``fencing status``/``list``/``release`` inspect)."""
        if self._issuer is None:
            self._issuer = EtcdIssuer(self.options)
        return self._issuer

    def fence(self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False) -> Fence:
        return EtcdFence(self.issuer, name, ttl, reentrant=reentrant)

    def aio_fence(
        self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False
    ) -> AsyncFence:
        issuer = AsyncEtcdIssuer(self.options)
        return owned(AsyncEtcdFence(issuer, name, ttl, reentrant=reentrant), issuer)

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election named ``name`` on this backend (see ``fencing.Election``)."""
        return Election(self.issuer, name, ttl)

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """The asyncio election of that name (see ``fencing.aio.Election``)."""
        issuer = AsyncEtcdIssuer(self.options)
        return owned(AsyncElection(issuer, name, ttl), issuer)

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        """A semaphore of ``permits`` slots, each slot a fence of this cluster (its key's
        revision the slot's token; waiters watch a slot's key for its release)."""
        return Semaphore(self.issuer, name, permits, ttl)

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        """The asyncio ``semaphore``: the same keys, on the asyncio issuer."""
        issuer = AsyncEtcdIssuer(self.options)
        return owned(AsyncSemaphore(issuer, name, permits, ttl), issuer)

    def rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> RWLock:
        """A read-write lock of this cluster (docs/rwlock.md): its writer's and readers'
        keys on etcd leases, revisions as tokens (``fencing.etcd._rw_messages``)."""
        return RWLock(self.issuer, name, ttl)

    def aio_rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncRWLock:
        """The asyncio ``rwlock``: the same keys, on the asyncio issuer."""
        issuer = AsyncEtcdIssuer(self.options)
        return owned(AsyncRWLock(issuer, name, ttl), issuer)

    def close(self) -> None:
        """Close the blocking fences' channels (they reopen if a fence is used again);
        each asyncio object's channels are closed by its ``aclose()``."""
        if self._issuer is not None:
            self._issuer.close()
