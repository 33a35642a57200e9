"""FileStore: token and data replaced together, stale writes refused across processes and
crashes, bad input refused before any I/O."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from processes import CONTEXT, frozen
from waiting import joined

import fencing
from fencing import FileStore, StaleTokenError
from fencing._resource import records as _records


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


def _refused_without_a_trace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, attempt: Any
) -> StaleTokenError:
    """Run ``attempt(store)`` with token 33 on a store at 34: it must be refused, logged,
    and leave the file exactly as it was (bytes, mtime, inode, no temp file)."""
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"fresh", 34)
    before, stat = path.read_bytes(), path.stat()
    with pytest.raises(StaleTokenError) as info:
        attempt(store)
    assert (info.value.token, info.value.current) == (33, 34)
    assert path.read_bytes() == before
    after = path.stat()
    assert (after.st_mtime_ns, after.st_ino) == (stat.st_mtime_ns, stat.st_ino)
    assert any(r.name == "fencing.guard" and "33" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / ".s.tmp").exists()
    return info.value


def test_stale_write_changes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    error = _refused_without_a_trace(tmp_path, caplog, lambda store: store.write(b"stale", 33))
    assert str(tmp_path / "s") in error.resource


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

    _records._before_replace = die
    FileStore(path).write(_payload(token), token)


def test_crash_between_temp_write_and_rename_keeps_previous(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(_payload(1), 1)
    before = path.read_bytes()
    child = CONTEXT.Process(target=_crash_before_replace, args=(str(path), 2))
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
    workers = [CONTEXT.Process(target=_writer, args=(str(path), plan, str(log))) for plan in plans]
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
    joined(*threads)
    assert len(results) == 120
    token, data = store.read_with_token()
    assert token == _token_in(data) == max(t for t, ok in results if ok) == 119


def test_symlink_writes_through_to_its_target(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real" / "s")
    FileStore(link).write(b"data", 1)
    assert link.is_symlink() and FileStore(tmp_path / "real" / "s").read() == b"data"


# --- update: the guarded read-modify-write ---------------------------------------------


def _recording(calls: list[bytes | None], result: bytes) -> Any:
    """An update function that records what it was called with and returns ``result``."""

    def fn(current: bytes | None) -> bytes:
        calls.append(current)
        return result

    return fn


def test_update_reads_calls_and_writes(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    seen: list[bytes | None] = []

    def append(current: bytes | None) -> bytes:
        seen.append(current)
        return (current or b"") + b"x"

    assert store.update(append, 3) == b"x"  # never written: fn sees None
    assert store.update(append, fencing.FenceToken(3, "f")) == b"xx"  # equal token: same lease
    assert store.update(lambda current: bytearray(b"ba"), 5) == b"ba"  # bytes-like is fine
    assert seen == [None, b"x"]
    assert store.read_with_token() == (5, b"ba")
    assert store.update(lambda current: b"", 6) == b"" and store.read_with_token() == (6, b"")


def test_stale_update_never_calls_fn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[bytes | None] = []
    fn = _recording(calls, b"stale")
    _refused_without_a_trace(tmp_path, caplog, lambda store: store.update(fn, 33))
    assert calls == []


@pytest.mark.parametrize(
    ("fn", "token", "error"),
    [(b"not callable", 1, TypeError), (None, 1, TypeError),
     (lambda current: b"x", True, TypeError), (lambda current: b"x", -1, ValueError),
     (lambda current: b"x", 2**63, ValueError)],
)  # fmt: skip
def test_update_bad_arguments_before_any_io(
    tmp_path: Path, fn: Any, token: object, error: type
) -> None:
    store = FileStore(tmp_path / "s")
    with pytest.raises(error):
        store.update(fn, token)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # not even the lock file was created


@pytest.mark.parametrize("result", ["text", 5, None, [1, 2]])
def test_update_fn_returning_non_bytes_writes_nothing(tmp_path: Path, result: object) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"before", 2)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="update's fn result"):
        store.update(lambda current: result, 3)  # type: ignore[arg-type,return-value]
    assert path.read_bytes() == before and store.token == 2
    assert not (tmp_path / ".s.tmp").exists()


def test_update_fn_raising_writes_nothing_and_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"before", 2)
    before = path.read_bytes()

    def boom(current: bytes | None) -> bytes:
        assert current == b"before"
        raise RuntimeError("computation failed")

    with pytest.raises(RuntimeError, match="computation failed"):
        store.update(boom, 9)
    assert path.read_bytes() == before and store.token == 2  # the mark was not raised
    assert store.update(lambda current: (current or b"") + b"+", 3) == b"before+"


def test_update_on_a_corrupt_record_never_calls_fn(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FileStore(path)
    store.write(b"payload", 5)
    path.write_bytes(path.read_bytes()[:-1])  # data truncated: header (mark) still valid
    damaged = path.read_bytes()
    calls: list[bytes | None] = []
    with pytest.raises(ValueError, match="fencing record"):
        store.update(_recording(calls, b"new"), 6)
    assert calls == [] and path.read_bytes() == damaged


def _incrementer(path: str, rounds: int, tokens: list[int], log: str) -> None:
    """In a child: ``rounds`` counter increments via ``update``, one token per round."""
    store = FileStore(path)
    with open(log, "a") as out:
        for token in tokens[:rounds]:
            calls = 0

            def increment(current: bytes | None) -> bytes:
                nonlocal calls
                calls += 1
                return str(int(current or b"0") + 1).encode()

            try:
                store.update(increment, token)
            except StaleTokenError:
                out.write(f"stale {token} {calls}\n")
            else:
                out.write(f"ok {token} {calls}\n")
            out.flush()


def _run_incrementers(tmp_path: Path, plans: list[list[int]]) -> list[list[str]]:
    path, log = tmp_path / "counter", tmp_path / "log"
    workers = [
        CONTEXT.Process(target=_incrementer, args=(str(path), len(plan), plan, str(log)))
        for plan in plans
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    return [line.split() for line in log.read_text().splitlines()]


def test_processes_incrementing_with_fresh_tokens_lose_nothing(tmp_path: Path) -> None:
    """Four processes, 50 increments each, all under one fresh token: every one counts."""
    lines = _run_incrementers(tmp_path, [[7] * 50 for _ in range(4)])
    assert len(lines) == 200 and all(parts[0] == "ok" and parts[2] == "1" for parts in lines)
    assert FileStore(tmp_path / "counter").read_with_token() == (7, b"200")


def test_processes_incrementing_with_climbing_tokens(tmp_path: Path) -> None:
    """Four processes climbing tokens at their own pace: the counter is exactly the number
    of accepted updates, and a rejected update never ran its function."""
    lines = _run_incrementers(tmp_path, [list(range(w, 200 + w, 4)) for w in range(4)])
    assert len(lines) == 200
    accepted = [int(parts[1]) for parts in lines if parts[0] == "ok"]
    assert all(parts[2] == ("1" if parts[0] == "ok" else "0") for parts in lines)
    token, data = FileStore(tmp_path / "counter").read_with_token()
    assert int(data) == len(accepted) and token == max(accepted) == 199


def _paused_holder(path: str, token: int, where: str, log: str) -> None:
    """In a child: the holder of ``token`` adds ``A`` by ``update``, freezing itself with
    SIGSTOP ``before`` calling update (a zombie that paused past its lease) or ``inside``
    its function (while it holds the store's lock, after its read)."""
    store = FileStore(path)
    calls: list[bytes | None] = []

    def add_a(current: bytes | None) -> bytes:
        calls.append(current)
        if where == "inside":
            os.kill(os.getpid(), signal.SIGSTOP)
        return (current or b"") + b"A;"

    if where == "before":
        os.kill(os.getpid(), signal.SIGSTOP)
    try:
        store.update(add_a, token)
        outcome = "ok"
    except StaleTokenError:
        outcome = "stale"
    Path(log).write_text(f"{outcome} {calls!r}")


def _adder(path: str, token: int) -> None:
    FileStore(path).update(lambda current: (current or b"") + b"B;", token)


def _start_frozen(path: Path, where: str, log: Path) -> Any:
    holder = CONTEXT.Process(target=_paused_holder, args=(str(path), 4, where, str(log)))
    holder.start()
    frozen(holder, "the holder froze itself")
    return holder


def test_paused_holder_update_after_a_newer_one_is_rejected_whole(tmp_path: Path) -> None:
    """A (token 4) freezes past its lease; B (token 5) updates; A wakes and updates: A's
    whole read-modify-write is refused (its function never runs) and B's update stays."""
    path, log = tmp_path / "s", tmp_path / "a.log"
    FileStore(path).write(b"", 3)
    holder = _start_frozen(path, "before", log)
    adder = CONTEXT.Process(target=_adder, args=(str(path), 5))
    adder.start()
    adder.join(60)
    assert adder.exitcode == 0
    os.kill(holder.pid, signal.SIGCONT)
    holder.join(60)
    assert holder.exitcode == 0
    assert log.read_text() == "stale []"
    assert FileStore(path).read_with_token() == (5, b"B;")


def test_paused_holder_inside_update_cannot_lose_the_newer_update(tmp_path: Path) -> None:
    """A (token 4) freezes after its read, inside update; B (token 5) arrives meanwhile.
    Without update, A's late write would land and B's, made from the old read, would drop
    it. With update B waits for A's lock, reads A's result and adds to it: both survive."""
    path, log = tmp_path / "s", tmp_path / "a.log"
    FileStore(path).write(b"", 3)
    holder = _start_frozen(path, "inside", log)
    adder = CONTEXT.Process(target=_adder, args=(str(path), 5))
    adder.start()
    adder.join(1.0)
    assert adder.is_alive()  # B cannot read while A holds the store between read and write
    assert FileStore(path).read_with_token() == (3, b"")
    os.kill(holder.pid, signal.SIGCONT)
    holder.join(60)
    adder.join(60)
    assert (holder.exitcode, adder.exitcode) == (0, 0)
    assert log.read_text() == "ok [b'']"
    assert FileStore(path).read_with_token() == (5, b"A;B;")
    with pytest.raises(StaleTokenError):  # and A, now stale, cannot update again
        FileStore(path).update(lambda current: b"A again", 4)


def _increment_slowly(current: bytes | None) -> bytes:
    value = int(current or b"0")
    time.sleep(0.001)  # widen the read-modify-write window: lost updates would show
    return b"%d" % (value + 1)


def test_processes_forked_from_one_store_still_exclude_each_other(tmp_path: Path) -> None:
    # The store's lock descriptor is open before the fork: the children inherit it, and
    # flock on that shared open file description would not exclude them from each other
    # or from the parent. Each process must take the lock through its own descriptor.
    store = FileStore(tmp_path / "counter")
    store.write(b"0", 1)
    rounds = 40
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                for _ in range(rounds):
                    store.update(_increment_slowly, 1)
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    for _ in range(rounds):
        store.update(_increment_slowly, 1)
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    assert store.read() == b"%d" % (3 * rounds)  # no increment lost
    store.close()


def test_store_closes_and_reopens_its_lock_file(tmp_path: Path) -> None:
    with FileStore(tmp_path / "record") as store:
        store.write(b"a", 1)
        assert store._fd >= 0
    assert store._fd == -1
    store.write(b"b", 2)  # reopens lazily
    assert store.read_with_token() == (2, b"b")
    other = FileStore(tmp_path / "record")  # a second store in this process still excludes
    other.write(b"c", 3)
    with pytest.raises(StaleTokenError):
        store.write(b"d", 2)
    store.close()
    other.close()
