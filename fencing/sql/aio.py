"""``fencing.sql.aio``: the asyncio SQL fence and issuer (needs ``fencing[async]``)."""

from __future__ import annotations

from ._async_issuer import AsyncSqlFence, AsyncSqlIssuer

__all__ = ["AsyncSqlFence", "AsyncSqlIssuer"]
