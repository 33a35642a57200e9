"""`fencing status --rwlock` and `fencing release --rwlock --force` against real Redis,
SQLite and PostgreSQL: the writer, or the readers and their epoch, in text and JSON; a
waiting writer; what force-release does to the evicted holders (a newer token, refused
at a guard; their renew and release fail); exit codes. The
fixtures ``url`` (each test on Redis, SQLite and PostgreSQL) and ``run`` are the other
operators' commands' tests' (test_cli_operate), taken as arguments (so F811 is off)."""

# ruff: noqa: F811

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_operate import Run, run, unique, url  # noqa: F401 (the fixtures)

import fencing
from fencing import ReadToken, cli
from fencing._connect import _BACKENDS, Backend, connect
from fencing.cli._operate import NOT_HELD, OK, UNSUPPORTED, USAGE
from fencing.cli._operate import _Closes as Closes

#: The keys every ``--rwlock --json`` object has, with their types.
RW_JSON_KEYS = {
    "name": (str,),
    "held": (bool,),
    "mode": (str, type(None)),
    "token": (int, type(None)),
    "holders": (dict,),
    "waiting": (str, type(None)),
    "last_token": (int, type(None)),
}

#: Seconds a test waits for a condition at most (a limit, not a timing).
PATIENCE = 30.0

pytestmark = pytest.mark.timeout(120)


def check_json(line: str) -> dict[str, Any]:
    """One ``--rwlock --json`` object: exactly the documented keys, each of its type."""
    found = json.loads(line)
    assert set(found) == set(RW_JSON_KEYS), found
    for key, kinds in RW_JSON_KEYS.items():
        assert isinstance(found[key], kinds), (key, found)
    return dict(found)


def command(name: str, url: str, *args: str) -> str:
    """The stdout of ``fencing NAME --rwlock --url URL ARGS...`` run in a new process."""
    argv = [sys.executable, "-m", "fencing", name, "--rwlock", "--url", url, *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PATIENCE, check=True)
    return done.stdout


def status_of(run: Run, url: str, name: str) -> dict[str, Any]:
    code, out, err = run("status", "--rwlock", "--json", "--url", url, name)
    assert code == OK and not err, err
    return check_json(out)


@pytest.fixture
def backend(url: str) -> Iterator[Backend]:
    """The backend of ``url``, closed at the test's end."""
    backend = connect(url)
    yield backend
    if isinstance(backend, Closes):
        backend.close()


def test_status_shows_the_readers_and_their_epoch_a_waiting_writer_then_the_writer(
    url: str, run: Run, backend: Backend
) -> None:
    name, unused = unique("catalog"), unique("unused")
    first, second = backend.rwlock(name, ttl=60), backend.rwlock(name, ttl=60)
    epoch, also = first.read.acquire(timeout=0), second.read.acquire(timeout=0)
    assert isinstance(epoch, ReadToken) and isinstance(also, ReadToken)

    code, out, err = run("status", "--rwlock", "--url", url, name, unused)
    assert code == OK and not err
    held, free = out.splitlines()
    assert held.startswith(f"{name}: read by 2 readers with epoch {int(epoch)}: "), held
    assert epoch.lease in held and also.lease in held
    assert free == f"{unused}: free; last token none on record"
    shown = status_of(run, url, name)
    assert shown["mode"] == "read" and shown["token"] == epoch
    assert set(shown["holders"]) == {epoch.lease, also.lease}
    assert all(0 < left <= 60 for left in shown["holders"].values())

    writer = backend.rwlock(name, ttl=60).write
    written: list[int] = []
    waiting = threading.Thread(target=lambda: written.append(writer.acquire(timeout=PATIENCE)))
    waiting.start()
    try:  # the command in a process of its own: in this one, its closing the backend's
        # pool at its end would cut the connection the waiting writer is using
        deadline = time.monotonic() + PATIENCE
        while "waiting (no new reader enters)" not in (out := command("status", url, name)):
            assert time.monotonic() < deadline, f"the writer never showed as waiting: {out}"
            time.sleep(0.05)
    finally:
        first.read.release(epoch)
        second.read.release(also)
        waiting.join(PATIENCE)
    assert written and written[0] > epoch, written
    shown = status_of(run, url, name)
    assert (shown["held"], shown["mode"], shown["token"]) == (True, "write", written[0])
    assert len(shown["holders"]) == 1 and shown["waiting"] is None
    code, out, _ = run("status", "--rwlock", "--url", url, name)
    assert out.startswith(f"{name}: written by ") and f"with token {int(written[0])};" in out
    writer.release(written[0])
    assert status_of(run, url, name)["held"] is False


def test_force_release_fences_the_evicted_readers_and_writer_out(
    url: str, run: Run, backend: Backend, tmp_path: Path
) -> None:
    name = unique("catalog")
    readers, late = backend.rwlock(name, ttl=60), backend.rwlock(name, ttl=60)
    epoch, also = readers.read.acquire(timeout=0), readers.read.acquire(timeout=0)
    assert isinstance(epoch, ReadToken) and isinstance(also, ReadToken)
    store = fencing.FileStore(tmp_path / "catalog")
    store.claim(epoch)  # the readers claim before they read

    for refused in (["--force", "--lock"], ["--force", "--slot", "0"], []):
        code, out, err = run("release", "--rwlock", name, *refused, "--url", url)
        assert code == USAGE and not out and "nothing changed" in err, refused
    readers.read.renew(epoch)  # the refusals changed nothing

    code, out, err = run("release", "--rwlock", name, "--force", "--url", url)
    assert code == OK and not err
    assert f"evicted 2 readers {', '.join(sorted([epoch.lease, also.lease]))}" in out
    assert f"(epoch {int(epoch)})" in out
    with pytest.raises(fencing.LeaseLost):
        readers.read.renew(epoch)
    with pytest.raises(fencing.LeaseLost):
        readers.read.release(also)
    write = late.write.acquire(timeout=0)  # free at once: no waiting for the ttl
    assert write > epoch
    store.write(b"rewritten", write)

    code, out, err = run("release", "--rwlock", name, "--force", "--json", "--url", url)
    ended = check_json(out)
    assert code == OK and not err
    assert (ended["held"], ended["mode"], ended["token"]) == (True, "write", write)
    with pytest.raises(fencing.LeaseLost):
        late.write.renew(write)
    after = readers.read.acquire(timeout=0)
    assert after > write
    store.claim(after)  # the next epoch's reader claims
    with pytest.raises(fencing.StaleTokenError):
        store.write(b"late write of the evicted writer", write)
    with pytest.raises(fencing.StaleTokenError):
        store.write(b"late write of an evicted reader", epoch)
    readers.read.release(after)

    code, out, err = run("release", "--rwlock", name, "--force", "--url", url)
    assert code == NOT_HELD and not out and "is not held" in err


def test_an_issuer_without_read_write_locks_exits_4(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(_BACKENDS, "plain", ("test_cli_operate", "PlainBackend"))
    for args in (["status", "--rwlock", "x"], ["release", "--rwlock", "x", "--force"]):
        code, out, err = run(*args, "--url", "plain://here")
        assert code == UNSUPPORTED and not out and "read-write locks" in err


@pytest.mark.parametrize("command", ["status", "release"])
def test_help_shows_the_rwlock_option(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    assert "--rwlock" in capsys.readouterr().out
