"""Semaphore behaviour beyond the contract: per-slot fencing of a paused holder, a lower
``permits`` for an existing name, the Redis Cluster slot of every slot's keys, the
refusals of ``connect`` backends that cannot hold a semaphore."""

from __future__ import annotations

import pytest

import fencing
from fencing import AcquireTimeout, MemoryIssuer, MemoryMark, Permit, StaleTokenError
from fencing._primitives.semaphore import MAX_PERMITS, slot_name
from fencing.redis._scripts import key_prefix, key_slot
from fencing.testing.simulation import VirtualClock


def test_a_paused_holder_is_refused_once_its_slot_moved_on() -> None:
    """The timeline of docs/limits.md: each slot's resource is guarded by that slot's
    tokens; a holder paused past its ttl loses its slot, and its late write is refused,
    while the long holder of the other slot keeps writing."""
    clock = VirtualClock()
    issuer = MemoryIssuer(clock=clock)
    jobs = issuer.semaphore("jobs", permits=2, ttl=10)
    marks = {0: MemoryMark(), 1: MemoryMark()}
    written: list[str] = []

    def write(permit: Permit, what: str) -> None:
        fencing.guard(written.append, mark=marks[permit.slot])(permit.token, what)

    a, b = jobs.acquire(timeout=0), jobs.acquire(timeout=0)
    write(a, "a1")
    write(b, "b1")
    clock.advance(5)
    jobs.renew(b)  # b is a long, live holder; a is paused
    clock.advance(6)
    c = jobs.acquire(timeout=0)  # a's lease expired: c takes its slot with a newer token
    assert c.slot == a.slot and c.token > a.token
    write(c, "c1")
    with pytest.raises(StaleTokenError):
        write(a, "a2")  # a wakes up and writes: refused by its slot's mark
    write(b, "b2")  # one mark over all slots would refuse b now; b's slot mark does not
    assert written == ["a1", "b1", "c1", "b2"]


def test_a_lower_permits_lets_no_new_holder_into_the_slots_above_it() -> None:
    issuer = MemoryIssuer()
    three = issuer.semaphore("pool", permits=3, ttl=30)
    held = {p.slot: p for p in (three.acquire(timeout=0) for _ in range(3))}
    three.release(held[2])
    two = issuer.semaphore("pool", permits=2, ttl=30)
    with pytest.raises(AcquireTimeout):
        two.acquire(timeout=0)  # slot 2 is free, but a semaphore of 2 has slots 0 and 1
    three.release(held[0])
    assert two.acquire(timeout=0).slot == 0


def test_every_slot_of_a_semaphore_is_in_one_redis_cluster_slot() -> None:
    for name, tag in [("jobs", "jobs"), ("orders{eu}", "eu"), ("a}b", "a"), ("x{}y", "x{")]:
        slots = {key_slot(key_prefix(slot_name(name, k)) + "lease") for k in range(8)}
        assert slots == {key_slot(tag)}, name
    assert slot_name("jobs", 3) == "{jobs}#slot3"
    assert slot_name("orders{eu}", 0) == "orders{eu}#slot0"


def test_too_many_permits_and_a_lease_that_does_not_expire_are_refused() -> None:
    with pytest.raises(ValueError, match="permits must be from 1 to"):
        MemoryIssuer().semaphore("big", permits=MAX_PERMITS + 1)
    backend = fencing.connect("postgresql://localhost/db?lease=advisory")
    with pytest.raises(ValueError, match="lease=row"):
        backend.semaphore("jobs", permits=2)
    with pytest.raises(ValueError, match="lease=row"):
        backend.aio_semaphore("jobs", permits=2)
