"""``fencing.aio``: the asyncio API, with the same names and semantics as the sync one.

Every class here runs the very same flows as its sync twin (see ``fencing._protocol``);
only the driver awaits instead of blocking. Imports the core and the optional backends;
those that need an optional dependency (redis-py) load on first use, as in ``fencing``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._async_fence import AsyncFence
from ._memory import AsyncMemoryFence as MemoryFence

if TYPE_CHECKING:  # the lazily loaded names below, for type checkers
    from .redis.aio import FencedLock, RedisFence
    from .sql.aio import AsyncSqlFence as SqlFence

#: Public name -> (module, name in that module), imported on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "FencedLock": ("fencing.redis.aio", "FencedLock"),
    "RedisFence": ("fencing.redis.aio", "RedisFence"),
    "SqlFence": ("fencing.sql.aio", "AsyncSqlFence"),
}


def __getattr__(name: str) -> Any:
    found = _LAZY.get(name)
    if found is None:
        raise AttributeError(f"module 'fencing.aio' has no attribute {name!r}")
    value = getattr(importlib.import_module(found[0]), found[1])
    globals()[name] = value
    return value


__all__ = ["AsyncFence", "FencedLock", "MemoryFence", "RedisFence", "SqlFence"]
