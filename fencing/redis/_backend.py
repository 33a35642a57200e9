"""``fencing.connect("redis://...")``: fences on the Redis server of a URL.

``redis://``, ``rediss://`` and ``unix://`` URLs go to redis-py's ``from_url``;
``redis+sentinel://`` and ``rediss+sentinel://`` to the primary Redis Sentinel names
(``_sentinel``); ``redis+cluster://host:port[,host:port...]`` and ``rediss+cluster://``
to a Redis Cluster (``RedisClusterBackend``); ``redis+redlock://host:port,host:port,...``
and ``rediss+redlock://`` to Redlock over independent masters (``RedlockBackend``). The
first three also take the fence's replication options, taken out before the rest reaches
redis-py (a cluster refuses them):

- ``min_replicas``: a lease counts once that many replicas acknowledged it (``WAIT``);
- ``replica_timeout``: seconds to wait for them (default 1, or half ``socket_timeout``).

Imports the Redis and Redlock issuers, the Sentinel URLs and redis-py.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.connection

from .._base.owned import owned
from .._connect import NoElection, NoLimiter, NoSemaphore
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from .._primitives.election import AsyncElection, Election
from .._primitives.limiter import AsyncLimiter, Limiter
from .._primitives.rwlock import AsyncRWLock, RWLock
from .._primitives.semaphore import AsyncSemaphore, Semaphore
from ._clients import AsyncClient, SyncClient
from ._flows import check_min_replicas
from ._issuer import AsyncRedisFence, AsyncRedisIssuer, RedisFence, RedisIssuer
from ._redlock_issuer import (
    MIN_NODES,
    AsyncRedlockFence,
    AsyncRedlockIssuer,
    RedlockFence,
    RedlockIssuer,
)
from ._sentinel import (
    SentinelURL,
    async_sentinel_client,
    is_sentinel_url,
    parse_sentinel_url,
    seconds,
    sentinel_client,
    whole,
)


def fence_options(url: str) -> tuple[str, dict[str, Any]]:
    """``url`` without ``min_replicas``/``replica_timeout``, and those as fence arguments."""
    base, mark, query = url.partition("?")
    options: dict[str, Any] = {}
    rest = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "min_replicas":
            options[key] = check_min_replicas(whole(value, key))
        elif key == "replica_timeout":
            options[key] = seconds(value, key)
        else:
            rest.append((key, value))
    if not options:
        return url, options
    return (base + mark + urlencode(rest) if rest else base), options


class RedisBackend:
    """Fences on the Redis server of ``url`` (one client for all blocking fences; each
    asyncio fence, election, semaphore and limiter has a client of its own, on the event
    loop that uses it, closed by its ``aclose()``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._url, self._options = fence_options(url)
        self._sentinel: SentinelURL | None = (
            parse_sentinel_url(self._url) if is_sentinel_url(self._url) else None
        )
        self._client: SyncClient | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def _sync_client(self) -> SyncClient:
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def fence(self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False) -> Fence:
        return RedisFence(self._sync_client(), name, ttl, reentrant=reentrant, **self._options)

    @property
    def issuer(self) -> RedisIssuer:
        """The blocking issuer (what ``fencing status``/``list``/``release`` inspect)."""
        return RedisIssuer(self._sync_client(), **self._options)

    def aio_fence(
        self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False
    ) -> AsyncFence:
        fence = AsyncRedisFence(
            self.new_async_client(), name, ttl, reentrant=reentrant, **self._options
        )
        return owned(fence, fence.issuer)

    def election(self, name: str, ttl: float = DEFAULT_TTL) -> Election:
        """A leader election named ``name`` on this backend (see ``fencing.Election``)."""
        return Election(self.issuer, name, ttl)

    def aio_election(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncElection:
        """The asyncio election of that name (see ``fencing.aio.Election``)."""
        issuer = self._new_async_issuer()
        return owned(AsyncElection(issuer, name, ttl), issuer)

    def semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> Semaphore:
        """A semaphore of ``permits`` slots, each slot a fence of this server (its keys in
        the Redis Cluster slot of ``name``: see ``fencing._primitives.semaphore.slot_name``)."""
        return Semaphore(self.issuer, name, permits, ttl)

    def aio_semaphore(self, name: str, permits: int, ttl: float = DEFAULT_TTL) -> AsyncSemaphore:
        """The asyncio ``semaphore`` (a client of its own, on the event loop that uses it)."""
        issuer = self._new_async_issuer()
        return owned(AsyncSemaphore(issuer, name, permits, ttl), issuer)

    def rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> RWLock:
        """A read-write lock (docs/rwlock.md): one script per operation, its keys in the
        Redis Cluster slot of ``name``, its tokens from the fence ``name``'s counter."""
        return RWLock(self.issuer, name, ttl)

    def aio_rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncRWLock:
        """The asyncio ``rwlock`` (a client of its own, on the event loop that uses it)."""
        issuer = self._new_async_issuer()
        return owned(AsyncRWLock(issuer, name, ttl), issuer)

    def limiter(self, name: str, limit: int, per: float, window: str = "sliding") -> Limiter:
        """At most ``limit`` admissions per ``per`` seconds: one script per request, on the
        server's clock (``TIME``)."""
        return Limiter(self.issuer, name, limit, per, window)

    def aio_limiter(
        self, name: str, limit: int, per: float, window: str = "sliding"
    ) -> AsyncLimiter:
        """The asyncio ``limiter`` (a client of its own, on the event loop that uses it)."""
        issuer = self._new_async_issuer()
        return owned(AsyncLimiter(issuer, name, limit, per, window), issuer)

    def _new_async_issuer(self) -> AsyncRedisIssuer:
        """An asyncio issuer on a new client, for one asyncio object (which owns it)."""
        return AsyncRedisIssuer(self.new_async_client(), **self._options)

    def close(self) -> None:
        """Close the blocking fences' client's connections (it reconnects if a fence is
        used again); each asyncio object's own client is closed by its ``aclose()``."""
        if self._client is not None:
            self._client.close()

    def new_client(self) -> SyncClient:
        """A new blocking client for the URL (the backend keeps one for all its fences)."""
        if self._sentinel is not None:
            return sentinel_client(self._sentinel)
        return redis.Redis.from_url(self._url)

    def new_async_client(self) -> AsyncClient:
        """A new asyncio client (each asyncio fence has its own, on its event loop)."""
        if self._sentinel is not None:
            return async_sentinel_client(self._sentinel)
        return redis.asyncio.Redis.from_url(self._url)


class RedisClusterBackend(RedisBackend):
    """Fences on the Redis Cluster of ``redis+cluster://[user:password@]host:port[,host:
    port...][/0][?option=value...]`` (``rediss+cluster://`` for TLS).

    The hosts are startup nodes: any one that answers tells the client the whole cluster.
    The options are redis-py's URL options (``socket_timeout=2``, ``ssl_cert_reqs=none``,
    ...), passed to ``redis.cluster.RedisCluster`` (``redis.asyncio.cluster.RedisCluster``
    for asyncio fences); ``min_replicas`` is refused (a cluster client has no one primary
    to ``WAIT`` on). A cluster has database 0 only. No I/O happens until a fence is used.
    """

    def __init__(self, url: str) -> None:
        super().__init__(url)
        if self._options.get("min_replicas"):
            raise ValueError(
                f"redis+cluster URL {url!r}: min_replicas needs one primary to WAIT on "
                "(a redis:// or redis+sentinel:// URL), not a Redis Cluster"
            )
        self._hosts, self._client_options = _parse_cluster_url(self._url)

    def new_client(self) -> SyncClient:
        node = redis.cluster.ClusterNode
        nodes = [node(host, port) for host, port in self._hosts]  # type: ignore[no-untyped-call]
        return redis.cluster.RedisCluster(startup_nodes=nodes, **self._client_options)

    def new_async_client(self) -> AsyncClient:
        nodes = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in self._hosts]
        return redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **self._client_options)


