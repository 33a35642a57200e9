"""FileStore.claim: raise the high-water mark, keep the data, crash-safe like a write.

The read-then-write window it closes, as Hypothesis generates it, is in
test_statemachine_claims.py; here each promise is checked on its own.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from processes import CONTEXT

import fencing
from fencing import FileStore, StaleTokenError
from fencing._resource import records as _records


def test_claim_raises_the_mark_and_keeps_the_data(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    store.write(b"ledger", 3)
    store.claim(5)
    assert store.read_with_token() == (5, b"ledger")
    with pytest.raises(StaleTokenError) as info:
        store.write(b"stale", 4)
    assert (info.value.token, info.value.current) == (4, 5)
    with pytest.raises(StaleTokenError):
        store.update(lambda data: b"stale too", 4)
    with pytest.raises(StaleTokenError):
        store.claim(4)
    assert store.read_with_token() == (5, b"ledger")
    store.write(b"ledger+5", 5)  # the claimer's own write
    assert store.read_with_token() == (5, b"ledger+5")


def test_read_then_write_window_is_closed(tmp_path: Path) -> None:
    """A (token 4) reads and pauses; B (token 5) claims and reads; A wakes and writes:
    refused, so B's write, computed from its read, drops nothing. Without B's claim, A's
    write lands first and B's overwrites it (the lost update the claim exists for)."""
    for claims in (True, False):
        store = FileStore(tmp_path / f"claims-{claims}")
        store.write(b"0", 3)
        a_read = store.read()
        if claims:
            store.claim(5)
        b_read = store.read()
        if claims:
            with pytest.raises(StaleTokenError):
                store.write(a_read + b"+A", 4)
        else:
            store.write(a_read + b"+A", 4)
        store.write(b_read + b"+B", 5)
        assert store.read() == b"0+B"
        assert store.read_with_token() == (5, b"0+B")
        # With the claim nothing A did was accepted; without it, A's accepted write is gone.


def test_claim_with_the_same_token_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"data", 7)
    before = path.stat()
    store.claim(fencing.FenceToken(7, "f"))
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert store.read_with_token() == (7, b"data")


def test_claim_before_the_first_write_keeps_it_never_written(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    store.claim(5)
    assert store.token == 5
    with pytest.raises(FileNotFoundError):
        store.read()
    with pytest.raises(FileNotFoundError):
        store.read_with_token()
    with pytest.raises(StaleTokenError):
        store.write(b"stale", 4)
    store.claim(6)
    seen: list[bytes | None] = []

    def first(data: bytes | None) -> bytes:
        seen.append(data)
        return b"first"

    assert store.update(first, 6) == b"first"
    assert seen == [None]  # update's fn sees "never written", as before any claim
    assert store.read_with_token() == (6, b"first")


@pytest.mark.parametrize(
    ("token", "error"),
    [(True, TypeError), ("5", TypeError), (5.0, TypeError), (None, TypeError),
     (-1, ValueError), (2**63, ValueError)],
)  # fmt: skip
def test_bad_token_claims_nothing(tmp_path: Path, token: object, error: type) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    with pytest.raises(error):
        store.claim(token)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even the lock file
    store.write(b"ok", 3)
    before = path.read_bytes()
    with pytest.raises(error):
        store.claim(token)  # type: ignore[arg-type]
    assert path.read_bytes() == before


def test_claim_leaves_a_corrupt_record_alone(tmp_path: Path) -> None:
    path = tmp_path / "s"
    FileStore(path).write(b"payload", 5)
    path.write_bytes(path.read_bytes()[:-1])  # data truncated, header intact
    damaged = path.read_bytes()
    with pytest.raises(ValueError, match="fencing record"):
        FileStore(path).claim(6)
    assert path.read_bytes() == damaged


def _crash_in_claim(path: str, token: int) -> None:
    """In a child: claim, and die by SIGKILL after the temp file is synced, before rename."""

    def die(tmp: Path) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    _records._before_replace = die
    FileStore(path).claim(token)


def test_crash_inside_a_claim_keeps_the_previous_record(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"payload", 1)
    before = path.read_bytes()
    child = CONTEXT.Process(target=_crash_in_claim, args=(str(path), 2))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert path.read_bytes() == before
    store.claim(2)  # the lock died with the child
    assert store.read_with_token() == (2, b"payload")
