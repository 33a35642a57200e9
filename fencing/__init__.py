"""fencing: fence tokens for Python, so a stale lock holder is stopped at the resource.

Public names are re-exported here; implementation lives in private modules.
Direction of imports (never the other way), written down as import-linter contracts in
pyproject.toml and explained in docs/design.md, "Architecture":

- the core, in layer packages: ``_base`` (errors, tokens, checks, flows, logs,
  telemetry) at the bottom, then the issuer protocols (``issuer``), the fences
  (``_lease``), the primitives built on them (``_primitives``) beside the resource side
  (``_resource``: marks, guards, ``FileStore``), the in-memory issuer and the shared SQL
  flows (``_memory``, ``_sql``) and, on top, ``aio``, ``_connect`` (finds a backend by
  its URL scheme) and ``metrics``.
- backends, each a package that imports the core and never another backend:
  ``fencing.redis``, ``fencing.sql``, ``fencing.etcd``, ``fencing.zookeeper``; beside
  them ``fencing.http`` (tokens over HTTP) and ``fencing.alembic`` (migration helpers).
- on top: ``fencing.testing`` (servers, simulation, the contract) and ``fencing.cli``.

``import fencing`` needs no optional dependency (redis-py, SQLAlchemy, grpcio, kazoo):
names from a backend load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base.errors import (
    AcquireTimeout,
    FenceSetupError,
    FenceUnavailable,
    FencingError,
    LeaseLost,
    MissingExtra,
    NotReplicated,
    StaleTokenError,
    UnfencedWriteError,
)
from ._base.lazy import lazy_names
from ._base.token import FenceToken
from ._lease.fence import Fence, Hold
from ._memory import MemoryFence, MemoryIssuer
from ._primitives.election import Election, Leader, Term
from ._primitives.limiter import Admission, Limiter, LimitUse
from ._primitives.rwlock import ReadToken, RWLock, WriteToken
from ._primitives.semaphore import Permit, Semaphore, SemaphoreHold
from ._resource.file_store import FileStore
from ._resource.guard import Guarded, guard
from ._resource.marks import FileMark, Mark, MemoryMark
from .issuer import Busy, Issuer

if TYPE_CHECKING:  # the lazily loaded names below, for type checkers
    # the deprecated names too, so that code using them still type-checks until they go
    from ._connect import connect
    from ._lease.async_fence import AsyncFence, AsyncHold  # noqa: F401
    from ._primitives.election import AsyncElection, AsyncTerm  # noqa: F401
    from .etcd import EtcdFence, EtcdIssuer
    from .issuer import AsyncIssuer  # noqa: F401
    from .redis import FencedLock, RedisFence, RedisIssuer, RedisMark, RedlockFence, RedlockIssuer
    from .sql import SqlFence, SqlIssuer
    from .zookeeper import ZooKeeperFence, ZooKeeperIssuer

__version__ = "0.2.0"

#: Public names whose modules need an optional dependency (redis-py, SQLAlchemy, grpcio,
#: kazoo) or are heavy: imported on first use, so ``import fencing`` needs none of them.
#: Every backend's fence and issuer is here, as its asyncio twin is in ``fencing.aio``.
_LAZY: dict[str, str] = {
    "EtcdFence": "fencing.etcd",
    "EtcdIssuer": "fencing.etcd",
    "FencedLock": "fencing.redis",
    "RedisFence": "fencing.redis",
    "RedisIssuer": "fencing.redis",
    "RedlockFence": "fencing.redis",
    "RedlockIssuer": "fencing.redis",
    "RedisMark": "fencing.redis",
    "SqlFence": "fencing.sql",
    "SqlIssuer": "fencing.sql",
    "ZooKeeperFence": "fencing.zookeeper",
    "ZooKeeperIssuer": "fencing.zookeeper",
    "connect": "fencing._connect",
}

#: Deprecated spelling -> its name now: the asyncio classes live in ``fencing.aio`` under
#: their blocking twins' names (see CHANGELOG, "Deprecated").
_RENAMED: dict[str, str] = {
    "AsyncElection": "fencing.aio.Election",
    "AsyncFence": "fencing.aio.Fence",
    "AsyncHold": "fencing.aio.Hold",
    "AsyncIssuer": "fencing.aio.Issuer",
    "AsyncTerm": "fencing.aio.Term",
}

__getattr__ = lazy_names(__name__, _LAZY, _RENAMED)


__all__ = [
    "AcquireTimeout",
    "Admission",
    "Busy",
    "Election",
    "EtcdFence",
    "EtcdIssuer",
    "Fence",
    "FenceSetupError",
    "FenceToken",
    "FenceUnavailable",
    "FencedLock",
    "FencingError",
    "FileMark",
    "FileStore",
    "Guarded",
    "Hold",
    "Issuer",
    "Leader",
    "LeaseLost",
    "LimitUse",
    "Limiter",
    "Mark",
    "MemoryFence",
    "MemoryIssuer",
    "MemoryMark",
    "MissingExtra",
    "NotReplicated",
    "Permit",
    "RWLock",
    "ReadToken",
    "RedisFence",
    "RedisIssuer",
    "RedisMark",
    "RedlockFence",
    "RedlockIssuer",
    "Semaphore",
    "SemaphoreHold",
    "SqlFence",
    "SqlIssuer",
    "StaleTokenError",
    "Term",
    "UnfencedWriteError",
    "WriteToken",
    "ZooKeeperFence",
    "ZooKeeperIssuer",
    "__version__",
    "connect",
    "guard",
]
