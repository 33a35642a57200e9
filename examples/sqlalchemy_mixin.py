"""Guarded ORM rows: the token travels in the UPDATE's WHERE clause.

Run: python examples/sqlalchemy_mixin.py
"""

import tempfile
import time
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import fencing
from fencing.sql import FencedMixin, SqlFence


class Base(DeclarativeBase):
    pass


class Invoice(FencedMixin, Base):  # adds a fence_token column and guards every flush
    __tablename__ = "invoices"
    id: Mapped[int] = mapped_column(primary_key=True)
    total: Mapped[int]


url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'shop.db'}"
engine = create_engine(url)
Base.metadata.create_all(engine)
with Session(engine) as session:
    session.add(Invoice(id=42, total=0))
    session.commit()

fence = SqlFence(url, "invoice:42", ttl=0.2)  # the same SQLite file issues the tokens
old = fence.acquire()
stale_session = Session(engine)
stale_invoice = stale_session.get_one(Invoice, 42)  # read under the old lease...
time.sleep(0.3)  # ...then a pause past the TTL

new = fence.acquire()
with Session(engine) as session:
    invoice = session.get_one(Invoice, 42)
    invoice.total, invoice.fence_token = 100, new  # stamp the row with the token
    session.commit()  # UPDATE ... WHERE id = 42 AND fence_token <= :new
print(f"token {new:d} wrote total=100")

stale_invoice.total, stale_invoice.fence_token = 999, old
try:
    stale_session.commit()
except fencing.StaleTokenError as error:  # fencing.sql.StaleRowError, also a StaleDataError
    print(f"rejected: {error}")
stale_session.close()

with Session(engine) as session:
    print(f"invoice 42: total={session.get_one(Invoice, 42).total}")
