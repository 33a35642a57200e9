"""``redis+sentinel://`` URLs: fences on the primary that Redis Sentinel names.

::

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/<service>[/db][?options]
    rediss+sentinel://...     the same over TLS, to the Sentinels and to the data nodes

The grammar is the one Python users meet in Redis-Sentinel-Url and Prefect (and, with a
``/service/db`` path, in django-redis's sentinel plugins): the comma-separated hosts are
Sentinels (port 26379 unless given), the path names the service (Sentinel's ``master
name``; kombu/Celery's ``master_name`` transport option) and the database. The
user and password in front are the data nodes' (kombu's and django-redis's
``PASSWORD``); the Sentinels' own are options, as redis-py's ``sentinel_kwargs`` and
kombu's ``sentinel_kwargs`` keep them apart. Options keep redis-py's URL names:

==========================  =========================================================
option                      meaning
==========================  =========================================================
``socket_timeout``          seconds one reply may take, Sentinels and data nodes
                            (default 5: a call during a failover fails, never hangs)
``socket_connect_timeout``  seconds to connect (default: ``socket_timeout``)
``sentinel_username``,      the Sentinels' own ACL user and password (Sentinel has
``sentinel_password``       its own ``requirepass``)
``ssl_cert_reqs``,          TLS (``rediss+sentinel`` only), redis-py's names:
``ssl_ca_certs``,           ``none``/``optional``/``required``, file paths, and
``ssl_certfile``,           whether the host name is checked
``ssl_keyfile``,
``ssl_check_hostname``
``db``                      the database, instead of the path's
==========================  =========================================================

Clients are built without redis-py's retries (``Retry(NoBackoff(), 0)``): a call
during a failover raises ``FenceUnavailable`` after one ``socket_timeout`` at most, and
the next call asks the Sentinels again and finds the new primary.

Imports redis-py only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.retry
import redis.sentinel
from redis.backoff import NoBackoff

SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_PORT = 26379
DEFAULT_SOCKET_TIMEOUT = 5.0
_SSL_OPTIONS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
#: redis-py's Sentinel classes carry no annotations: typed here as what they return.
_Sentinel: Any = redis.sentinel.Sentinel
_AsyncSentinel: Any = redis.asyncio.sentinel.Sentinel


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SCHEMES


@dataclass(frozen=True)
class SentinelURL:
    """A parsed ``redis+sentinel://`` URL (no I/O)."""

    hosts: list[tuple[str, int]]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT
    socket_connect_timeout: float = DEFAULT_SOCKET_TIMEOUT
    tls: dict[str, Any] = field(default_factory=dict)

    def connection(self) -> dict[str, Any]:
        """What every connection gets, to a Sentinel or to a data node."""
        return {
            "socket_timeout": self.socket_timeout,
            "socket_connect_timeout": self.socket_connect_timeout,
            **self.tls,
        }


def parse_sentinel_url(url: str) -> SentinelURL:
    """``url`` checked and split; ``ValueError`` saying what is wrong."""
    parts = urlsplit(url)
    userinfo, _, netloc = parts.netloc.rpartition("@")
    hosts = [_host(item) for item in netloc.split(",") if item]
    if not hosts:
        raise ValueError(f"a Sentinel URL names at least one Sentinel host: {url!r}")
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError(
            f"a Sentinel URL's path is /<service>[/db], got {parts.path or 'none'!r} in {url!r}"
        )
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    tls: dict[str, Any] = {}
    if parts.scheme.lower() == "rediss+sentinel":
        tls["ssl"] = True
        for name in _SSL_OPTIONS:
            if name in options:
                tls[name] = options.pop(name)
        if "ssl_check_hostname" in options:
            tls["ssl_check_hostname"] = _flag(options.pop("ssl_check_hostname"))
    timeout = seconds(options.pop("socket_timeout", DEFAULT_SOCKET_TIMEOUT), "socket_timeout")
    parsed = SentinelURL(
        hosts=hosts,
        service=path[0],
        db=whole(options.pop("db", path[1] if len(path) > 1 else "0"), "db"),
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_username=options.pop("sentinel_username", None),
        sentinel_password=options.pop("sentinel_password", None),
        socket_timeout=timeout,
        socket_connect_timeout=seconds(
            options.pop("socket_connect_timeout", timeout), "socket_connect_timeout"
        ),
        tls=tls,
    )
    if options:
        known = "socket_timeout, socket_connect_timeout, sentinel_username, sentinel_password, db"
        tls_note = ", ssl_* (with rediss+sentinel)"
        raise ValueError(
            f"unknown option(s) {', '.join(sorted(options))} in a Sentinel URL; "
            f"known: {known}{tls_note}, min_replicas, replica_timeout"
        )
    return parsed


