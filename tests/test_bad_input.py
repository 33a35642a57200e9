"""Bad input found by trying, each refused up front (the contract checks names, ttls and
timeouts for every issuer; here: the bounds measured on real servers and file systems)."""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, delete

import fencing
from fencing._base.validate import MAX_TTL
from fencing.redis import RedisFence
from fencing.sql import SqlFence, create_tables
from fencing.sql._schema import leases


def test_redis_takes_and_renews_the_longest_ttl(redis_client: redis.Redis) -> None:
    """``MAX_TTL`` is real: Redis grants and renews it (one more second is refused)."""
    fence = RedisFence(redis_client, "longest", ttl=MAX_TTL)
    token = fence.acquire(timeout=0)
    fence.renew(token)
    assert redis_client.pttl("fencing:{longest}:lease") > (MAX_TTL - 1) * 1000
    fence.release(token)
    with pytest.raises(ValueError, match="at most"):
        fence.renew(fence.acquire(timeout=0), ttl=MAX_TTL + 1)


@pytest.mark.parametrize("ttl", [MAX_TTL + 1, 1e14, 9.3e15, 2.0**63])
def test_a_ttl_redis_cannot_hold_is_refused_before_any_io(
    redis_client: redis.Redis, ttl: float
) -> None:
    """Above ``MAX_TTL`` Redis refuses the renew (1e14 s) or even the acquire (~9.2e15 s:
    ``PX`` overflows); both used to come back as ``FenceUnavailable``."""
    with pytest.raises(ValueError, match="ttl must be at most"):
        RedisFence(redis_client, "too-long", ttl=ttl)
    assert redis_client.keys("*") == []


def test_acquire_with_an_infinite_timeout_waits_like_none() -> None:
    fence = fencing.MemoryFence("inf", issuer=fencing.MemoryIssuer())
    assert fence.acquire(timeout=math.inf) >= 1  # free: no wait at all
    with pytest.raises(ValueError):
        fence.acquire(timeout=-math.inf)


@pytest.mark.parametrize("kind", [fencing.FileStore, fencing.FileMark])
def test_file_names_whose_lock_file_is_too_long_are_refused(tmp_path: Path, kind: type) -> None:
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    longest = limit - len(".") - len(".lock")
    with pytest.raises(ValueError, match=f"use at most {longest} bytes"):
        kind(tmp_path / ("n" * (longest + 1)))
    with pytest.raises(ValueError, match=r"\d+ bytes long"):
        kind(tmp_path / ("é" * ((longest + 2) // 2)))  # counted in bytes, not characters
    assert list(tmp_path.iterdir()) == []  # nothing created
    store = fencing.FileStore(tmp_path / ("n" * longest))  # the longest name works
    store.write(b"data", 1)
    assert store.read() == b"data"
    store.close()


def test_a_deleted_lease_row_does_not_restart_tokens(sql_url: str) -> None:
    """Deleting a ``fencing_leases`` row by hand: the next token is still higher (the
    database clock floors it, as the server clock does on Redis)."""
    engine = create_engine(sql_url)
    if sql_url.startswith("postgresql"):
        create_tables(engine)
    name = f"deleted:{uuid.uuid4().hex}"
    fence = SqlFence(sql_url, name, ttl=5)
    tokens = []
    for _ in range(3):
        token = fence.acquire(timeout=0)
        fence.release(token)
        tokens.append(token)
        with engine.begin() as conn:
            assert conn.execute(delete(leases).where(leases.c.name == name)).rowcount == 1
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    store_token = fence.acquire(timeout=0)  # a store that saw tokens[-1] still admits it
    assert store_token > tokens[-1]
    engine.dispose()
