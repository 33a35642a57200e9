"""``fencing.connect("sqlite:///...", "postgresql://...", "mysql://...")``: fences in SQL.

The URL's ``lease`` option picks what a lease is: ``row`` (the default: a row of
``fencing_leases`` with an expiry) or, on PostgreSQL, MySQL and MariaDB, ``advisory`` (a
session-level advisory lock held on a connection kept for the lease; ``_advisory``). The option is
the SDK's and is taken off the URL before SQLAlchemy sees it.

Imports the SQL issuers (the asyncio ones on first use: they need greenlet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from .._base.owned import owned
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from .._primitives.election import AsyncElection, Election
from .._primitives.limiter import AsyncLimiter, Limiter
from .._primitives.rwlock import AsyncRWLock, RWLock
from .._primitives.semaphore import AsyncSemaphore, Semaphore
from ._engines import parse_sql_url
from ._issuer import SqlFence, shared_issuer
from ._schema import ADVISORY_BACKENDS

if TYPE_CHECKING:  # the asyncio issuer needs greenlet: imported on first use
    from ._async_issuer import AsyncSqlIssuer

#: The values of the URL's ``lease`` option.
LEASES = ("row", "advisory")


class SqlBackend:
    """Fences in a SQLite file or a PostgreSQL, MySQL or MariaDB database (see the module
    docstring); each asyncio fence, election, semaphore and limiter has an engine of its
    own, on the event loop that uses it, disposed of by its ``aclose()``."""

    def __init__(self, url: str) -> None:
        parsed = parse_sql_url(url)  # a bad SQL URL fails here, not at the first acquire
        given = [
            v for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True) if k == "lease"
        ]
        lease = given[0] if len(given) == 1 else "row" if not given else repr(given)
        if lease not in LEASES:
            raise ValueError(f"unknown lease={lease!r} in the URL: use lease=row or lease=advisory")
        if lease == "advisory" and parsed.get_backend_name() not in ADVISORY_BACKENDS:
            raise ValueError(
                "lease=advisory needs a PostgreSQL, MySQL or MariaDB URL, not "
                f"{parsed.get_backend_name()!r}"
            )
        self.url = url
        self.lease = lease
        #: The URL SQLAlchemy connects to (without the ``lease`` option).
        self.engine_url = url
        if given:
            without = parsed.difference_update_query(["lease"])
            self.engine_url = without.render_as_string(hide_password=False)

    def __repr__(self) -> str:
        return f"SqlBackend({self.url!r})"

    def fence(self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False) -> Fence:
        if self.lease == "advisory":
            from ._advisory import AdvisoryFence

            return AdvisoryFence(self.engine_url, name, ttl, reentrant=reentrant)
        return SqlFence(self.engine_url, name, ttl, reentrant=reentrant)

    @property
    def issuer(self) -> object:
        """The blocking issuer (what ``fencing status``/``list``/``release`` inspect)."""
        if self.lease == "advisory":
            from ._advisory import shared_advisory_issuer

            return shared_advisory_issuer(self.engine_url)
        return shared_issuer(self.engine_url)

    def aio_fence(
        self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False
    ) -> AsyncFence:
        if self.lease == "advisory":
            from ._async_advisory import AsyncAdvisoryFence

            fence: AsyncFence = AsyncAdvisoryFence(self.engine_url, name, ttl, reentrant=reentrant)
        else:
            from ._async_issuer import AsyncSqlFence

            fence = AsyncSqlFence(self.engine_url, name, ttl, reentrant=reentrant)
        return owned(fence, fence.issuer)

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        """A semaphore of ``permits`` slots, each slot a row of ``fencing_leases``."""
        self._rows_only("semaphore")
        return Semaphore(shared_issuer(self.engine_url), name, permits, ttl)

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        """The asyncio ``semaphore``: the same rows, leases and tokens."""
        self._rows_only("semaphore")
        issuer = self._new_async_issuer()
        return owned(AsyncSemaphore(issuer, name, permits, ttl), issuer)

    def rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> RWLock:
        """A read-write lock (docs/rwlock.md): its leases are rows of ``fencing_rw_leases``,
        its tokens come from the name's row of ``fencing_leases``."""
        self._rows_only("read-write lock")
        return RWLock(shared_issuer(self.engine_url), name, ttl)

    def aio_rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncRWLock:
        """The asyncio ``rwlock``: the same rows, leases and tokens."""
        self._rows_only("read-write lock")
        issuer = self._new_async_issuer()
        return owned(AsyncRWLock(issuer, name, ttl), issuer)

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election named ``name`` on this backend (see ``fencing.Election``):
        its terms are rows of ``fencing_leases``, whose holder carries the leader's value."""
        self._rows_only("election")
        return Election(shared_issuer(self.engine_url), name, ttl)

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """The asyncio election of that name (see ``fencing.aio.Election``)."""
        self._rows_only("election")
        issuer = self._new_async_issuer()
        return owned(AsyncElection(issuer, name, ttl), issuer)

    def limiter(self, name: str, limit: int, per: float, window: str = "sliding") -> Limiter:
        """At most ``limit`` admissions per ``per`` seconds, counted in
        ``fencing_admissions`` on the database's clock: one transaction per request."""
        return Limiter(shared_issuer(self.engine_url), name, limit, per, window)

    def aio_limiter(
        self, name: str, limit: int, per: float, window: str = "sliding"
    ) -> AsyncLimiter:
        """The asyncio ``limiter``: the same rows (an engine of its own, on the event loop
        that uses it)."""
        issuer = self._new_async_issuer()
        return owned(AsyncLimiter(issuer, name, limit, per, window), issuer)

    def close(self) -> None:
        """Close the idle connections of the pool that the blocking objects use (the
        process's one pool for this URL, which every backend and fence of the URL share:
        connections in use, and the leases they hold, are left alone; the pool connects
        again when used); each asyncio object's engine is disposed of by its ``aclose()``."""
        if self.lease == "advisory":
            from ._advisory import shared_advisory_issuer

            shared_advisory_issuer(self.engine_url).engine.dispose()
        else:
            shared_issuer(self.engine_url).engine.dispose()

    def _new_async_issuer(self) -> AsyncSqlIssuer:
        """An asyncio issuer with an engine of its own, for one asyncio object (which
        owns it: its ``aclose()`` disposes of the engine)."""
        from ._async_issuer import AsyncSqlIssuer

        return AsyncSqlIssuer(self.engine_url)

    def _rows_only(self, what: str) -> None:
        if self.lease != "row":
            raise ValueError(
                f"a {what} needs leases that expire and name their holder (lease=row), not "
                f"lease={self.lease}: use a URL without the lease option"
            )
