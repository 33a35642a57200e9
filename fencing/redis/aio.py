"""``fencing.redis.aio``: the asyncio Redis fence and issuer, on ``redis.asyncio`` clients.

They share keys, leases and tokens with the blocking classes of ``fencing.redis``.
"""

from __future__ import annotations

from ._issuer import AsyncRedisFence as RedisFence
from ._issuer import AsyncRedisIssuer as RedisIssuer

__all__ = ["RedisFence", "RedisIssuer"]
