"""``fencing.connect("redis://...")``: fences on the Redis server of a URL.

``redis://``, ``rediss://`` and ``unix://`` URLs go to redis-py's ``from_url``;
``redis+sentinel://`` and ``rediss+sentinel://`` to the primary Redis Sentinel names
(``_sentinel``). Every one of them also takes the fence's replication options, taken
out before the rest reaches redis-py:

- ``min_replicas``: a lease counts once that many replicas acknowledged it (``WAIT``);
- ``replica_timeout``: seconds to wait for them (default 1, or half ``socket_timeout``).

Imports the Redis issuer, the Sentinel URLs and redis-py.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

import redis
import redis.asyncio

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._fence import Fence
from ._issuer import AsyncRedisFence, RedisFence, RedisIssuer, check_min_replicas
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
    """Fences on the Redis server of ``url`` (one client for all blocking fences)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._url, self._options = fence_options(url)
        self._sentinel: SentinelURL | None = (
            parse_sentinel_url(self._url) if is_sentinel_url(self._url) else None
        )
        self._client: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"RedisBackend({self.url!r})"

    def _sync_client(self) -> redis.Redis:
        if self._client is None:
            self._client = (
                sentinel_client(self._sentinel)
                if self._sentinel is not None
                else redis.Redis.from_url(self._url)
            )
        return self._client

    def fence(self, name: str, ttl: float = DEFAULT_TTL) -> Fence:
        return RedisFence(self._sync_client(), name, ttl, **self._options)

    @property
    def issuer(self) -> RedisIssuer:
        """The blocking issuer (what ``fencing status``/``list``/``release`` inspect)."""
        return RedisIssuer(self._sync_client(), **self._options)

    def aio_fence(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncFence:
        client = (
            async_sentinel_client(self._sentinel)
            if self._sentinel is not None
            else redis.asyncio.Redis.from_url(self._url)
        )
        return AsyncRedisFence(client, name, ttl, **self._options)
