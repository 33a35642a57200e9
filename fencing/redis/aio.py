"""``fencing.redis.aio``: the asyncio Redis fence, issuer and lock, and the Redlock fence and
issuer, on ``redis.asyncio`` clients.

They share keys, leases and tokens with the blocking classes of ``fencing.redis``.
"""

from __future__ import annotations

from ._async_lock import AsyncFencedLock as FencedLock
from ._issuer import AsyncRedisFence as RedisFence
from ._issuer import AsyncRedisIssuer as RedisIssuer
from ._redlock_issuer import AsyncRedlockFence as RedlockFence
from ._redlock_issuer import AsyncRedlockIssuer as RedlockIssuer

__all__ = ["FencedLock", "RedisFence", "RedisIssuer", "RedlockFence", "RedlockIssuer"]
