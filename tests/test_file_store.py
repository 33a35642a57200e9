"""FileStore: token and data replaced together, stale writes refused across processes and
crashes, bad input refused before any I/O."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import fencing
from fencing import FileStore, StaleTokenError, _file_store


def _payload(token: int, size: int = 64) -> bytes:
    """Data that names the token that wrote it, so a test can match data to header."""
    return f"token={token};".encode().ljust(size, b".")


def _token_in(data: bytes) -> int:
    return int(data.split(b";")[0].removeprefix(b"token="))


def test_write_read_and_token(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    assert store.token is None
    with pytest.raises(FileNotFoundError):
        store.read()
    store.write(b"", 0)
    assert store.token == 0 and store.read() == b""
    store.write(b"hello", fencing.FenceToken(7, "f"))
    assert store.read() == b"hello" and store.token == 7
    store.write(bytearray(b"again"), 7)  # equal token: the same lease writing again
    store.write(memoryview(b"view"), 9)
    assert store.read_with_token() == (9, b"view")
    assert FileStore(str(tmp_path / "s")).read() == b"view"  # another object, same file


def test_stale_write_changes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"fresh", 34)
    before, stat = path.read_bytes(), path.stat()
    with pytest.raises(StaleTokenError) as info:
        store.write(b"stale", 33)
    assert (info.value.token, info.value.current) == (33, 34)
    assert str(path) in info.value.resource
    assert path.read_bytes() == before
    after = path.stat()
    assert (after.st_mtime_ns, after.st_ino) == (stat.st_mtime_ns, stat.st_ino)
    assert any(r.name == "fencing.guard" and "33" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / ".s.tmp").exists()


@pytest.mark.parametrize(
    ("token", "error"),
    [(True, TypeError), ("5", TypeError), (5.0, TypeError), (None, TypeError),
     (-1, ValueError), (2**63, ValueError)],
)  # fmt: skip
def test_bad_token_writes_nothing(tmp_path: Path, token: object, error: type) -> None:
    store = FileStore(tmp_path / "s")
    store.write(b"ok", 3)
    before = (tmp_path / "s").read_bytes()
    with pytest.raises(error):
        store.write(b"bad", token)  # type: ignore[arg-type]
    assert (tmp_path / "s").read_bytes() == before


@pytest.mark.parametrize("data", ["text", 5, None, [1, 2]])
def test_bad_data_writes_nothing(tmp_path: Path, data: object) -> None:
    store = FileStore(tmp_path / "s")
    with pytest.raises(TypeError):
        store.write(data, 1)  # type: ignore[arg-type]
    assert store.token is None
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="directory"):
        FileStore(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        FileStore(tmp_path / "missing" / "s")
    with pytest.raises(TypeError):
        FileStore(b"/tmp/x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FileStore(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("damage", "header_ok"),
    [
        (lambda raw: b"not a fencing record at all, just some text", False),
        (lambda raw: raw[:10], False),
        (lambda raw: raw[:12] + bytes([raw[12] ^ 1]) + raw[13:], False),  # token bit flip
        (lambda raw: raw[:-1], True),  # data truncated
        (lambda raw: raw + b"x", True),  # trailing garbage
    ],
)
def test_corrupt_record_is_a_clear_error(tmp_path: Path, damage: Any, header_ok: bool) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"payload", 5)
    path.write_bytes(damage(path.read_bytes()))
    damaged = path.read_bytes()
    with pytest.raises(ValueError, match="fencing record"):
        store.read()
    if header_ok:  # the mark is trustworthy (checksummed): a fresh write repairs the data
        with pytest.raises(StaleTokenError):
            store.write(b"old", 4)
        store.write(b"new", 6)
        assert store.read_with_token() == (6, b"new")
    else:  # no trustworthy mark: no write can be judged fresh, the file is left alone
        with pytest.raises(ValueError, match="fencing record"):
            _ = store.token
        with pytest.raises(ValueError, match="fencing record"):
            store.write(b"new", 10**6)
        assert path.read_bytes() == damaged


def _crash_before_replace(path: str, token: int) -> None:
    """In a child: write, and die by SIGKILL after the temp file is synced, before rename."""

    def die(tmp: Path) -> None:
        assert tmp.read_bytes().endswith(_payload(token))
        os.kill(os.getpid(), signal.SIGKILL)

    _file_store._before_replace = die
    FileStore(path).write(_payload(token), token)


def test_crash_between_temp_write_and_rename_keeps_previous(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(_payload(1), 1)
    before = path.read_bytes()
    child = multiprocessing.get_context("spawn").Process(
        target=_crash_before_replace, args=(str(path), 2)
    )
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert (tmp_path / ".s.tmp").exists()  # the crashed writer's synced temp file
    assert path.read_bytes() == before
    assert store.read_with_token() == (1, _payload(1))
    store.write(_payload(3), 3)  # the lock died with the child; the leftover is reused
    assert store.read_with_token() == (3, _payload(3))
    assert not (tmp_path / ".s.tmp").exists()
    with pytest.raises(StaleTokenError):
        store.write(_payload(2), 2)


def _writer(path: str, tokens: list[int], log: str) -> None:
    store = FileStore(path)
    with open(log, "a") as out:
        for token in tokens:
            try:
                store.write(_payload(token), token)
            except StaleTokenError as exc:
                assert exc.current is not None and exc.current > token
                out.write(f"stale {token} {exc.current}\n")
            else:
                out.write(f"ok {token}\n")
            out.flush()


def test_processes_racing_fresh_and_stale(tmp_path: Path) -> None:
    path, log = tmp_path / "s", tmp_path / "log"
    # Four writers, each mostly climbing but replaying old tokens now and then.
    plans = [
        [t for i in range(1, 60) for t in ((i * 4 + w), (i * 4 + w) - 9 if i % 3 == 0 else None)
         if t is not None and t >= 0]
        for w in range(4)
    ]  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(str(path), plan, str(log))) for plan in plans]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    lines = [line.split() for line in log.read_text().splitlines()]
    accepted = [int(parts[1]) for parts in lines if parts[0] == "ok"]
    stale = [int(parts[1]) for parts in lines if parts[0] == "stale"]
    assert len(lines) == sum(len(plan) for plan in plans)
    assert stale, "replayed old tokens must be refused at least sometimes"
    token, data = FileStore(path).read_with_token()
    assert token == _token_in(data) == max(accepted) == max(t for plan in plans for t in plan)
    assert not (tmp_path / ".s.tmp").exists()


def test_threads_share_a_store(tmp_path: Path) -> None:
    import threading

    store = FileStore(tmp_path / "s")
    results: list[tuple[int, bool]] = []
    lock = threading.Lock()

    def run(offset: int) -> None:
        for i in range(30):
            token = i * 4 + offset if i % 5 else max(0, i * 4 + offset - 12)
            try:
                store.write(_payload(token), token)
                ok = True
            except StaleTokenError:
                ok = False
            with lock:
                results.append((token, ok))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 120
    token, data = store.read_with_token()
    assert token == _token_in(data) == max(t for t, ok in results if ok) == 119


def test_symlink_writes_through_to_its_target(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real" / "s")
    FileStore(link).write(b"data", 1)
    assert link.is_symlink() and FileStore(tmp_path / "real" / "s").read() == b"data"
