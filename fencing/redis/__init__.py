"""``fencing.redis``: fence tokens on Redis (install ``fencing[redis]``).

- ``RedisFence`` / ``RedisIssuer``: the issuer, one atomic Lua script per operation
  (``fencing.redis.aio`` has the asyncio twins).
- ``FencedLock``: a drop-in for redis-py's ``Lock`` that also issues fence tokens
  (``fencing.redis.aio.FencedLock`` for ``redis.asyncio``).
- ``RedisMark``: a guard's high-water mark in Redis.
- ``RedlockFence`` / ``RedlockIssuer``: Redlock over N independent masters, with a
  quorum token (docs/redlock.md; asyncio twins in ``fencing.redis.aio``).

Modules: ``_scripts`` (the Lua scripts, key layout, argument builders and reply parsers,
no I/O), ``_issuer`` (the issuer, written once and driven blocking or asyncio),
``_lock`` (and ``_async_lock``), ``_mark``, ``_errors`` (redis-py errors to ``FenceUnavailable``),
``_backend`` (``fencing.connect("redis://...")``), ``_redlock_scripts`` and ``_redlock``
(Redlock: the per-node scripts and quorum arithmetic, no I/O; the flows, issuers, fences).

Imports the core and redis-py; never another backend.
"""

from __future__ import annotations

from .._lazy import needs_extra

with needs_extra("fencing.redis"):  # say which extra brings a missing driver
    from ._issuer import RedisFence, RedisIssuer
    from ._lock import FencedLock
    from ._mark import RedisMark
    from ._redlock_issuer import RedlockFence, RedlockIssuer

__all__ = ["FencedLock", "RedisFence", "RedisIssuer", "RedisMark", "RedlockFence", "RedlockIssuer"]
