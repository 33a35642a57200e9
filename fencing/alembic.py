"""Alembic helpers for applications whose models use ``fencing.sql.FencedMixin``.

In a migration of *your* application::

    from fencing.alembic import add_fence_column, drop_fence_column

    def upgrade() -> None:
        add_fence_column("invoices")

    def downgrade() -> None:
        drop_fence_column("invoices")

``add_fence_column`` adds exactly the column ``FencedMixin`` declares (``fence_token
BIGINT NOT NULL DEFAULT 0``), so autogenerate finds no difference afterwards; existing
rows start at token 0, below every issued token. The SDK's own table is migrated
separately (``fencing migrate``). Must be called inside an Alembic migration.
Imports Alembic and SQLAlchemy.
"""

from __future__ import annotations

from ._base.lazy import needs_extra

with needs_extra("fencing.alembic"):  # say which extra brings a missing driver
    import sqlalchemy as sa
    from alembic import op

COLUMN = "fence_token"


def fence_column(name: str = COLUMN) -> sa.Column[int]:
    """The column ``FencedMixin`` adds, for ``op.create_table`` and ``op.add_column``."""
    return sa.Column(name, sa.BigInteger(), nullable=False, server_default=sa.text("0"))


def add_fence_column(table: str, *, schema: str | None = None, column: str = COLUMN) -> None:
    """Add the fence column to ``table`` (existing rows get token 0)."""
    op.add_column(table, fence_column(column), schema=schema)


def drop_fence_column(table: str, *, schema: str | None = None, column: str = COLUMN) -> None:
    """Remove the fence column from ``table``: the inverse of ``add_fence_column``."""
    op.drop_column(table, column, schema=schema)


__all__ = ["add_fence_column", "drop_fence_column", "fence_column"]
