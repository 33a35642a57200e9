"""fencing_leases_name_pattern: PostgreSQL only, the names in byte order for semaphores

A semaphore's take counts its live slots ``<name><k>`` by a range of names in byte
order (``~>=~``, ``~<~``), which this index serves; without it the count scans the whole
table. SQLite's primary key is in byte order already: nothing to do there. ``IF NOT
EXISTS``: Django's migration ``fencing 0002`` makes the same index on a shared table.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "fencing_leases_name_pattern"


def _postgresql() -> bool:
    return op.get_context().dialect.name == "postgresql"


def upgrade() -> None:
    if _postgresql():
        op.create_index(
            _INDEX,
            "fencing_leases",
            ["name"],
            postgresql_ops={"name": "text_pattern_ops"},
            if_not_exists=True,
        )


def downgrade() -> None:
    if _postgresql():
        op.drop_index(_INDEX, table_name="fencing_leases", if_exists=True)
