"""fencing_rw_leases: the leases of the read-write locks (docs/rwlock.md)

One row per read lease, write lease and waiting writer's marker of a read-write lock;
the lock's tokens come from the counter of its name's row in ``fencing_leases``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from fencing.sql._schema import table_options

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fencing_rw_leases",
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("holder", sa.String(64), primary_key=True),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        **table_options(op.get_context().dialect),  # MySQL/MariaDB: InnoDB, binary names
    )


def downgrade() -> None:
    op.drop_table("fencing_rw_leases")
