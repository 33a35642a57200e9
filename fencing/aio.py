"""``fencing.aio``: the asyncio API, with the same names and semantics as the sync one.

One naming rule: every asyncio class is here under its blocking twin's name
(``fencing.aio.Fence`` is the asyncio ``fencing.Fence``), with the same public methods
(``tests/test_parity.py`` checks both). Every class here runs the very same flows as its
sync twin (see ``fencing._lease.protocol``); only the driver awaits instead of blocking.
Imports the core and the optional backends; those that need an optional dependency
(redis-py, SQLAlchemy, grpcio, kazoo) load on first use, as in ``fencing``:
``fencing.aio.RedisFence`` is ``fencing.redis.aio.RedisFence``, and so on for every
backend's fence and issuer. ``fencing.aio.AsyncFence`` is the deprecated spelling of
``fencing.aio.Fence``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base.lazy import lazy_names
from ._lease.async_fence import AsyncFence as Fence
from ._lease.async_fence import AsyncHold as Hold
from ._memory import AsyncMemoryFence as MemoryFence
from ._primitives.election import AsyncElection as Election
from ._primitives.election import AsyncTerm as Term
from ._primitives.election import Leader
from ._primitives.limiter import AsyncLimiter as Limiter
from ._primitives.rwlock import AsyncRWLock as RWLock
from ._primitives.semaphore import AsyncSemaphore as Semaphore
from ._primitives.semaphore import AsyncSemaphoreHold as SemaphoreHold
from .issuer import AsyncIssuer as Issuer

if TYPE_CHECKING:  # the lazily loaded names below, for type checkers
    from .etcd.aio import EtcdFence, EtcdIssuer
    from .redis.aio import FencedLock, RedisFence, RedisIssuer, RedlockFence, RedlockIssuer
    from .sql.aio import SqlFence, SqlIssuer
    from .zookeeper.aio import ZooKeeperFence, ZooKeeperIssuer

#: Public name -> the module it is imported from on first use (the same name there).
_LAZY: dict[str, str] = {
    "EtcdFence": "fencing.etcd.aio",
    "EtcdIssuer": "fencing.etcd.aio",
    "FencedLock": "fencing.redis.aio",
    "RedisFence": "fencing.redis.aio",
    "RedisIssuer": "fencing.redis.aio",
    "RedlockFence": "fencing.redis.aio",
    "RedlockIssuer": "fencing.redis.aio",
    "SqlFence": "fencing.sql.aio",
    "SqlIssuer": "fencing.sql.aio",
    "ZooKeeperFence": "fencing.zookeeper.aio",
    "ZooKeeperIssuer": "fencing.zookeeper.aio",
}

#: Deprecated spelling -> its name now (see CHANGELOG, "Deprecated").
_RENAMED: dict[str, str] = {"AsyncFence": "fencing.aio.Fence"}

__getattr__ = lazy_names(__name__, _LAZY, _RENAMED)


__all__ = [
    "Election",
    "EtcdFence",
    "EtcdIssuer",
    "Fence",
    "FencedLock",
    "Hold",
    "Issuer",
    "Leader",
    "Limiter",
    "MemoryFence",
    "RWLock",
    "RedisFence",
    "RedisIssuer",
    "RedlockFence",
    "RedlockIssuer",
    "Semaphore",
    "SemaphoreHold",
    "SqlFence",
    "SqlIssuer",
    "Term",
    "ZooKeeperFence",
    "ZooKeeperIssuer",
]
