"""fencing: fence tokens for Python, so a stale lock holder is stopped at the resource.

Public names are re-exported here; implementation lives in private modules.
Direction of imports (never the other way): ``_errors``/``_token``/``_validate``/``_log``
<- ``_protocol`` <- ``_core`` <- ``_fence``/``_async_fence`` <- issuers and stores
<- this module. Optional integrations (``fencing.sql``, ``fencing.alembic``,
``fencing.aio``, ``fencing.testing``) import the core, and the core imports none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._async_fence import AsyncFence
from ._errors import (
    AcquireTimeout,
    FenceUnavailable,
    FencingError,
    LeaseLost,
    StaleTokenError,
    UnfencedWriteError,
)
from ._fence import Fence
from ._file_store import FileStore
from ._guard import Guarded, guard
from ._marks import FileMark, MemoryMark
from ._memory import MemoryFence, MemoryIssuer
from ._token import FenceToken
from .issuer import AsyncIssuer, Busy, Issuer

if TYPE_CHECKING:  # the lazily loaded names below, for type checkers
    from ._connect import connect
    from .redis import FencedLock, RedisFence, RedisIssuer, RedisMark
    from .sql import SqlFence, SqlIssuer

__version__ = "0.1.0"

#: Public names whose modules need an optional dependency (redis-py, SQLAlchemy) or are
#: heavy: imported on first use, so ``import fencing`` needs neither.
_LAZY: dict[str, str] = {
    "FencedLock": "fencing.redis",
    "RedisFence": "fencing.redis",
    "RedisIssuer": "fencing.redis",
    "RedisMark": "fencing.redis",
    "SqlFence": "fencing.sql",
    "SqlIssuer": "fencing.sql",
    "connect": "fencing._connect",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fencing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AcquireTimeout",
    "AsyncFence",
    "AsyncIssuer",
    "Busy",
    "Fence",
    "FenceToken",
    "FenceUnavailable",
    "FencedLock",
    "FencingError",
    "FileMark",
    "FileStore",
    "Guarded",
    "Issuer",
    "LeaseLost",
    "MemoryFence",
    "MemoryIssuer",
    "MemoryMark",
    "RedisFence",
    "RedisIssuer",
    "RedisMark",
    "SqlFence",
    "SqlIssuer",
    "StaleTokenError",
    "UnfencedWriteError",
    "__version__",
    "connect",
    "guard",
]
