"""``fencing.connect(url)``: one URL picks the issuer backend (the tooz idea).

=====================================================  ==============================
URL                                                    backend
=====================================================  ==============================
``redis://``, ``rediss://``, ``unix://``                Redis (``RedisFence``)
``redis+sentinel://``, ``rediss+sentinel://``          Redis behind Sentinel
``redis+cluster://host:port[,host:port...]``            Redis Cluster (``RedisFence``)
``redis+redlock://host:port,host:port,host:port[...]``  Redlock (``RedlockFence``)
``sqlite:///path``, ``postgresql[+driver]://...``       SQL (``SqlFence``)
``mysql[+driver]://...``, ``mariadb[+driver]://...``    SQL on MySQL or MariaDB
``etcd://host:port[,host:port...]``, ``etcds://``       etcd (``EtcdFence``)
``zookeeper://host:port[,host:port...][/chroot]``       ZooKeeper (``ZooKeeperFence``)
*none*: ``$FENCING_URL``, else the embedded default    SQLite file, see ``default_url``
=====================================================  ==============================

Redis URLs also take ``?min_replicas=N&replica_timeout=S`` (see docs/redis.md).
SQL URLs take ``?lease=row`` (the default: leases are rows of ``fencing_leases``) or, on
PostgreSQL, ``?lease=advisory`` (session-level advisory locks, see docs/sql.md); the
``lease`` option on any other URL, or an unknown value, is a ``ValueError``.
The returned backend gives ``.fence(name, ttl=...)`` (a blocking ``Fence``) and
``.aio_fence(name, ttl=...)`` (its asyncio twin, the same leases and tokens); both take
``reentrant=True`` (see ``Fence``); ``.election(name, ttl=...)`` and
``.aio_election(name, ttl=...)`` give leader elections (see ``fencing.Election``),
``.semaphore``/``.aio_semaphore`` and ``.limiter``/``.aio_limiter`` semaphores and rate
limiters (docs/limits.md); a backend without one of them says so (``Backend``). Each
asyncio object a backend makes (``aio_fence``, ``aio_election``, ``aio_semaphore``,
``aio_limiter``) opens its connections on the event loop that uses it; ``await
obj.aclose()`` closes them before that loop ends. The embedded default is a SQLite file
in the per-user state directory
(``$XDG_STATE_HOME/fencing/fencing.db``, by default ``~/.local/state/fencing/fencing.db``),
so every process of one user shares it whatever its working directory; it needs no
server and creates its table on first use.

Imports the core fences only: each backend package provides its ``Backend`` class
(``fencing.redis._backend``, ``fencing.sql._backend``), imported by name when its URL
scheme is used, so the core never imports a backend.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qsl, urlsplit

from ._base.lazy import needs_extra
from ._lease.async_fence import AsyncFence
from ._lease.core import DEFAULT_TTL
from ._lease.fence import Fence
from ._primitives.election import AsyncElection, Election
from ._primitives.limiter import AsyncLimiter, Limiter
from ._primitives.rwlock import AsyncRWLock, RWLock
from ._primitives.semaphore import AsyncSemaphore, Semaphore

ENV_VAR = "FENCING_URL"
_REDIS_SCHEMES = ("redis", "rediss", "unix")
_SQL_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb")
_ETCD_SCHEMES = ("etcd", "etcds")


def default_path() -> Path:
    """The embedded default database file (its directory is created on first use)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fencing" / "fencing.db"


def default_url() -> str:
    """``$FENCING_URL`` if set, else the embedded SQLite default."""
    return os.environ.get(ENV_VAR) or f"sqlite:///{default_path()}"


class Backend(Protocol):
    """What ``connect`` returns: every primitive on one issuer, blocking or asyncio.

    Every backend class has every method (``tests/test_connect_types.py`` checks it); one
    whose issuer lacks a primitive raises ``ValueError`` naming the URLs that have it
    (``NoSemaphore``, ``NoElection``, ``NoLimiter``): Redlock has fences and read-write
    locks only, etcd and ZooKeeper have no rate limiter, ``lease=advisory`` no semaphore,
    election or read-write lock.
    """

    url: str

    def fence(self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False) -> Fence:
        """A blocking fence of that name on this backend (``reentrant``: see ``Fence``)."""
        ...

    def aio_fence(
        self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False
    ) -> AsyncFence:
        """An asyncio fence of that name, sharing leases and tokens with ``fence``; its
        ``aclose()`` closes the connections opened for it."""
        ...

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election of that name on this backend (see ``fencing.Election``)."""
        ...

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """The asyncio election of that name, sharing terms with ``election``."""
        ...

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        """A semaphore of ``permits`` slots, each a fence of this backend (docs/limits.md)."""
        ...

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        """The asyncio semaphore of that name, sharing slots with ``semaphore``."""
        ...

    def rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> RWLock:
        """A read-write lock of that name, readers fenced too (docs/rwlock.md)."""
        ...

    def aio_rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncRWLock:
        """The asyncio read-write lock of that name, sharing leases with ``rwlock``."""
        ...

    def limiter(self, name: str, limit: int, per: float, window: str = "sliding") -> Limiter:
        """At most ``limit`` admissions per ``per`` seconds, on the server's clock."""
        ...

    def aio_limiter(
        self, name: str, limit: int, per: float, window: str = "sliding"
    ) -> AsyncLimiter:
        """The asyncio limiter of that name, sharing windows with ``limiter``."""
        ...

    def close(self) -> None:
        """Close what the backend opened for its blocking objects (each asyncio object's
        own connections are closed by its ``aclose()``)."""
        ...


