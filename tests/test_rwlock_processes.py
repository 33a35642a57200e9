"""Read-write locks with real processes frozen past their leases (SIGSTOP), on each
engine, each with its control in the same test (docs/rwlock.md).

The resource is a ``FileStore`` holding two halves, ``"a,b"``, that a writer changes in
two steps: a reader that sees them differ has read a write half done (a torn read).

- A reader frozen past its lease: it took the read epoch, froze before its read; a
  writer took the lock once the reader's lease expired, claimed, wrote the first half;
  the reader wakes in the middle of the write. Claiming first, its claim is refused
  (the writer's token is above the epoch); not claiming (the control), it reads the torn
  value.
- A writer frozen past its lease: it claimed and read, froze before its write; a reader
  took the lock once the writer's lease expired, read, and reads again while the writer
  wakes and writes. With the reader's claim, the write is refused and the reader's two
  reads agree; without it (the control), the write lands under the read lease.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from processes import CONTEXT, frozen
from waiting import PATIENCE

import fencing
from fencing import FileStore, RWLock, StaleTokenError
from fencing.testing.servers import RedisServer

#: The ttl of the frozen holder's lease: it expires while the holder is stopped.
FROZEN_TTL = 0.3


def _rwlock(url: str, name: str, ttl: float) -> RWLock:
    """``fencing.connect(url).rwlock(name, ttl)`` (the ``Backend`` protocol does not
    name ``rwlock`` yet)."""
    backend: Any = fencing.connect(url)
    rwlock: RWLock = backend.rwlock(name, ttl)
    return rwlock


@pytest.fixture(params=["redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an engine with read-write locks: the session's Redis, a SQLite file."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fencing.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return f"redis://127.0.0.1:{server.port}"


def _frozen_reader(url: str, name: str, path: str, claims: bool, log: str) -> None:
    """In a child: take the read epoch, freeze, then (claiming first, or not) read."""
    rw = _rwlock(url, name, ttl=FROZEN_TTL)
    epoch = rw.read.acquire(timeout=PATIENCE)
    os.kill(os.getpid(), signal.SIGSTOP)  # paused past its lease, before its read
    store = FileStore(path)
    try:
        if claims:
            store.claim(epoch)
        outcome = f"read {store.read().decode()}"
    except StaleTokenError:
        outcome = "refused"
    Path(log).write_text(outcome)


def _frozen_writer(url: str, name: str, path: str, log: str) -> None:
    """In a child: take the write lease, claim and read, freeze, then write."""
    rw = _rwlock(url, name, ttl=FROZEN_TTL)
    token = rw.write.acquire(timeout=PATIENCE)
    store = FileStore(path)
    store.claim(token)
    seen = store.read().decode()
    os.kill(os.getpid(), signal.SIGSTOP)  # paused past its lease, before its write
    try:
        store.write(f"{seen},late".encode(), token)
        outcome = "accepted"
    except StaleTokenError:
        outcome = "refused"
    Path(log).write_text(outcome)


def _first_edition(url: str, name: str, path: str) -> FileStore:
    rw = _rwlock(url, name, ttl=30)
    with rw.write.hold(timeout=PATIENCE) as token:
        store = FileStore(path)
        store.write(b"1,1", token)
    return store


@pytest.mark.parametrize("claims", [True, False], ids=["claims", "control"])
def test_a_reader_frozen_past_its_lease_is_refused_once_a_writer_claimed(
    url: str, claims: bool, tmp_path: Path
) -> None:
    name, path, log = (
        f"rw-reader-{uuid.uuid4().hex}",
        str(tmp_path / "store"),
        tmp_path / "reader.log",
    )
    store = _first_edition(url, name, path)
    reader = CONTEXT.Process(target=_frozen_reader, args=(url, name, path, claims, str(log)))
    reader.start()
    pid = frozen(reader, "the reader took its epoch and froze")
    rw = _rwlock(url, name, ttl=30)
    token = rw.write.acquire(timeout=PATIENCE)  # once the reader's lease has expired
    store.claim(token)
    store.write(b"2,1", token)  # the first half
    os.kill(pid, signal.SIGCONT)  # the reader wakes in the middle of the write
    reader.join(PATIENCE)
    assert reader.exitcode == 0, f"the reader ended with {reader.exitcode}"
    store.write(b"2,2", token)  # the second half
    rw.write.release(token)
    assert log.read_text() == ("refused" if claims else "read 2,1")  # the control: torn


@pytest.mark.parametrize("claims", [True, False], ids=["claims", "control"])
def test_a_writer_frozen_past_its_lease_is_refused_once_a_reader_claimed(
    url: str, claims: bool, tmp_path: Path
) -> None:
    name, path, log = (
        f"rw-writer-{uuid.uuid4().hex}",
        str(tmp_path / "store"),
        tmp_path / "writer.log",
    )
    store = _first_edition(url, name, path)
    writer = CONTEXT.Process(target=_frozen_writer, args=(url, name, path, str(log)))
    writer.start()
    pid = frozen(writer, "the writer claimed, read and froze")
    rw = _rwlock(url, name, ttl=30)
    epoch = rw.read.acquire(timeout=PATIENCE)  # once the writer's lease has expired
    if claims:
        store.claim(epoch)
    first = store.read()
    os.kill(pid, signal.SIGCONT)  # the writer wakes and writes under the read lease
    writer.join(PATIENCE)
    assert writer.exitcode == 0, f"the writer ended with {writer.exitcode}"
    second = store.read()
    rw.read.release(epoch)
    if claims:
        assert (log.read_text(), second) == ("refused", first)
    else:  # the control: the late write landed under the read lease
        assert (log.read_text(), second) == ("accepted", b"1,1,late")
