"""Read-write lock behaviour beyond the contract: the timeline of docs/rwlock.md on a
virtual clock, the Redis Cluster slot of a lock's keys, the issuers refused."""

from __future__ import annotations

from typing import cast

import pytest

import fencing
from fencing import AcquireTimeout, MemoryIssuer, MemoryMark, StaleTokenError
from fencing._primitives.rwlock import Side
from fencing.redis._rwlock_scripts import rw_keys
from fencing.redis._scripts import key_slot
from fencing.testing.simulation import VirtualClock


def test_the_timeline_of_the_read_epoch() -> None:
    """docs/rwlock.md's timeline: readers together share the epoch, a waiting writer
    stops a new reader, a reader paused past its lease is refused at the resource once
    the writer claimed, and the next reader begins a new epoch above the write."""
    clock = VirtualClock()
    issuer = MemoryIssuer(clock=clock)
    mark = MemoryMark()
    rw = issuer.rwlock("catalog", ttl=10)
    w1 = rw.write.acquire(timeout=0)
    mark.claim(w1)
    rw.write.release(w1)
    r1, r2 = rw.read.acquire(timeout=0), rw.read.acquire(timeout=0)
    assert r1 == r2 > w1
    mark.claim(r1)
    mark.claim(r2)  # readers of one epoch never refuse each other
    rw.read.release(r2)
    writer = issuer.rwlock("catalog", ttl=10).write
    side = cast(Side, writer.issuer)  # a writer's attempt that marks it waiting for 1 s
    w2 = side.try_acquire_queued("catalog", "w2", 10_000, 1_000, False)
    assert not isinstance(w2, int)  # refused, and marked waiting
    with pytest.raises(AcquireTimeout):
        rw.read.acquire(timeout=0)  # a new reader waits behind the writer
    clock.advance(11)  # r1 paused past its lease (the marker lapsed too)
    w2 = writer.acquire(timeout=0)
    assert w2 > r1
    mark.claim(w2)
    with pytest.raises(StaleTokenError):
        mark.claim(r1)  # r1 wakes and claims before reading: refused
    writer.release(w2)
    r3 = rw.read.acquire(timeout=0)
    assert r3 > w2  # a new epoch
    mark.claim(r3)


def test_every_key_of_a_rwlock_is_in_its_names_redis_cluster_slot() -> None:
    for name, tag in [("catalog", "catalog"), ("orders{eu}", "eu")]:
        assert {key_slot(key.decode()) for key in rw_keys(name)} == {key_slot(tag)}, name


def test_an_issuer_without_read_write_locks_is_refused() -> None:
    with pytest.raises(TypeError, match="no read-write locks"):
        fencing.RWLock(object(), "catalog")  # type: ignore[arg-type]