_ALL_BUT_REDLOCK = "Redis (redis://, Sentinel, Cluster), SQL, etcd and ZooKeeper"
_REDIS_AND_SQL = "Redis (redis://, Sentinel, Cluster) and SQL"


def _not_offered(backend: object, what: str, where: str) -> ValueError:
    return ValueError(f"{backend!r} has no {what}: {what}s are on {where} URLs")


class NoSemaphore:
    """``Backend.semaphore`` and ``aio_semaphore`` of a backend without semaphores."""

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        raise _not_offered(self, "semaphore", _ALL_BUT_REDLOCK)

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        raise _not_offered(self, "semaphore", _ALL_BUT_REDLOCK)


class NoElection:
    """``Backend.election`` and ``aio_election`` of a backend without elections."""

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        raise _not_offered(self, "election", _ALL_BUT_REDLOCK)

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        raise _not_offered(self, "election", _ALL_BUT_REDLOCK)


class NoLimiter:
    """``Backend.limiter`` and ``aio_limiter`` of a backend without rate limiters."""

    def limiter(self, name: str, limit: int, per: float, window: str = "sliding") -> Limiter:
        raise _not_offered(self, "limiter", _REDIS_AND_SQL)

    def aio_limiter(
        self, name: str, limit: int, per: float, window: str = "sliding"
    ) -> AsyncLimiter:
        raise _not_offered(self, "limiter", _REDIS_AND_SQL)


#: URL scheme -> (module, class) of its backend, imported only when that scheme is used.
_BACKENDS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(_REDIS_SCHEMES, ("fencing.redis._backend", "RedisBackend")),
    **dict.fromkeys(_SQL_SCHEMES, ("fencing.sql._backend", "SqlBackend")),
    **dict.fromkeys(
        ("redis+cluster", "rediss+cluster"), ("fencing.redis._backend", "RedisClusterBackend")
    ),
    **dict.fromkeys(
        ("redis+redlock", "rediss+redlock"), ("fencing.redis._backend", "RedlockBackend")
    ),
    **dict.fromkeys(_ETCD_SCHEMES, ("fencing.etcd._backend", "EtcdBackend")),
    "zookeeper": ("fencing.zookeeper._backend", "ZooKeeperBackend"),
}


def _has_lease_option(url: str) -> bool:
    query = urlsplit(url).query
    return any(key == "lease" for key, _ in parse_qsl(query, keep_blank_values=True))


def connect(url: str | None = None) -> Backend:
    """The backend for ``url`` (see the module docstring); no I/O happens here."""
    if url is None:
        url = default_url()
        if url == f"sqlite:///{default_path()}":
            default_path().parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    full = url.partition("://")[0].lower() if "://" in url else ""
    scheme = full.partition("+")[0]  # postgresql+psycopg: the driver is SQLAlchemy's business
    found = _BACKENDS.get(full) or _BACKENDS.get(scheme)
    if found is not None and scheme not in _SQL_SCHEMES and _has_lease_option(url):
        raise ValueError(
            f"the lease option (lease=row, lease=advisory) is for SQL URLs, not {full}://"
        )
    if found is not None:
        if scheme == "postgres":  # the libpq spelling; SQLAlchemy wants postgresql
            url = "postgresql" + url[len("postgres") :]
        with needs_extra("fencing.connect()"):
            backend: Backend = getattr(importlib.import_module(found[0]), found[1])(url)
        return backend
    raise ValueError(
        f"unknown fencing URL scheme {scheme or url!r}: use redis://, rediss://, unix://, "
        "redis+sentinel://, redis+cluster://, redis+redlock://, sqlite:///path, postgresql://, "
        "mysql://, mariadb://, etcd:// or zookeeper://"
    )
