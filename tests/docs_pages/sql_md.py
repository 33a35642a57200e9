# Generated from docs/sql.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

import subprocess as _subprocess

# docs/sql.md:26

_subprocess.run("fencing migrate     # the SDK's table fencing_leases on $FENCING_URL (or --url URL)", shell=True, check=True)

# docs/sql.md:30

import os

from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import fencing
from fencing.sql import FencedMixin


class Base(DeclarativeBase): ...


class Invoice(FencedMixin, Base):
    __tablename__ = "invoices"
    id: Mapped[int] = mapped_column(primary_key=True)
    total: Mapped[int]


url = os.environ.get("FENCING_URL", "sqlite:///app.db")  # postgresql+psycopg://app@db/app
engine = create_engine(url)
Base.metadata.create_all(engine)  # your application's table (yours to migrate)
with Session(engine) as s:
    s.add(Invoice(id=42, total=0))
    s.commit()

fence = fencing.connect(url).fence("invoice:42", ttl=10)  # leases in the same database
token = fence.acquire()
with Session(engine) as s:
    inv = s.get_one(Invoice, 42)
    inv.total = 100
    inv.fence_token = token  # stamping the token makes this row's UPDATE guarded
    s.commit()  # StaleTokenError if a newer token already wrote the row
fence.release(token)

# docs/sql.md:156

from fencing.sql import guarded_delete, guarded_update

invoices = Invoice.__table__  # a Core table works as well as the mapped class
token = fence.acquire()
with engine.begin() as conn:
    conn.execute(guarded_update(Invoice, token, Invoice.id == 42, values={"total": 120}))
    result = conn.execute(
        guarded_update(
            invoices, token, invoices.c.total > 100, values={"total": 0}, expect_rows=None
        )
    )
    print(result.rowcount, "rows written")
    conn.execute(guarded_delete(invoices, token, invoices.c.id == 42))
fence.release(token)

# docs/sql.md:207

import tempfile

from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import fencing
from fencing.sql import FencedMixin, fenced_get


class Base(DeclarativeBase): ...


class Account(FencedMixin, Base):
    __tablename__ = "accounts"
    id: Mapped[int] = mapped_column(primary_key=True)
    balance: Mapped[int]


engine = create_engine(f"sqlite:///{tempfile.mkdtemp()}/app.db")
Base.metadata.create_all(engine)
with Session(engine) as s:
    s.add(Account(id=1, balance=100))
    s.commit()

fence = fencing.MemoryFence("account:1", ttl=10)
token = fence.acquire()
with Session(engine) as s:
    account = fenced_get(s, Account, 1, token)  # UPDATE ... RETURNING: claimed and loaded
    assert account is not None  # None: no such row
    account.balance += 10  # no need to set fence_token again
    s.commit()  # UPDATE ... WHERE fence_token <= :token
fence.release(token)

with Session(engine) as s:  # the old holder wakes up: refused
    account = s.get_one(Account, 1)
    account.fence_token, account.balance = token - 1, 0
    try:
        s.commit()
    except fencing.StaleTokenError as exc:
        print(exc)

# docs/sql.md:296

fence = fencing.SqlFence("sqlite:///locks.db", "invoice:42", ttl=10)  # or an Engine
with fence.hold() as token:
    ...

# docs/sql.md:327

fencing.connect("redis://localhost:6379/0").fence("job", ttl=10)  # RedisFence
fencing.connect("postgresql+psycopg://app@db/app").fence("job")  # SqlFence
fencing.connect().fence("job")  # $FENCING_URL, else the embedded SQLite file
fencing.connect(url).aio_fence("job")  # the asyncio twin: await its acquire()

# docs/sql.md:357

import asyncio

url = os.environ.get("FENCING_URL", "postgresql+psycopg://app@db/app")
store = fencing.FileStore("invoice-42.json")  # any guarded resource
advisory = fencing.connect(url + "?lease=advisory")
fence = advisory.fence("invoice:42", ttl=10)  # ttl: how often hold() checks the lock
with fence.hold() as token:  # pg_try_advisory_lock + the token
    store.write(b'{"total": 100}', token)


async def main() -> None:
    afence = advisory.aio_fence("invoice:42")  # asyncio: psycopg or asyncpg
    token = await afence.acquire()
    await afence.release(token)
    await afence.aclose()


asyncio.run(main())

# docs/sql.md:518

from sqlalchemy import create_engine, insert

import fencing.sql

engine = create_engine(url)  # PostgreSQL
with engine.begin() as conn:  # or a Session
    token = fencing.sql.advisory_xact(conn, "invoice:42")  # waits for the lock
    conn.execute(insert(Invoice).values(id=43, total=0))  # your own writes, same transaction
    store.write(b'{"total": 0}', token)  # a file, an HTTP service, another database
# committed: the lock went with the transaction, and the token stays issued

# docs/sql.md:684

from fencing.alembic import add_fence_column, drop_fence_column


def upgrade() -> None:
    add_fence_column("invoices")  # fence_token BIGINT NOT NULL DEFAULT 0


def downgrade() -> None:
    drop_fence_column("invoices")
