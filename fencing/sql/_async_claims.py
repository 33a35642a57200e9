"""The asyncio claims: ``claim``, ``claim_rows`` and ``fenced_get`` on an ``AsyncSession`` /
``AsyncConnection``, run by SQLAlchemy's ``run_sync`` on the very same blocking code
(``_claims``), so the claim is written once.

Imports this package's claims and SQLAlchemy's asyncio layer (``fencing[async]``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import ColumnElement

from .._base.lazy import needs_extra
from . import _claims
from ._mixin import FencedMixin

with needs_extra("fencing.sql.aio"):  # SQLAlchemy's asyncio layer needs greenlet
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

M = TypeVar("M", bound=FencedMixin)


def _async_session(session: object) -> AsyncSession:
    if not isinstance(session, AsyncSession):
        raise TypeError(
            f"expected a sqlalchemy.ext.asyncio.AsyncSession, not {type(session).__name__}"
        )
    return session


async def claim(session: AsyncSession, row: FencedMixin, token: int) -> None:
    """``fencing.sql.claim`` on an ``AsyncSession``: raise the row's token, data untouched."""
    await _async_session(session).run_sync(_claims.claim, row, token)


async def claim_rows(
    connection: AsyncConnection | AsyncSession,
    target: Any,
    token: int,
    *where: ColumnElement[bool],
) -> int:
    """``fencing.sql.claim_rows`` on an ``AsyncConnection`` or ``AsyncSession``."""
    if not isinstance(connection, (AsyncConnection, AsyncSession)):
        raise TypeError(
            f"expected an AsyncConnection or AsyncSession, not {type(connection).__name__}"
        )
    claimed: int = await connection.run_sync(_claims.claim_rows, target, token, *where)
    return claimed


async def fenced_get(session: AsyncSession, model: type[M], key: Any, token: int) -> M | None:
    """``fencing.sql.fenced_get`` on an ``AsyncSession``: claim and load in one step."""
    row: M | None = await _async_session(session).run_sync(_claims.fenced_get, model, key, token)
    return row
