# Generated from README.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

import subprocess as _subprocess

# README.md:103

_subprocess.run('fencing --version', shell=True, check=True)

# README.md:133

import fencing

fence = fencing.connect().fence("invoice:42", ttl=10.0)  # FENCING_URL, else an embedded SQLite file
store = fencing.FileStore("invoice-42.json")

token = fence.acquire(timeout=5.0)
store.write(b'{"total": 100}', token)
fence.release(token)

with fence.hold() as token:         # acquire, renew in the background, release on exit
    store.write(b'{"total": 120}', token)

try:
    store.write(b'{"total": 0}', 1)  # an old token, as a paused holder would carry
except fencing.StaleTokenError as exc:
    print("rejected:", exc.token, "<", exc.current)
print(store.read())

# README.md:155

backend = fencing.connect()
workers = backend.semaphore("render", permits=2, ttl=10)
with workers.hold(timeout=5) as permit:       # one of 2 slots, with that slot's token
    print("slot", permit.slot, "token", permit.token)

api = backend.limiter("partner-api", limit=5, per=1.0)
print("admitted:", api.try_acquire())         # never waits; acquire(timeout) may

election = backend.election("scheduler", ttl=10)
state = fencing.FileStore("scheduler.json")   # a store takes the tokens of one fence
with election.campaign("host-1") as term:     # leads until the block ends
    state.write(b"ran at 09:00 by host-1", term.token)

# README.md:179

import os

import redis

r = redis.Redis.from_url(os.environ.get("FENCING_URL", "redis://localhost:6379/0"), socket_timeout=5)
fence = fencing.RedisFence(r, "invoice:42", ttl=10.0)   # lease TTL in seconds
token = fence.acquire(timeout=5.0)
# ... write with the token ...
fence.release(token)

# a drop-in for redis-py's lock (same key, so old and new clients exclude each other
# during a rolling deploy), with the token of the current acquisition:
with r.lock("invoice:42", timeout=10, lock_class=fencing.FencedLock) as lock:
    print(lock.fence_token)

# README.md:199

from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from fencing.sql import FencedMixin


class Base(DeclarativeBase): ...


class Invoice(FencedMixin, Base):
    __tablename__ = "invoices"
    id: Mapped[int] = mapped_column(primary_key=True)
    total: Mapped[int]


engine = create_engine("sqlite:///app.db")
Base.metadata.create_all(engine)
with Session(engine) as s:
    s.add(Invoice(id=42, total=0))
    s.commit()

with fence.hold() as token, Session(engine) as s:
    inv = s.get_one(Invoice, 42)
    inv.total = 100
    inv.fence_token = token      # stamping the token makes this row's UPDATE guarded
    s.commit()                   # fencing.StaleTokenError if a newer token already wrote the row
