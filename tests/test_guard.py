"""guard with memory and file marks: the guard's own API (decorator forms, arguments,
logs), the file mark's durability, and calls serialized in token order across threads
in racing processes. What every mark promises is the contract's
(tests/test_contract_marks.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from processes import CONTEXT
from racing import append_line, token_plan
from waiting import joined

from fencing import FileMark, Guarded, MemoryMark, StaleTokenError, guard


@pytest.fixture(params=["memory", "file"])
def make_mark(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    if request.param == "memory":
        return MemoryMark
    return lambda: FileMark(tmp_path / "mark")


def test_stale_rejection_is_logged(
    make_mark: Callable[[], Any], caplog: pytest.LogCaptureFixture
) -> None:
    """The refusal itself is the contract's (tests/test_contract_marks.py); the package's
    marks also log it on ``fencing.guard``."""
    write = guard(lambda: None, mark=make_mark(), name="ledger")
    assert isinstance(write, Guarded)
    write(34)
    with pytest.raises(StaleTokenError):
        write(33)
    assert any(
        r.name == "fencing.guard" and "ledger" in r.getMessage() and "33" in r.getMessage()
        for r in caplog.records
    )


def test_result_kwargs_and_token_positional_only(make_mark: Callable[[], Any]) -> None:
    def put(key: str, *, token: str = "") -> tuple[str, str]:
        return key, token

    guarded = guard(put, mark=make_mark())
    assert guarded(1, "k", token="x") == ("k", "x")  # fn may have its own `token`
    assert guarded.__name__ == "put" and guarded.__wrapped__ is put  # type: ignore[attr-defined]


def test_decorator_forms(tmp_path: Path) -> None:
    @guard
    def a(x: int) -> int:
        return x + 1

    shared = FileMark(tmp_path / "m")

    @guard(mark=shared, name="table")
    def b(x: int) -> int:
        return x * 2

    @guard(mark=shared)
    def c() -> str:
        return "c"

    assert a(3, 1) == 2 and b(3, 4) == 8 and c(3) == "c"
    assert isinstance(a.mark, MemoryMark) and b.name == "table" and c.name.endswith("c")
    with pytest.raises(StaleTokenError):
        c(2)  # b and c share one mark: one resource
    with pytest.raises(StaleTokenError):
        a(2, 1)


def test_bad_guard_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        guard(42)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        guard(print, mark="redis://")  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        guard(print, name=5)  # type: ignore[call-overload]
    with pytest.raises(ValueError):
        guard(print, name="")

    async def coroutine() -> None:
        pass

    with pytest.raises(TypeError, match="async"):
        guard(coroutine)
    with pytest.raises(ValueError, match="directory"):
        FileMark(tmp_path)
    with pytest.raises(TypeError):
        FileMark(3)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_file_mark_is_durable_and_shared(tmp_path: Path) -> None:
    path = tmp_path / "mark"
    guard(print, mark=FileMark(path))(9, end="")
    again = guard(lambda: None, mark=FileMark(str(path)))  # another "process" later
    assert again.mark.current == 9
    with pytest.raises(StaleTokenError):
        again(8)
    path.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="fencing record"):
        again(100)


# -- racing threads in racing processes ------------------------------------------------


def _racer(mark_path: str, log: str, worker: int, workers: int, rounds: int) -> None:
    """Threads that call one file-guarded function with climbing and replayed tokens."""

    def record(token: int) -> None:
        append_line(log, f"start {token}\n")
        append_line(log, f"end {token}\n")

    guarded = guard(record, mark=FileMark(mark_path), name="race")

    def run(thread: int) -> None:
        me = worker * 3 + thread
        for token in token_plan(me, workers * 3, rounds):
            try:
                guarded(token, token)
            except StaleTokenError as exc:
                assert exc.current is not None and exc.current > token
                append_line(log, f"stale {token}\n")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    joined(*threads)


def test_file_mark_races_threads_and_processes(tmp_path: Path) -> None:
    mark, log = tmp_path / "mark", tmp_path / "log"
    workers, rounds = 2, 40
    procs = [
        CONTEXT.Process(target=_racer, args=(str(mark), str(log), w, workers, rounds))
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(180)
        assert proc.exitcode == 0
    events = [line.split() for line in log.read_text().splitlines()]
    calls = [(kind, int(token)) for kind, token in events if kind != "stale"]
    stale = [int(token) for kind, token in events if kind == "stale"]
    assert len(calls) // 2 + len(stale) == workers * 3 * rounds
    # Calls never overlap: every start is followed by its own end.
    assert all(
        calls[i] == ("start", calls[i + 1][1]) and calls[i + 1][0] == "end"
        for i in range(0, len(calls), 2)
    )
    accepted = [token for kind, token in calls if kind == "start"]
    assert accepted == sorted(accepted), "a call ran below the high-water mark"
    highest = max(t for me in range(workers * 3) for t in token_plan(me, workers * 3, rounds))
    assert stale and FileMark(mark).current == max(accepted) == highest
