"""``fencing.connect("redis://...")``: fences on the Redis server of a URL.

Imports the Redis issuer and redis-py.
"""

from __future__ import annotations

import redis
import redis.asyncio

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._fence import Fence
from ._issuer import AsyncRedisFence, RedisFence, RedisIssuer


class RedisBackend:
    """Fences on the Redis server of ``url`` (one client for all blocking fences)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"RedisBackend({self.url!r})"

    def _sync_client(self) -> redis.Redis:
        if self._client is None:
            self._client = redis.Redis.from_url(self.url)
        return self._client

    def fence(self, name: str, ttl: float = DEFAULT_TTL) -> Fence:
        return RedisFence(self._sync_client(), name, ttl)

    @property
    def issuer(self) -> RedisIssuer:
        """The blocking issuer (what ``fencing status``/``list``/``release`` inspect)."""
        return RedisIssuer(self._sync_client())

    def aio_fence(self, name: str, ttl: float = DEFAULT_TTL) -> AsyncFence:
        return AsyncRedisFence(redis.asyncio.Redis.from_url(self.url), name, ttl)
