"""``fencing.connect("etcd://...")``: fences on the etcd cluster of a URL.

Imports the etcd issuer.
"""

from __future__ import annotations

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._election import AsyncElection, Election
from .._fence import Fence
from .._semaphore import AsyncSemaphore, Semaphore
from ._issuer import AsyncEtcdFence, AsyncEtcdIssuer, EtcdFence, EtcdIssuer
from ._url import parse_etcd_url


class EtcdBackend:
    """Fences on the etcd cluster of ``url`` (one issuer, so one set of channels, for all
    blocking fences; the asyncio fences share one issuer too, opened per event loop)."""

    def __init__(self, url: str) -> None:
        self.options = parse_etcd_url(url)  # a bad URL fails here, not at the first acquire
        self.url = url
        self._issuer: EtcdIssuer | None = None
        self._aio_issuer: AsyncEtcdIssuer | None = None

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
        return AsyncEtcdFence(self._async_issuer(), name, ttl, reentrant=reentrant)

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election named ``name`` on this backend (see ``fencing.Election``)."""
        return Election(self.issuer, name, ttl)

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """The asyncio election of that name (see ``fencing.aio.Election``)."""
        return AsyncElection(self._async_issuer(), name, ttl)

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        """A semaphore of ``permits`` slots, each slot a fence of this cluster (its key's
        revision the slot's token; waiters watch a slot's key for its release)."""
        return Semaphore(self.issuer, name, permits, ttl)

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        """The asyncio ``semaphore``: the same keys, on the asyncio issuer."""
        return AsyncSemaphore(self._async_issuer(), name, permits, ttl)

    def _async_issuer(self) -> AsyncEtcdIssuer:
        if self._aio_issuer is None:
            self._aio_issuer = AsyncEtcdIssuer(self.options)
        return self._aio_issuer

    def close(self) -> None:
        """Close the blocking fences' channels (they reopen if a fence is used again);
        the asyncio fences' channels belong to the event loop that opened them."""
        if self._issuer is not None:
            self._issuer.close()
