"""``fencing.connect(url)``: one URL picks the issuer backend (the tooz idea).

=====================================================  ==============================
URL                                                    backend
=====================================================  ==============================
``redis://``, ``rediss://``, ``unix://``                Redis (``RedisFence``)
``sqlite:///path``, ``postgresql[+driver]://...``       SQL (``SqlFence``)
*none*: ``$FENCING_URL``, else the embedded default    SQLite file, see ``default_url``
=====================================================  ==============================

The returned backend gives ``.fence(name, ttl=...)`` (a blocking ``Fence``) and
``.aio_fence(name, ttl=...)`` (its asyncio twin, the same leases and tokens). The
embedded default is a SQLite file in the per-user state directory
(``$XDG_STATE_HOME/fencing/fencing.db``, by default ``~/.local/state/fencing/fencing.db``),
so every process of one user shares it whatever its working directory; it needs no
server and creates its table on first use.

Imports the core fences and validation; redis-py and SQLAlchemy only inside the branch
that needs them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._async_fence import AsyncFence
from ._core import DEFAULT_TTL
from ._fence import Fence

ENV_VAR = "FENCING_URL"
_REDIS_SCHEMES = ("redis", "rediss", "unix")
_SQL_SCHEMES = ("sqlite", "postgresql", "postgres")


def default_path() -> Path:
    """The embedded default database file (its directory is created on first use)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fencing" / "fencing.db"


def default_url() -> str:
    """``$FENCING_URL`` if set, else the embedded SQLite default."""
    return os.environ.get(ENV_VAR) or f"sqlite:///{default_path()}"


class RedisBackend:
    """Fences on the Redis server of ``url`` (one client for all blocking fences)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None

    def __repr__(self) -> str:
        return f"RedisBackend({self.url!r})"

    def fence(self, name: str, ttl: float = DEFAULT_TTL) -> Fence:
        import redis

        from ._redis import RedisFence

        if self._client is None:
            self._client = redis.Redis.from_url(self.url)
        return RedisFence(self._client, name, ttl)

    def aio_fence(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncFence:
        import redis.asyncio

        from ._redis import AsyncRedisFence

        return AsyncRedisFence(redis.asyncio.Redis.from_url(self.url), name, ttl)


class SqlBackend:
    """Fences in the ``fencing_leases`` table of a SQLite file or PostgreSQL database."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __repr__(self) -> str:
        return f"SqlBackend({self.url!r})"

    def fence(self, name: str, ttl: float = DEFAULT_TTL) -> Fence:
        from .sql import SqlFence

        return SqlFence(self.url, name, ttl)

    def aio_fence(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncFence:
        from .sql.aio import AsyncSqlFence

        return AsyncSqlFence(self.url, name, ttl)


def connect(url: str | None = None) -> RedisBackend | SqlBackend:
    """The backend for ``url`` (see the module docstring); no I/O happens here."""
    if url is None:
        url = default_url()
        if url == f"sqlite:///{default_path()}":
            default_path().parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    scheme = url.partition("://")[0].partition("+")[0].lower() if "://" in url else ""
    if scheme in _REDIS_SCHEMES:
        return RedisBackend(url)
    if scheme in _SQL_SCHEMES:
        if scheme == "postgres":  # the libpq spelling; SQLAlchemy wants postgresql
            url = "postgresql" + url[len("postgres") :]
        from .sql._engines import parse_sql_url

        parse_sql_url(url)  # a bad SQL URL fails here, not at the first acquire
        return SqlBackend(url)
    raise ValueError(
        f"unknown fencing URL scheme {scheme or url!r}: use redis://, rediss://, unix://, "
        "sqlite:///path or postgresql://"
    )
