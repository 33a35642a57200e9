"""``fencing.redis``: fence tokens on Redis (install ``fencing[redis]``).

- ``RedisFence`` / ``RedisIssuer``: the issuer, one atomic Lua script per operation
  (``fencing.redis.aio`` has the asyncio twins).
- ``FencedLock``: a drop-in for redis-py's ``Lock`` that also issues fence tokens
  (``fencing.redis.aio.FencedLock`` for ``redis.asyncio``).
- ``RedisMark``: a guard's high-water mark in Redis.

Modules: ``_scripts`` (the Lua scripts, key layout, argument builders and reply parsers,
no I/O), ``_issuer`` (the issuer, written once and driven blocking or asyncio),
``_lock`` (and ``_async_lock``), ``_mark``, ``_errors`` (redis-py errors to ``FenceUnavailable``),
``_backend`` (``fencing.connect("redis://...")``).

Imports the core and redis-py; never another backend.
"""

from __future__ import annotations

from ._issuer import RedisFence, RedisIssuer
from ._lock import FencedLock
from ._mark import RedisMark

__all__ = ["FencedLock", "RedisFence", "RedisIssuer", "RedisMark"]
