"""A SQL read-write lock's waiter is woken by a release made through the same issuer
(``SqlIssuer.wakes``), blocking and asyncio, instead of noticing it at its next poll.

The poll (``RW_POLL``) and the writer's longest block are set above the test's patience,
so a waiter that nothing woke would stay blocked until then: the test fails. The issuer's
``wakes`` is ``Watched``, which says when the writer has left its wake-up, so the release
comes after that every run (a release before it is only noticed at the next poll).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import fencing
import fencing.aio
import fencing.sql._async_issuer
import fencing.sql._issuer
from fencing._base.waits import Wakes
from fencing.sql import SqlIssuer
from fencing.sql.aio import SqlIssuer as AsyncSqlIssuer

PATIENCE = 30.0  # seconds; an unwoken waiter blocks for 120
NAME = "rw-sql-wake"


class Watched(Wakes):
    """``Wakes`` that sets ``waits`` once a waiter has left its wake-up."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = threading.Event()

    @contextmanager
    def waiting(self, key: str, wake: Callable[[], None]) -> Iterator[None]:
        with super().waiting(key, wake):
            self.waits.set()
            yield


@pytest.fixture
def slow_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (fencing.sql._issuer, fencing.sql._async_issuer):
        monkeypatch.setattr(module, "RW_POLL", 120.0)


@pytest.mark.usefixtures("slow_poll")
def test_a_release_through_the_same_issuer_wakes_the_waiting_writer(tmp_path: Path) -> None:
    issuer = SqlIssuer(f"sqlite:///{tmp_path / 'rw.db'}")
    issuer.wakes = wakes = Watched()
    reader, writer = fencing.RWLock(issuer, NAME, ttl=60), fencing.RWLock(issuer, NAME, ttl=60)
    writer.write._waiting.max_block = 120.0  # only the release's wake can end the wait early
    read = reader.read.acquire(timeout=0)
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(writer.write.acquire()), daemon=True)
    thread.start()
    assert wakes.waits.wait(PATIENCE), "the writer never waited"
    reader.read.release(read)
    thread.join(PATIENCE)
    assert got, "the waiting writer was not woken by the release"
    assert got[0] > read, f"write token {got[0]} after the read epoch {read}"
    writer.write.release(got[0])


@pytest.mark.usefixtures("slow_poll")
async def test_a_release_through_the_same_asyncio_issuer_wakes_the_waiting_writer(
    tmp_path: Path,
) -> None:
    issuer = AsyncSqlIssuer(f"sqlite+aiosqlite:///{tmp_path / 'rw.db'}")
    issuer.wakes = wakes = Watched()
    reader = fencing.aio.RWLock(issuer, NAME, ttl=60)
    writer = fencing.aio.RWLock(issuer, NAME, ttl=60)
    writer.write._waiting.max_block = 120.0
    read = await reader.read.acquire(timeout=0)
    waiting = asyncio.ensure_future(writer.write.acquire())
    while not wakes.waits.is_set():
        await asyncio.sleep(0.01)  # bounded by the test's timeout
    await reader.read.release(read)
    token = await asyncio.wait_for(waiting, PATIENCE)
    assert token > read, f"write token {token} after the read epoch {read}"
    await writer.write.release(token)
    await issuer.engine.dispose()
