"""Worlds for the state-machine tests: fences on the real issuers (the ``make_fence``
of ``fence_factory``) and resources on SQL rows (a
``Resource`` of ``fencing.testing.simulation``, with ``claim`` for the claiming mode).

- ``SqlRow``: one row of a fenced Core table, written with ``guarded_update`` and claimed
  with ``claim_rows``.
- ``OrmRow``: one ``FencedMixin`` row, written by a session's flush and claimed with
  ``fenced_get`` (claim and load in one ``UPDATE ... RETURNING``).

``side_by_side`` runs the cases of a scripted real-time scenario at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest
import redis
import sqlalchemy
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import fencing
from fencing.sql import FencedMixin, claim_rows, create_tables, fenced_get, guarded_update
from fencing.testing.simulation import Resource, World, real_time_world
from fencing.testing.statemachine import CLIENTS

#: Lease lifetime on the real issuers: each ``expire`` step really sleeps past it.
TTL = 0.06

FenceFactory = Callable[..., fencing.Fence]  # (name, ttl=TTL)

T = TypeVar("T")


#: The real issuers, for ``pytest.fixture(params=ISSUERS)``.
ISSUERS = ["memory", "redis", "sqlite", "postgresql"]


def fence_factory(request: pytest.FixtureRequest, tmp_path: Path) -> FenceFactory:
    """Fences for one name on the real issuer ``request.param``, with a short TTL."""
    if request.param == "memory":
        issuer = fencing.MemoryIssuer()
        return lambda name, ttl=TTL: fencing.MemoryFence(name, ttl, issuer=issuer)
    if request.param == "redis":
        client: redis.Redis = request.getfixturevalue("redis_client")
        return lambda name, ttl=TTL: fencing.RedisFence(client, name, ttl)
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'issuer.db'}"
    else:
        url = request.getfixturevalue("pg_url")
        engine = sqlalchemy.create_engine(url)
        create_tables(engine)  # SQLite files get them on first use
        engine.dispose()
    fence = fencing.SqlFence(url, "warm-up", 30)  # a lease that outlives a stalled thread
    fence.release(fence.acquire())  # the first use of a SQLite file creates its tables
    return lambda name, ttl=TTL: fencing.SqlFence(url, name, ttl)


def side_by_side(scenario: Callable[[T], None], cases: Iterable[T]) -> None:
    """Run ``scenario`` for every case at once, a thread each, and raise the first
    failure. Each case has its own fences and resource, so they share nothing but the
    real time they wait past the ttl: the waits of a scripted scenario overlap instead of
    adding up."""
    with ThreadPoolExecutor() as pool:
        for run in [pool.submit(scenario, case) for case in cases]:
            run.result()


def world_factory(
    make_fence: FenceFactory, make_resource: Callable[[Path], Resource], tmp_path: Path
) -> Callable[[], World]:
    """Fresh worlds: ``CLIENTS`` fences of a new name, and a resource at a new path."""

    def make() -> World:
        key = uuid.uuid4().hex[:12]
        fences = [make_fence(f"machine-{key}") for _ in range(CLIENTS)]
        return real_time_world(fences, make_resource(tmp_path / key))

    return make


class SqlRow:
    """A ``Resource`` on one row of a fenced table, written with ``guarded_update``."""

    metadata = sqlalchemy.MetaData()
    table = sqlalchemy.Table(
        "machine_rows",
        metadata,
        sqlalchemy.Column("id", sqlalchemy.String(40), primary_key=True),
        sqlalchemy.Column("value", sqlalchemy.Text),
        sqlalchemy.Column("fence_token", sqlalchemy.BigInteger, nullable=False, default=0),
    )

    def __init__(self, engine: sqlalchemy.Engine) -> None:
        self.engine, self.id = engine, uuid.uuid4().hex
        self.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(self.table.insert().values(id=self.id, value=None, fence_token=0))

    def __repr__(self) -> str:
        return f"SqlRow({self.engine.dialect.name})"

    def write(self, value: str, token: int) -> None:
        statement = guarded_update(self.table, token, self.table.c.id == self.id)
        with self.engine.begin() as conn:
            conn.execute(statement.values(value=value))  # StaleRowError if stale

    def claim(self, token: int) -> None:
        with self.engine.begin() as conn:
            claim_rows(conn, self.table, token, self.table.c.id == self.id)

    def read(self) -> str | None:
        with self.engine.connect() as conn:
            query = sqlalchemy.select(self.table.c.value).where(self.table.c.id == self.id)
            value: str | None = conn.execute(query).scalar_one()
            return value


class _Base(DeclarativeBase):
    pass


class MachineRecord(FencedMixin, _Base):
    __tablename__ = "machine_records"
    id: Mapped[str] = mapped_column(sqlalchemy.String(40), primary_key=True)
    value: Mapped[str | None]


class OrmRow:
    """A ``Resource`` on one ``FencedMixin`` row: writes are a session's guarded flush,
    claims are ``fenced_get`` (the row is claimed and loaded in one statement)."""

    def __init__(self, engine: sqlalchemy.Engine) -> None:
        self.engine, self.id = engine, uuid.uuid4().hex
        _Base.metadata.create_all(engine)
        with Session(engine) as session:
            session.add(MachineRecord(id=self.id, value=None))
            session.commit()

    def __repr__(self) -> str:
        return f"OrmRow({self.engine.dialect.name})"

    def write(self, value: str, token: int) -> None:
        with Session(self.engine) as session:
            record = session.get_one(MachineRecord, self.id)
            record.fence_token = token
            record.value = value
            session.commit()  # StaleRowError if stale

    def claim(self, token: int) -> None:
        with Session(self.engine) as session:
            fenced_get(session, MachineRecord, self.id, token)  # StaleRowError if stale
            session.commit()

    def read(self) -> str | None:
        with Session(self.engine) as session:
            return session.get_one(MachineRecord, self.id).value
