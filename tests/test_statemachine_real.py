"""The same state machine on the real issuers: a pause is real time past a short TTL.

Issuers: MemoryFence, RedisFence on a real redis-server, SqlFence on SQLite and
PostgreSQL. Resources: the real guards (FileStore, a guarded callable with a file or
memory mark). Few, short examples: each ``expire`` step really sleeps past the TTL.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy
from hypothesis import settings

import fencing
from fencing.sql import create_tables, guarded_update
from fencing.testing.simulation import (
    GuardedResource,
    InvariantViolation,
    Register,
    Resource,
    Simulation,
    StoreResource,
    World,
    real_time_world,
)
from fencing.testing.statemachine import CLIENTS, REPRODUCIBLE, run_machine

TTL = 0.06
REAL = settings(REPRODUCIBLE, max_examples=8, stateful_step_count=12)

FenceFactory = Callable[..., fencing.Fence]  # (name, ttl=TTL)


@pytest.fixture(autouse=True)
def quiet_lost_lease_warnings() -> Iterator[None]:
    logger = logging.getLogger("fencing")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.fixture(params=["memory", "redis", "sqlite", "postgresql"])
def make_fence(request: pytest.FixtureRequest, tmp_path: Path) -> FenceFactory:
    """A factory of fences for one name on one real issuer, with a short TTL."""
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
    fence = fencing.SqlFence(url, "warm-up", TTL)
    fence.release(fence.acquire())  # the first use of a SQLite file creates its tables
    return lambda name, ttl=TTL: fencing.SqlFence(url, name, ttl)


def world_factory(
    make_fence: FenceFactory, make_resource: Callable[[Path], Resource], tmp_path: Path
) -> Callable[[], World]:
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

    def write(self, value: str, token: int) -> None:
        statement = guarded_update(self.table, token, self.table.c.id == self.id)
        with self.engine.begin() as conn:
            conn.execute(statement.values(value=value))  # StaleRowError if stale

    def read(self) -> str | None:
        with self.engine.connect() as conn:
            query = sqlalchemy.select(self.table.c.value).where(self.table.c.id == self.id)
            value: str | None = conn.execute(query).scalar_one()
            return value


#: Which real guard each issuer is paired with (every guard is covered once); the SQL
#: issuers guard a row of their own database.
RESOURCES: dict[str, Callable[[Path], Resource]] = {
    "memory": lambda path: GuardedResource(fencing.MemoryMark()),
    "redis": lambda path: StoreResource(fencing.FileStore(path)),
    "sqlite": lambda path: SqlRow(sqlalchemy.create_engine(f"sqlite:///{path.parent / 'rows.db'}")),
    "postgresql": lambda path: GuardedResource(fencing.FileMark(path)),
}


def test_machine_on_real_issuer_and_guard(
    make_fence: FenceFactory, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    resource = RESOURCES[request.node.callspec.params["make_fence"]]
    run_machine(world_factory(make_fence, resource, tmp_path), settings=REAL)


def test_kleppmann_in_real_time(make_fence: FenceFactory, tmp_path: Path) -> None:
    """The scripted scenario on each real issuer: with a guard, client 1's late write is
    rejected; against the unfenced register the same schedule loses client 2's update."""
    for fenced in (True, False):
        name = f"kleppmann-{uuid.uuid4().hex[:8]}"
        resource: Resource = (
            StoreResource(fencing.FileStore(tmp_path / name)) if fenced else Register(fenced=False)
        )
        fences = [make_fence(name, ttl=0.3) for _ in range(2)]  # room for a loaded machine
        sim = Simulation(real_time_world(fences, resource))
        c1, c2 = sim.clients
        first = c1.acquire()
        assert c1.pause() is True
        sim.expire()  # real time past the TTL
        second = c2.acquire()
        assert first is not None and second is not None and second > first
        assert c2.write("by client 2") is True
        if fenced:
            assert c1.resume("by client 1") is False
            assert resource.read() == "by client 2"
        else:
            with pytest.raises(InvariantViolation, match="lost update"):
                c1.resume("by client 1")
            assert resource.read() == "by client 1"
