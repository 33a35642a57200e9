"""The demo's shared resource: one ``FencedMixin`` row (imported by ``_demo`` when run).

Imports SQLAlchemy and ``fencing.sql`` at module level, as declarative annotations need.
"""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ...sql import FencedMixin


class Base(DeclarativeBase):
    pass


class Note(FencedMixin, Base):
    """The shared resource: one row, guarded by its ``fence_token`` column."""

    __tablename__ = "demo_notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    text: Mapped[str] = mapped_column(String(200))
