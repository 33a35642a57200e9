"""Fenced models on fresh tables, for the SQL tests (importable by spawned processes)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Integer
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from fencing.sql import FencedMixin


def make_models(suffix: str) -> tuple[type[DeclarativeBase], Any, Any]:
    """A new ``Base`` with ``Invoice`` (fenced) and ``Audit`` (plain), table names + suffix."""

    class Base(DeclarativeBase):
        pass

    class Invoice(FencedMixin, Base):
        __tablename__ = f"invoices_{suffix}"
        id: Mapped[int] = mapped_column(primary_key=True)
        total: Mapped[int] = mapped_column(BigInteger)  # holds token * 10 + id

    class Audit(Base):  # one row per accepted write, in the same transaction
        __tablename__ = f"audit_{suffix}"
        seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
        invoice_id: Mapped[int] = mapped_column(ForeignKey(f"invoices_{suffix}.id"))
        token: Mapped[int] = mapped_column(BigInteger)  # tokens are 64-bit

    return Base, Invoice, Audit
