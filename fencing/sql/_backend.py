"""``fencing.connect("sqlite:///..." or "postgresql://...")``: fences in a SQL database.

Imports the SQL issuers (the asyncio one on first use: it needs greenlet).
"""

from __future__ import annotations

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._election import AsyncElection, Election
from .._fence import Fence
from ._engines import parse_sql_url
from ._issuer import SqlFence, SqlIssuer, shared_issuer


class SqlBackend:
    """Fences in the ``fencing_leases`` table of a SQLite file or PostgreSQL database."""

    def __init__(self, url: str) -> None:
        parse_sql_url(url)  # a bad SQL URL fails here, not at the first acquire
        self.url = url

    def __repr__(self) -> str:
        return f"SqlBackend({self.url!r})"

    def fence(self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False) -> Fence:
        return SqlFence(self.url, name, ttl, reentrant=reentrant)

    @property
    def issuer(self) -> SqlIssuer:
        """The blocking issuer (what ``fencing status``/``list``/``release`` inspect)."""
        return shared_issuer(self.url)

    def aio_fence(
        self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False
    ) -> AsyncFence:
        from ._async_issuer import AsyncSqlFence

        return AsyncSqlFence(self.url, name, ttl, reentrant=reentrant)

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election named ``name`` on this backend (see ``fencing.Election``)."""
        return Election(self.issuer, name, ttl)

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """The asyncio election of that name (see ``fencing.aio.Election``)."""
        from ._async_issuer import shared_async_issuer

        return AsyncElection(shared_async_issuer(self.url), name, ttl)
