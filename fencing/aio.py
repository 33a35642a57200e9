"""``fencing.aio``: the asyncio API, with the same names and semantics as the sync one.

Every class here runs the very same flows as its sync twin (see ``fencing._protocol``);
only the driver awaits instead of blocking. Imports the core and the optional backends;
those that need an optional dependency (redis-py, SQLAlchemy, grpcio, kazoo) load on
first use, as in ``fencing``: ``fencing.aio.RedisFence`` is ``fencing.redis.aio.RedisFence``,
and so on for every backend's fence and issuer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._async_fence import AsyncFence
from ._memory import AsyncMemoryFence as MemoryFence

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fencing.aio' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AsyncFence",
    "EtcdFence",
    "EtcdIssuer",
    "FencedLock",
    "MemoryFence",
    "RedisFence",
    "RedisIssuer",
    "RedlockFence",
    "RedlockIssuer",
    "SqlFence",
    "SqlIssuer",
    "ZooKeeperFence",
    "ZooKeeperIssuer",
]
