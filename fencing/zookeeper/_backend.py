"""``fencing.connect("zookeeper://...")``: fences on the ZooKeeper ensemble of a URL.

One kazoo client (one session) per backend, shared by its blocking and asyncio fences
and started on first use, not by ``connect``; ``backend.close()`` ends it, and an
asyncio object's ``aclose()`` leaves it alone (it owns nothing of its own). Imports the
issuers, the URL parser and kazoo.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from .._connect import NoLimiter
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from .._primitives.election import AsyncElection, Election
from .._primitives.rwlock import AsyncRWLock, RWLock
from .._primitives.semaphore import AsyncSemaphore, Semaphore
from ._issuer import AsyncZooKeeperIssuer, Starter, ZooKeeperIssuer
from ._layout import ZooKeeperUrl


class ZooKeeperBackend(NoLimiter):
    """Fences on the ensemble of ``url`` (see ``ZooKeeperUrl`` for its options)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.config = ZooKeeperUrl.parse(url)  # a bad URL fails here, before any I/O
        self.client = KazooClient(
            hosts=self.config.connect_string, timeout=self.config.session_timeout
        )
        self._starter = Starter(self.client, self.config.timeout)
        self._issuer = ZooKeeperIssuer(
            self.client, timeout=self.config.timeout, start=self._starter
        )
        self._async_issuer = AsyncZooKeeperIssuer(
            self.client, timeout=self.config.timeout, start=self._starter
        )

    def __repr__(self) -> str:
        return f"ZooKeeperBackend({self.url!r})"

    def fence(self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False) -> Fence:
        return Fence(self._issuer, name, ttl, reentrant=reentrant)

    @property
    def issuer(self) -> ZooKeeperIssuer:
        """The blocking issuer (what ``fencing status``/``list``/``release`` inspect)."""
        return self._issuer

    def aio_fence(
        self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False
    ) -> AsyncFence:
        return AsyncFence(self._async_issuer, name, ttl, reentrant=reentrant)

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election named ``name`` on this backend (see ``fencing.Election``)."""
        return Election(self._issuer, name, ttl)

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """The asyncio election of that name (see ``fencing.aio.Election``)."""
        return AsyncElection(self._async_issuer, name, ttl)

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        """A semaphore of ``permits`` slots, each slot a fence of this ensemble: a permit
        lives as long as this backend's session (``ttl`` only paces ``hold()``'s checks),
        its token is the slot's lease znode's czxid."""
        return Semaphore(self._issuer, name, permits, ttl)

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        """The asyncio ``semaphore``: the same znodes and session."""
        return AsyncSemaphore(self._async_issuer, name, permits, ttl)

    def rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> RWLock:
        """A read-write lock of this ensemble (docs/rwlock.md; ``fencing.zookeeper.
        _rw_flows``): a lease lives as long as this backend's session (``ttl`` only paces
        ``hold()``'s checks), its token a zxid."""
        return RWLock(self._issuer, name, ttl)

    def aio_rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncRWLock:
        """The asyncio ``rwlock``: the same znodes and session."""
        return AsyncRWLock(self._async_issuer, name, ttl)

    def close(self) -> None:
        """End the session: every lease of this backend's fences is released with it."""
        self._starter.stop()