class _Pool(redis.sentinel.SentinelConnectionPool):
    """The client's pool owns its Sentinel manager: closing the client closes the
    connections to the Sentinels too (redis-py leaves them to the garbage collector)."""

    def disconnect(self, inuse_connections: bool = True) -> None:
        super().disconnect(inuse_connections)
        for sentinel in _closed_with(self, inuse_connections):
            sentinel.close()


class _AsyncPool(redis.asyncio.sentinel.SentinelConnectionPool):
    """The asyncio ``_Pool``."""

    async def disconnect(self, inuse_connections: bool = True) -> None:
        await super().disconnect(inuse_connections)
        await asyncio.gather(*(s.aclose() for s in _closed_with(self, inuse_connections)))


def _closed_with(pool: Any, inuse_connections: bool) -> list[Any]:
    """The Sentinel clients a pool's ``disconnect`` closes: all, when the client is closed
    (``inuse_connections``), none for a rediscovery's clean-up of idle connections."""
    return list(pool.sentinel_manager.sentinels) if inuse_connections else []


def sentinel_client(url: SentinelURL) -> redis.Redis:
    """A blocking client of the primary of ``url.service``; no I/O until first used."""
    sentinel = _Sentinel(url.hosts, sentinel_kwargs=_sentinel_kwargs(url))
    client: redis.Redis = sentinel.master_for(
        url.service,
        connection_pool_class=_Pool,
        db=url.db,
        username=url.username,
        password=url.password,
        retry=redis.retry.Retry(NoBackoff(), 0),
        **url.connection(),
    )
    return client


def async_sentinel_client(url: SentinelURL) -> redis.asyncio.Redis:
    """The asyncio ``sentinel_client``."""
    sentinel = _AsyncSentinel(url.hosts, sentinel_kwargs=_sentinel_kwargs(url))
    client: redis.asyncio.Redis = sentinel.master_for(
        url.service,
        connection_pool_class=_AsyncPool,
        db=url.db,
        username=url.username,
        password=url.password,
        retry=redis.asyncio.retry.Retry(NoBackoff(), 0),
        **url.connection(),
    )
    return client


def _sentinel_kwargs(url: SentinelURL) -> dict[str, Any]:
    credentials = {"username": url.sentinel_username, "password": url.sentinel_password}
    return {**url.connection(), **{k: v for k, v in credentials.items() if v is not None}}


def _host(item: str) -> tuple[str, int]:
    """``host[:port]`` or ``[v6 address][:port]``; the port defaults to Sentinel's."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = item.partition(":")
    return host, whole(port, "Sentinel port") if port else DEFAULT_PORT


def whole(value: object, what: str) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise ValueError(f"{what} in a fencing URL must be a whole number, got {value!r}") from None
    if number < 0:
        raise ValueError(f"{what} in a fencing URL must not be negative, got {number}")
    return number


def seconds(value: object, what: str) -> float:
    try:
        number = float(str(value))
    except ValueError:
        raise ValueError(f"{what} in a fencing URL must be seconds, got {value!r}") from None
    if not number > 0 or number == float("inf"):
        raise ValueError(f"{what} in a fencing URL must be a positive number, got {value!r}")
    return number


def _flag(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"ssl_check_hostname in a fencing URL must be true or false, got {value!r}")
