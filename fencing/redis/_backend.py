"""``fencing.connect("redis://...")``: fences on the Redis server of a URL, and
``fencing.connect("redis+cluster://host:port[,host:port...]")``: fences on a Redis Cluster.

Imports the Redis issuer and redis-py.
"""

from __future__ import annotations

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._fence import Fence
from ._issuer import AsyncClient, AsyncRedisFence, RedisFence, SyncClient


class RedisBackend:
    """Fences on the Redis server of ``url`` (one client for all blocking fences; each
    asyncio fence opens its own, on the event loop that uses it)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: SyncClient | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def fence(self, name: str, ttl: float = DEFAULT_TTL) -> Fence:
        if self._client is None:
            self._client = self.sync_client()
        return RedisFence(self._client, name, ttl)

    def aio_fence(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncFence:
        return AsyncRedisFence(self.async_client(), name, ttl)

    def sync_client(self) -> SyncClient:
        return redis.Redis.from_url(self.url)

    def async_client(self) -> AsyncClient:
        return redis.asyncio.Redis.from_url(self.url)


class RedisClusterBackend(RedisBackend):
    """Fences on the Redis Cluster of ``redis+cluster://[user:password@]host:port[,host:
    port...][/0][?option=value...]`` (``rediss+cluster://`` for TLS).

    The hosts are startup nodes: any one that answers tells the client the whole cluster.
    The options are redis-py's URL options (``socket_timeout=2``, ``ssl_cert_reqs=none``,
    ...), passed to ``redis.cluster.RedisCluster`` (``redis.asyncio.cluster.RedisCluster``
    for asyncio fences). A cluster has database 0 only. No I/O happens until a fence is
    used.
    """

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._first_url, self._hosts = _split_cluster_url(url)

    def sync_client(self) -> SyncClient:
        node = redis.cluster.ClusterNode
        others = [node(host, port) for host, port in self._hosts[1:]]  # type: ignore[no-untyped-call]
        return redis.cluster.RedisCluster.from_url(self._first_url, startup_nodes=others)

    def async_client(self) -> AsyncClient:
        others = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in self._hosts[1:]]
        return redis.asyncio.cluster.RedisCluster.from_url(self._first_url, startup_nodes=others)


def _split_cluster_url(url: str) -> tuple[str, list[tuple[str, int]]]:
    """``redis[s]+cluster://[auth@]h1:p1,h2:p2/...`` -> (``redis[s]://[auth@]h1:p1/...``, the
    hosts): redis-py parses the first as one node's URL (auth, TLS, options)."""
    scheme, _, rest = url.partition("://")
    base = scheme.lower().partition("+")[0]
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    auth, at, netloc = rest[:end].rpartition("@")
    hosts = [_host_port(part, url) for part in netloc.split(",")]
    first = f"{base}://{auth}{at}{netloc.split(',')[0]}{rest[end:]}"
    return first, hosts


def _host_port(part: str, url: str) -> tuple[str, int]:
    host, colon, port = part.strip().rpartition(":")
    if not colon or not host or not port.isdigit():
        raise ValueError(f"redis+cluster URL {url!r}: expected host:port, got {part!r}")
    return host.strip("[]"), int(port)
