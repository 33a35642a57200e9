"""``fencing.redis``: fence tokens on Redis (install ``fencing[redis]``).

- ``RedisFence`` / ``RedisIssuer``: the issuer, one atomic Lua script per operation
  (``fencing.redis.aio`` has the asyncio twins).
- ``FencedLock``: a drop-in for redis-py's ``Lock`` that also issues fence tokens
  (``fencing.redis.aio.FencedLock`` for ``redis.asyncio``).
- ``RedisMark``: a guard's high-water mark in Redis.
- ``RedlockFence`` / ``RedlockIssuer``: Redlock over N independent masters, with a
  quorum token (docs/redlock.md; asyncio twins in ``fencing.redis.aio``).

Modules, one job each: ``_scripts`` (the Lua scripts, key layout, argument builders and
reply parsers: one ``Call`` per script, no I/O; ``_rwlock_scripts`` and ``_limits``
beside it), ``_clients`` (the port: redis-py's clients and the EVALSHA that reloads
after NOSCRIPT), ``_flows`` (the operations written once, ``RedisFlows`` and
``LockFlows``, and the steps their flows yield), ``_issuer`` (the issuers, two drivers
each, and the fences), ``_lock`` and ``_async_lock`` (``FencedLock``), ``_mark``,
``_errors`` (redis-py errors to ``FenceUnavailable``), ``_watch`` (keyspace
notifications), ``_sentinel``, ``_backend`` (``fencing.connect("redis://...")``), and
Redlock in the same shape: ``_redlock_scripts``, ``_redlock_flows``, ``_redlock_ports``,
``_redlock_issuer``.

Imports the core and redis-py; never another backend.
"""

from __future__ import annotations

from .._base.lazy import needs_extra

with needs_extra("fencing.redis"):  # say which extra brings a missing driver
    from ._issuer import RedisFence, RedisIssuer
    from ._lock import FencedLock
    from ._mark import RedisMark
    from ._redlock_issuer import RedlockFence, RedlockIssuer

__all__ = ["FencedLock", "RedisFence", "RedisIssuer", "RedisMark", "RedlockFence", "RedlockIssuer"]
