"""The same state machine on the real issuers: a pause is real time past a short TTL.

Issuers: MemoryFence, RedisFence on a real redis-server, SqlFence on SQLite and
PostgreSQL. Resources: the real guards (FileStore, a guarded callable with a file or
memory mark). Few, short examples: each ``expire`` step really sleeps past the TTL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy
from hypothesis import settings
from sim_worlds import (
    ISSUERS,
    FenceFactory,
    SqlRow,
    fence_factory,
    side_by_side,
    world_factory,
)

import fencing
from fencing.testing.simulation import (
    GuardedResource,
    InvariantViolation,
    Register,
    Resource,
    Simulation,
    StoreResource,
    real_time_world,
)
from fencing.testing.statemachine import REPRODUCIBLE, run_machine

pytestmark = pytest.mark.usefixtures("quiet_lost_leases")

REAL = settings(REPRODUCIBLE, max_examples=8, stateful_step_count=12)


@pytest.fixture(params=ISSUERS)
def make_fence(request: pytest.FixtureRequest, tmp_path: Path) -> FenceFactory:
    return fence_factory(request, tmp_path)


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
    rejected; against the unfenced register the same schedule loses client 2's update.
    Both are set up one after the other, then run side by side."""
    sims = []
    for fenced in (True, False):
        name = f"kleppmann-{uuid.uuid4().hex[:8]}"
        resource: Resource = (
            StoreResource(fencing.FileStore(tmp_path / name)) if fenced else Register(fenced=False)
        )
        # c1 pauses only if its lease still looks valid (under half the ttl since its
        # acquire) and its lease must then expire (the world's expire waits past c1's
        # ttl); c2's must outlive all its steps: room for a stalled thread either way
        fences = [make_fence(name, ttl=2.0), make_fence(name, ttl=60.0)]
        sims.append(Simulation(real_time_world(fences, resource)))

    def kleppmann(sim: Simulation) -> None:
        fenced = isinstance(sim.world.resource, StoreResource)
        c1, c2 = sim.clients
        first = c1.acquire()
        assert c1.pause() is True
        sim.expire()  # real time past the TTL
        second = c2.acquire()
        assert first is not None and second is not None and second > first
        assert c2.write("by client 2") is True
        if fenced:
            assert c1.resume("by client 1") is False
            assert sim.world.resource.read() == "by client 2"
        else:
            with pytest.raises(InvariantViolation, match="lost update"):
                c1.resume("by client 1")
            assert sim.world.resource.read() == "by client 1"

    side_by_side(kleppmann, sims)
