"""SqlFence: leases and tokens in ``fencing_leases``, on a SQLite file and on PostgreSQL.

What every issuer promises is the contract's (tests/test_contract_issuers.py); here is
what is SQL's own: the row, ``Busy`` from the row, URLs, an unreachable database, and
processes racing on one database.
"""

from __future__ import annotations

import multiprocessing
import uuid

import pytest
from processes import CONTEXT
from sqlalchemy import create_engine, select

import fencing
from fencing.sql import SqlFence, create_tables, leases


@pytest.fixture
def url(sql_url: str) -> str:
    """A database with the SDK's tables (SQLite creates them itself on first use)."""
    if sql_url.startswith("postgresql"):
        engine = create_engine(sql_url)
        create_tables(engine)
        engine.dispose()
    return sql_url


def unique(prefix: str) -> str:
    return f"{prefix}:{uuid.uuid4().hex}"


def test_lease_is_exclusive_and_busy_reports_expiry(url: str) -> None:
    name = unique("x")
    holder, other = SqlFence(url, name, ttl=30), SqlFence(url, name, ttl=30)
    token = holder.acquire()
    with pytest.raises(fencing.AcquireTimeout):
        other.acquire(timeout=0)
    busy = other.issuer.try_acquire(name, "someone", 1000)
    assert isinstance(busy, fencing.Busy)
    assert busy.expires_in is not None and 0 < busy.expires_in <= 30
    holder.release(token)
    assert other.acquire(timeout=0) > token


def test_release_keeps_the_counter_in_the_row(url: str) -> None:
    name = unique("k")
    fence = SqlFence(url, name)
    token = fence.acquire()
    fence.release(token)
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(select(leases).where(leases.c.name == name)).one()
    engine.dispose()
    assert (row.token, row.holder, row.expires_at) == (token, None, None)


def test_bad_input_is_refused_before_any_io(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="sqlite, postgresql, mysql and mariadb"):
        SqlFence("mssql://u@h/db", "n")
    with pytest.raises(ValueError, match="file"):
        SqlFence("sqlite://", "n")
    with pytest.raises(TypeError):
        SqlFence(42, "n")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SqlFence(f"sqlite:///{tmp_path}/a.db", "")
    with pytest.raises(ValueError):
        SqlFence(f"sqlite:///{tmp_path}/a.db", "n", ttl=float("nan"))


def test_unreachable_database_raises_fence_unavailable() -> None:
    from fencing.testing.servers import free_port

    fence = SqlFence(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/none", "u")
    with pytest.raises(fencing.FenceUnavailable) as info:
        fence.acquire(timeout=0)
    assert info.value.__cause__ is not None


def _race(url: str, name: str, rounds: int, out: multiprocessing.Queue[list[int]]) -> None:
    fence = SqlFence(url, name, ttl=5)
    tokens = []
    for _ in range(rounds):
        token = fence.acquire(timeout=60)
        tokens.append(int(token))
        fence.release(token)
    out.put(tokens)


def test_acquisitions_racing_across_processes_get_unique_increasing_tokens(url: str) -> None:
    name, processes, rounds = unique("race"), 4, 15
    out: multiprocessing.Queue[list[int]] = CONTEXT.Queue()
    workers = [
        CONTEXT.Process(target=_race, args=(url, name, rounds, out)) for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    for tokens in results:
        assert tokens == sorted(tokens) and len(set(tokens)) == rounds
    everything = sorted(t for tokens in results for t in tokens)
    assert len(set(everything)) == processes * rounds  # no token issued twice