def _parse_cluster_url(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """``redis[s]+cluster://[auth@]h1:p1,h2:p2[/0][?options]`` -> (the hosts, the client
    options): redis-py parses the URL of the first host (auth, TLS, options); the hosts
    then go to the client as startup nodes, not in a URL (``RedisCluster.from_url`` with
    more startup nodes leaves a socket open)."""
    scheme, _, rest = url.partition("://")
    base = scheme.lower().partition("+")[0]
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    auth, at, netloc = rest[:end].rpartition("@")
    hosts = [_host_port(part, url) for part in netloc.split(",")]
    first = f"{base}://{auth}{at}{netloc.split(',')[0]}{rest[end:]}"
    options: dict[str, Any] = redis.connection.parse_url(first)  # type: ignore[no-untyped-call]
    for key in ("host", "port", "path"):
        options.pop(key, None)
    if options.pop("db", 0) != 0:
        raise ValueError(f"redis+cluster URL {url!r}: a Redis Cluster has database 0 only")
    if options.pop("connection_class", None) is not None:  # rediss: a cluster client's way
        options["ssl"] = True
    return hosts, options


def _host_port(part: str, url: str) -> tuple[str, int]:
    host, colon, port = part.strip().rpartition(":")
    if not colon or not host or not port.isdigit():
        raise ValueError(f"redis+cluster URL {url!r}: expected host:port, got {part!r}")
    return host.strip("[]"), int(port)


class RedlockBackend(NoSemaphore, NoElection, NoLimiter):
    """Redlock fences on the independent Redis masters of ``redis+redlock://[user:
    password@]host:port,host:port,host:port[/db][?option=value...]`` (``rediss+redlock://``
    for TLS): one client per host, each made by redis-py from the URL with that host
    (auth, database and options shared). The blocking fences share one issuer (its
    threads and clients); each asyncio fence has clients of its own, on its event loop,
    closed by its ``aclose()``. No I/O happens until a fence is used.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._urls = _redlock_urls(url)
        self._issuer: RedlockIssuer | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    @property
    def issuer(self) -> RedlockIssuer:
        """The blocking issuer that the blocking fences share."""
        if self._issuer is None:
            self._issuer = RedlockIssuer([redis.Redis.from_url(url) for url in self._urls])
        return self._issuer

    def fence(self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False) -> Fence:
        return RedlockFence((), name, ttl, issuer=self.issuer, reentrant=reentrant)

    def aio_fence(
        self, name: str, ttl: float = DEFAULT_TTL, *, reentrant: bool = False
    ) -> AsyncFence:
        clients = [redis.asyncio.Redis.from_url(url) for url in self._urls]
        fence = AsyncRedlockFence(clients, name, ttl, reentrant=reentrant)
        return owned(fence, fence.issuer)

    def rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> RWLock:
        """A read-write lock over the masters (docs/redlock.md, "Read-write locks"): the
        fence's quorum flows on per-node read-write scripts, one token sequence with the
        Redlock fence ``name``. The blocking locks share the blocking fences' issuer."""
        return RWLock(self.issuer, name, ttl)

    def aio_rwlock(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncRWLock:
        """The asyncio ``rwlock`` (clients of its own, on the event loop that uses it,
        closed by its ``aclose()``)."""
        issuer = AsyncRedlockIssuer([redis.asyncio.Redis.from_url(url) for url in self._urls])
        return owned(AsyncRWLock(issuer, name, ttl), issuer)

    def close(self) -> None:
        """Close the blocking issuer's connections and threads (made again on next use)."""
        if self._issuer is not None:
            for client in self._issuer.clients:
                client.close()
            self._issuer.close()
            self._issuer = None


def _redlock_urls(url: str) -> list[str]:
    """``redis[s]+redlock://[auth@]h1:p1,h2:p2[/db][?options]`` -> one ``redis[s]://`` URL
    per host, each with the auth, path and options; ``ValueError`` for a malformed one
    or fewer than ``MIN_NODES`` hosts."""
    scheme, _, rest = url.partition("://")
    base = scheme.lower().partition("+")[0]
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    auth, at, netloc = rest[:end].rpartition("@")
    urls = []
    for part in netloc.split(","):
        host, port = _host_port(part, url)
        where = f"[{host}]" if ":" in host else host
        urls.append(f"{base}://{auth}{at}{where}:{port}{rest[end:]}")
    if len(urls) < MIN_NODES:
        raise ValueError(
            f"redis+redlock URL {url!r}: Redlock needs at least {MIN_NODES} host:port "
            f"(independent masters), got {len(urls)}"
        )
    return urls
