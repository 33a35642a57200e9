"""fencing_admissions: the SQL rate limiters' windows (admission times by the database clock)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from fencing.sql._schema import table_options

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fencing_admissions",
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        **table_options(op.get_context().dialect),  # MySQL/MariaDB: InnoDB, binary names
    )


def downgrade() -> None:
    op.drop_table("fencing_admissions")
