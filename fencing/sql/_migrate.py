"""Creating the SDK's tables (placeholder until the Alembic environment lands)."""

from __future__ import annotations

from sqlalchemy import Connection, Engine

from ._schema import metadata


def create_tables(bind: Engine | Connection) -> None:
    """Create the SDK's tables if they are missing."""
    metadata.create_all(bind, checkfirst=True)
