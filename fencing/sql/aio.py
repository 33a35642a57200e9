"""``fencing.sql.aio``: the asyncio SQL fence and issuer, and the asyncio claims (needs
``fencing[async]``)."""

from __future__ import annotations

from ._async_claims import claim, claim_rows, fenced_get
from ._async_issuer import AsyncSqlFence, AsyncSqlIssuer

__all__ = ["AsyncSqlFence", "AsyncSqlIssuer", "claim", "claim_rows", "fenced_get"]
