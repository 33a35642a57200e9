"""The scripted simulation: Kleppmann's timeline on a virtual clock, fenced and unfenced."""

from __future__ import annotations

import pytest

import fencing
from fencing.testing.simulation import (
    InvariantViolation,
    Register,
    Simulation,
    VirtualClock,
    virtual_world,
)


def kleppmann(sim: Simulation) -> bool:
    """Client 1 takes the lease, freezes past the TTL; client 2 takes over and writes;
    client 1 wakes and writes. Returns whether client 1's late write was applied."""
    c1, c2 = sim.clients[:2]
    assert c1.acquire() == 1
    c1.pause()
    sim.expire()
    assert c2.acquire() == 2
    assert c2.write("written by client 2") is True
    return c1.resume("written by client 1")


def test_the_guard_rejects_the_paused_clients_write() -> None:
    sim = Simulation(clients=2, ttl=10)
    assert kleppmann(sim) is False
    assert sim.world.resource.read() == "written by client 2"
    assert sim.accepted == [2] and sim.rejected == [1] and sim.issued == [1, 2]
    timeline = sim.format_timeline()
    assert "client 1  write token 1: REJECTED (stale: 2 accepted)" in timeline
    print(timeline)


def test_without_a_guard_the_update_of_client_2_is_lost() -> None:
    sim = Simulation(clients=2, ttl=10, fenced=False)
    with pytest.raises(InvariantViolation, match="lost update") as info:
        kleppmann(sim)
    assert sim.world.resource.read() == "written by client 1"  # client 2's write is gone
    assert "APPLIED over token 2: LOST UPDATE" in info.value.timeline


def test_a_running_client_checks_its_lease_and_does_not_write_late() -> None:
    sim = Simulation(clients=2, ttl=10)
    c1, _ = sim.clients
    c1.acquire()
    sim.advance(6)  # past half the TTL: the careful client gives up
    assert c1.write() is None
    assert not c1.holding and sim.accepted == []
    assert "write skipped token 1: own lease ran out" in sim.format_timeline()
    sim.expire()
    assert c1.acquire() == 2
    sim.advance(6)
    assert c1.pause() is False and not c1.holding and not c1.paused


def test_exact_lease_model_busy_release_and_expiry() -> None:
    sim = Simulation(clients=3, ttl=10)
    c1, c2, c3 = sim.clients
    assert c1.acquire() == 1
    assert c2.acquire() is None  # busy
    assert c1.write() is True
    assert c1.release() is True
    assert c2.acquire() == 2
    sim.advance(11)
    assert c2.release() is False  # expired meanwhile
    assert c3.acquire() == 3
    assert sim.issued == [1, 2, 3]


def test_clients_refuse_impossible_steps() -> None:
    sim = Simulation(clients=2)
    c1, c2 = sim.clients
    with pytest.raises(RuntimeError, match="holds no lease"):
        c1.write()
    c1.acquire()
    with pytest.raises(RuntimeError, match="already holds"):
        c1.acquire()
    c1.pause()
    with pytest.raises(RuntimeError, match="paused"):
        c1.release()
    with pytest.raises(RuntimeError, match="not paused"):
        c2.resume()


def test_a_broken_issuer_is_caught() -> None:
    """The model does not trust the issuer: a counter that goes back is reported."""
    world = virtual_world(2)
    sim = Simulation(world)
    c1, c2 = sim.clients
    c1.acquire()
    c1.release()
    world.fences[0].issuer._counters["sim"] = 0  # type: ignore[attr-defined]  # lose the counter
    with pytest.raises(InvariantViolation, match="token 1 issued after token 1"):
        c2.acquire()


def test_virtual_clock_and_register() -> None:
    clock = VirtualClock()
    clock.advance(1.5)
    assert clock() == 1.5
    with pytest.raises(ValueError):
        clock.advance(-1)
    register = Register()
    register.write("a", 5)
    with pytest.raises(fencing.StaleTokenError):
        register.write("b", 4)
    register.write("c", 5)  # equal token: the same holder writing again
    assert register.read() == "c" and register.high_water_mark == 5
    unfenced = Register(fenced=False)
    unfenced.write("a", 5)
    unfenced.write("b", 4)
    assert unfenced.read() == "b"


def test_advance_needs_a_virtual_clock() -> None:
    from fencing.testing.simulation import real_time_world

    issuer = fencing.MemoryIssuer()
    world = real_time_world([fencing.MemoryFence("x", 0.05, issuer=issuer)], Register())
    with pytest.raises(TypeError):
        Simulation(world).advance(1)
