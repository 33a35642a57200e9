"""Elections (issue 22): what the contract (``ElectionContract``, on every backend) does not
cover: the backends' ``election``/``aio_election``, a candidate value as long as the SQL
holder column allows on PostgreSQL, issuers that cannot report a leader, the leader a
plain fence shows, and a cancelled ``run``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from waiting import PATIENCE

import fencing
import fencing.aio
from fencing import cli
from fencing._primitives.election import MAX_VALUE
from fencing.sql import SqlIssuer, create_tables
from fencing.testing.servers import PostgresServer


def test_a_backend_gives_elections(tmp_path: Path) -> None:
    backend = fencing.connect(f"sqlite:///{tmp_path / 'f.db'}")
    election = backend.election("scheduler", ttl=30)
    assert election.leader() is None
    with election.campaign("host-1:8080", timeout=0) as term:
        leader = backend.election("scheduler").leader()
        assert leader == fencing.Leader("host-1:8080", term.token)
        assert leader is not None and leader.token.name == "scheduler"
    assert election.leader() is None


async def test_a_backend_gives_asyncio_elections(tmp_path: Path) -> None:
    backend = fencing.connect(f"sqlite:///{tmp_path / 'f.db'}")
    election = backend.aio_election("scheduler", ttl=30)
    async with await election.campaign("host-2", timeout=0) as term:
        assert backend.election("scheduler").leader() == fencing.Leader("host-2", term.token)
    assert await election.leader() is None
    await election.aclose()


def test_the_longest_value_fits_the_sql_holder_column(postgres_server: PostgresServer) -> None:
    url = postgres_server.url
    engine = create_engine(url)
    create_tables(engine)
    issuer = SqlIssuer(engine)
    election = fencing.Election(issuer, "longest", ttl=30)
    value = "v" * MAX_VALUE
    with election.campaign(value, timeout=0) as term:
        assert election.leader() == fencing.Leader(value, term.token)
    engine.dispose()


def test_an_issuer_without_status_cannot_hold_elections() -> None:
    class Bare:
        def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | fencing.Busy:
            return 1

        def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
            return True

        def release(self, name: str, token: int, holder: str) -> bool:
            return True

    with pytest.raises(TypeError, match="status"):
        fencing.Election(Bare(), "x")


def test_a_plain_fence_of_the_name_leads_with_no_value() -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("shared", ttl=30, issuer=issuer)
    token = fence.acquire()
    assert fencing.Election(issuer, "shared").leader() == fencing.Leader("", token)
    fence.release(token)


async def test_a_cancelled_run_resigns_and_stays_cancelled() -> None:
    issuer = fencing.MemoryIssuer()
    election = fencing.aio.Election(fencing.aio.MemoryFence("x", issuer=issuer).issuer, "run")
    leading = asyncio.Event()

    async def lead(term: fencing.aio.Term) -> None:
        leading.set()
        await asyncio.sleep(PATIENCE)

    runner = asyncio.create_task(election.run(lead, "a"))
    await asyncio.wait_for(leading.wait(), PATIENCE)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert await election.leader() is None  # resigned on the way out


def test_run_resigns_and_raises_when_fn_fails() -> None:
    issuer = fencing.MemoryIssuer()
    election = fencing.Election(issuer, "failing", ttl=30)

    def lead(term: fencing.Term) -> None:
        raise RuntimeError("the leader's job failed")

    with pytest.raises(RuntimeError):
        election.run(lead, "a")
    assert election.leader() is None


def test_fencing_status_shows_the_leader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    with fencing.connect(url).election("beat", ttl=30).campaign("worker-7", timeout=0) as term:
        assert cli.main(["status", "--url", url, "beat"]) == 0
        out = capsys.readouterr().out
    assert f"with token {int(term.token)} (election leader 'worker-7')" in out, out


def test_an_election_needs_a_status_of_its_kind() -> None:
    issuer = fencing.MemoryIssuer()
    with pytest.raises(TypeError, match="async status"):
        fencing.aio.Election(issuer, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="blocking status"):
        fencing.Election(fencing.aio.MemoryFence("x", issuer=issuer).issuer, "x")  # type: ignore[arg-type]


async def test_run_resigns_when_fn_fails_before_its_first_await() -> None:
    issuer = fencing.MemoryIssuer()
    election = fencing.aio.Election(fencing.aio.MemoryFence("x", issuer=issuer).issuer, "sync")

    def lead(term: fencing.aio.Term) -> Awaitable[None]:
        raise RuntimeError("failed before returning a coroutine")

    with pytest.raises(RuntimeError):
        await election.run(lead, "a")
    assert await election.leader() is None


@pytest.mark.parametrize(
    ("poll", "error"),
    [(-1, ValueError), (0, ValueError), (float("inf"), ValueError), ("1", TypeError)],
    ids=repr,
)
def test_a_bad_poll_is_named_poll(poll: object, error: type[Exception]) -> None:
    """``observe``'s check names its own argument, not ``timeout``, blocking and asyncio."""
    issuer = fencing.MemoryIssuer()
    blocking = fencing.Election(issuer, "poll")
    aio = fencing.aio.Election(fencing.aio.MemoryFence("x", issuer=issuer).issuer, "poll")
    for observe in (blocking.observe, aio.observe):
        with pytest.raises(error, match=r"^poll must"):
            observe(poll)  # type: ignore[arg-type]
