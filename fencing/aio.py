"""``fencing.aio``: the asyncio API, with the same names and semantics as the sync one.

Every class here runs the very same flows as its sync twin (see ``fencing._protocol``);
only the driver awaits instead of blocking. Imports the core and the optional backends.
"""

from __future__ import annotations

from ._async_fence import AsyncFence
from ._memory import AsyncMemoryFence as MemoryFence

__all__ = ["AsyncFence", "MemoryFence"]
