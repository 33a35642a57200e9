"""fencing_leases: one row per fence (token counter, holder, expiry by the database clock)

Revision ID: 0001
Revises:
Create Date: 2026-05-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from fencing.sql._schema import table_options

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fencing_leases",
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("token", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("holder", sa.String(64), nullable=True),
        sa.Column("expires_at", sa.Double(), nullable=True),
        **table_options(op.get_context().dialect),  # MySQL/MariaDB: InnoDB, binary names
    )


def downgrade() -> None:
    op.drop_table("fencing_leases")
