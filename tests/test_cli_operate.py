"""`fencing status`, `fencing list` and `fencing release --force` against real Redis,
SQLite and PostgreSQL: output (text and JSON), exit codes, and what force-release does
to the evicted holder (a newer token, refused at a guard)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from sqlalchemy import create_engine

import fencing
from fencing import cli
from fencing._connect import _BACKENDS, connect
from fencing.cli._operate import FAILED, NOT_HELD, OK, UNSUPPORTED, USAGE, opened, releaser
from fencing.etcd._backend import EtcdBackend
from fencing.issuer import Busy
from fencing.sql import create_tables
from fencing.sql._schema import leases
from fencing.testing.servers import PostgresServer, RedisServer
from fencing.zookeeper._backend import ZooKeeperBackend

K = TypeVar("K", bound=Hashable)

#: The keys every ``--json`` object has, with the types a script may rely on.
JSON_KEYS = {
    "name": (str,),
    "held": (bool,),
    "token": (int, type(None)),
    "expires_in": (float, int, type(None)),
    "last_token": (int, type(None)),
    "holder": (str, type(None)),
    "waiters": (int, type(None)),
}


@pytest.fixture(params=["redis", "sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The issuer URL the commands are run against (each test runs on all three)."""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        redis.Redis(port=server.port).flushall()
        return server.url
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fencing.db'}"
    postgres: PostgresServer = request.getfixturevalue("postgres_server")
    engine = create_engine(postgres.url)
    create_tables(engine)
    engine.dispose()
    return postgres.url


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """``run("status", "x", ...)``: the exit code, stdout and stderr of one command."""

    def run_command(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run_command


def unique(prefix: str) -> str:
    return f"{prefix}:{uuid.uuid4().hex[:10]}"


def check_json(line: str) -> dict[str, object]:
    """One ``--json`` object: exactly the documented keys, each of its documented type."""
    found = json.loads(line)
    assert set(found) == set(JSON_KEYS), found
    for key, kinds in JSON_KEYS.items():
        assert isinstance(found[key], kinds), (key, found)
    return dict(found)


def test_status_reports_a_held_a_free_and_an_unused_fence(url: str, run: Run) -> None:
    held, free, unused = unique("held"), unique("free"), unique("unused")
    backend = connect(url)
    token = backend.fence(held, ttl=30).acquire(timeout=0)
    other = backend.fence(free, ttl=30)
    last_free = other.acquire(timeout=0)
    other.release(last_free)

    code, out, err = run("status", "--url", url, "--json", held, free, unused)
    assert code == OK and not err
    lines = [check_json(line) for line in out.splitlines()]
    assert [line["name"] for line in lines] == [held, free, unused]  # in the order asked
    first, second, third = lines
    assert first["held"] is True and first["token"] == token == first["last_token"]
    assert isinstance(first["expires_in"], float) and 0 < first["expires_in"] <= 30
    assert isinstance(first["holder"], str) and first["holder"]
    assert second["held"] is False and second["token"] is None
    assert second["last_token"] == last_free
    assert third == {**third, "held": False, "token": None, "expires_in": None}
    assert third["last_token"] is None

    code, out, _ = run("status", "--url", url, held, unused)
    assert code == OK
    held_line, unused_line = out.splitlines()
    assert held_line.startswith(f"{held}: held by ") and f"with token {int(token)}" in held_line
    assert unused_line.startswith(f"{unused}: free") and "last token none on record" in unused_line


def test_status_of_a_semaphore_shows_each_slot(url: str, run: Run) -> None:
    """``--semaphore``: the slots on record (or 0 to N-1 with ``--permits``), each slot's
    lease, and how many are held; another semaphore whose name starts alike is not shown."""
    name = unique("render")
    backend = connect(url)
    semaphore = backend.semaphore(name, permits=3, ttl=30)
    backend.semaphore(name + "0", permits=1, ttl=30).acquire(timeout=0)
    first, second = semaphore.acquire(timeout=0), semaphore.acquire(timeout=0)
    semaphore.release(second)

    code, out, err = run("status", "--url", url, "--semaphore", name)
    assert code == OK and not err
    *slots, total = out.splitlines()
    assert total == f"{name}: 1 of 2 slots held"
    assert [line.partition(": ")[0] for line in slots] == [
        f"{name} slot {k}" for k in sorted((first.slot, second.slot))
    ]
    shown = dict(zip(sorted((first.slot, second.slot)), slots, strict=True))
    assert f"{name} slot {first.slot}: held by " in shown[first.slot]
    assert f"with token {int(first.token)}" in shown[first.slot]
    assert shown[second.slot].startswith(f"{name} slot {second.slot}: free")

    code, out, err = run("status", "--url", url, "--semaphore", "--permits", "3", "--json", name)
    assert code == OK and not err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["slot"] for line in lines] == [0, 1, 2]
    for line in lines:
        assert line["semaphore"] == name
        check_json(json.dumps({k: v for k, v in line.items() if k not in ("semaphore", "slot")}))
    assert [line["held"] for line in lines] == [k == first.slot for k in range(3)]
    assert lines[first.slot]["token"] == int(first.token)

    for bad in (["--permits", "3", name], ["--semaphore", "--lock", name]):
        code, _, err = run("status", "--url", url, *bad)
        assert code == USAGE and err
    code, _, _ = run("status", "--url", url, "--semaphore", "--permits", "0", name)
    assert code == USAGE
    semaphore.release(first)


@pytest.mark.parametrize("window", ["fixed", "sliding"])
def test_status_of_a_limiter_shows_its_use_and_reset_time(url: str, run: Run, window: str) -> None:
    """``--limiter``: the admissions that count now and when that goes down, by the
    store's clock, without admitting anything (reading twice changes nothing)."""
    name = unique("api")
    limiter = connect(url).limiter(name, limit=5, per=30, window=window)
    admitted = [limiter.attempt() for _ in range(3)]
    args = ("status", "--url", url, "--limiter", "--per", "30", "--window", window)
    for _ in range(2):
        code, out, err = run(*args, "--limit", "5", "--json", name, unique("unused"))
        assert code == OK and not err
        used, unused = (json.loads(line) for line in out.splitlines())
        assert used == {**used, "limiter": name, "window": window, "per": 30.0, "limit": 5}
        assert used["used"] == 3 and used["at"] >= admitted[-1].at
        assert 0 < used["resets_in"] <= 30 - (used["at"] - admitted[0].at) + 0.001
        assert (unused["used"], unused["resets_in"]) == (0, None)
    code, out, err = run(*args, name)
    assert code == OK and not err
    assert out.startswith(f"{name} ({window}, per 30 s): 3 used; goes down in ")
    assert limiter.use().used == 3
    assert limiter.try_acquire() and limiter.try_acquire() and not limiter.try_acquire()
    for bad in (
        ["--limiter", name],
        ["--limiter", "--per", "0", name],
        ["--limiter", "--per", "1", "--limit", "0", name],
        ["--per", "1", name],
        ["--limiter", "--semaphore", "--per", "1", name],
    ):
        code, _, err = run("status", "--url", url, *bad)
        assert code == USAGE and err, bad


def test_list_finds_the_fences_by_prefix(url: str, run: Run) -> None:
    tag = uuid.uuid4().hex[:8]
    # glob and LIKE characters are literal in a prefix (Redis SCAN MATCH, SQL LIKE)
    names = [f"job*{tag}:a", f"job*{tag}:b_%", f"job*{tag}:[c]"]
    backend = connect(url)
    for name in names:
        fence = backend.fence(name, ttl=30)
        fence.release(fence.acquire(timeout=0))
    held = backend.fence(names[0], ttl=30).acquire(timeout=0)
    backend.fence(f"jobX{tag}:other", ttl=30).acquire(timeout=0)  # "*" must not match "X"

    code, out, _ = run("list", "--url", url, "--prefix", f"job*{tag}")
    assert code == OK and sorted(out.splitlines()) == sorted(names)
    code, out, _ = run("list", "--url", url, "--prefix", f"job*{tag}:b_")
    assert code == OK and out.splitlines() == [names[1]]

    code, out, _ = run("list", "--json", "--url", url, "--prefix", f"job*{tag}")
    by_name = {line["name"]: line for line in map(check_json, out.splitlines())}
    assert set(by_name) == set(names)
    assert by_name[names[0]]["held"] is True and by_name[names[0]]["token"] == held
    assert by_name[names[1]]["held"] is False


def test_force_release_fences_the_evicted_holder_out(url: str, run: Run, tmp_path: Path) -> None:
    name = unique("stuck")
    evicted_fence = connect(url).fence(name, ttl=60)
    evicted = evicted_fence.acquire(timeout=0)
    store = fencing.FileStore(tmp_path / "resource")
    store.write(b"by the evicted holder", evicted)

    code, out, err = run("release", name, "--force", "--url", url)
    assert code == OK and not err
    assert "evicted holder" in out and f"token {int(evicted)}" in out

    newer_fence = connect(url).fence(name, ttl=60)
    newer = newer_fence.acquire(timeout=0)  # free at once: no waiting for the ttl
    assert newer > evicted
    store.write(b"by the next holder", newer)
    with pytest.raises(fencing.StaleTokenError):
        store.write(b"late write of the evicted holder", evicted)
    assert store.read() == b"by the next holder"
    with pytest.raises(fencing.LeaseLost):
        evicted_fence.renew(evicted)
    with pytest.raises(fencing.LeaseLost):
        evicted_fence.release(evicted)
    newer_fence.renew(newer)  # the evicted holder's attempts did not touch the new lease
    newer_fence.release(newer)


def test_force_release_json_and_not_held(url: str, run: Run) -> None:
    name = unique("json")
    token = connect(url).fence(name, ttl=60).acquire(timeout=0)
    code, out, _ = run("release", name, "--force", "--json", "--url", url)
    ended = check_json(out)
    assert code == OK and ended["held"] is True and ended["token"] == token

    code, out, err = run("release", name, "--force", "--url", url)
    assert code == NOT_HELD and not out and "is not held" in err and "nothing changed" in err
    code, out, _ = run("release", unique("never"), "--force", "--json", "--url", url)
    assert code == NOT_HELD and check_json(out)["held"] is False


def test_force_release_of_a_semaphore_slot_ends_that_permit_only(
    url: str, run: Run, tmp_path: Path
) -> None:
    """``--slot K``: the permit of slot K is ended, its slot's next token is above the
    evicted holder's (refused at the slot's resource), and the other slot keeps its
    holder."""
    name = unique("render")
    semaphore = connect(url).semaphore(name, permits=2, ttl=60)
    evicted, kept = semaphore.acquire(timeout=0), semaphore.acquire(timeout=0)
    lane = fencing.FileStore(tmp_path / "lane")
    lane.write(b"by the evicted holder", evicted.token)

    code, out, err = run("release", name, "--slot", "0", "--lock", "--force", "--url", url)
    assert code == USAGE and not out and "--lock" in err
    for bad in (["--slot", "-1", "--force"], ["--slot", "1024", "--force"], ["--slot", "0"]):
        code, out, err = run("release", name, *bad, "--url", url)
        assert code == USAGE and not out and "nothing changed" in err, bad
    semaphore.renew(evicted)  # the refusals changed nothing

    code, out, err = run("release", name, "--slot", str(evicted.slot), "--force", "--url", url)
    assert code == OK and not err
    assert f"slot {evicted.slot} of semaphore {name!r}" in out
    assert f"token {int(evicted.token)}" in out
    newer = semaphore.acquire(timeout=0)  # free at once: no waiting for the ttl
    assert newer.slot == evicted.slot and newer.token > evicted.token
    lane.write(b"by the next holder", newer.token)
    with pytest.raises(fencing.StaleTokenError):
        lane.write(b"late write of the evicted holder", evicted.token)
    with pytest.raises(fencing.LeaseLost):
        semaphore.release(evicted)
    semaphore.renew(kept)  # the other slot's holder was not touched

    code, out, _ = run("release", name, "--slot", str(kept.slot), "--force", "--json", "--url", url)
    ended = json.loads(out)
    assert code == OK and ended["semaphore"] == name and ended["slot"] == kept.slot
    assert ended["held"] is True and ended["token"] == kept.token
    check_json(json.dumps({k: v for k, v in ended.items() if k not in ("semaphore", "slot")}))
    code, out, err = run("release", name, "--slot", str(kept.slot), "--force", "--url", url)
    assert code == NOT_HELD and not out and "is not held" in err
    semaphore.release(newer)


def test_release_without_force_changes_nothing(url: str, run: Run) -> None:
    name = unique("kept")
    fence = connect(url).fence(name, ttl=60)
    token = fence.acquire(timeout=0)
    code, out, err = run("release", name, "--url", url)
    assert code == USAGE and not out
    assert err.startswith("fencing release: refusing") and "--force" in err
    fence.renew(token)  # still held by its holder
    fence.release(token)


def test_force_release_raises_a_lost_redis_counter_above_the_evicted_token(
    redis_server: RedisServer, run: Run
) -> None:
    """A lease can outlive its counter key (``counter_idle``): the next token must still
    be above the evicted one, whatever the server clock says."""
    client = redis.Redis(port=redis_server.port)
    name = unique("counterless")
    issuer = fencing.RedisIssuer(client)
    future = int(time.time() * 1e6) + 10**12  # a token far above the clock floor
    client.set(f"fencing:{{{name}}}:lease", f"{future}:someone", px=60_000)
    assert client.get(f"fencing:{{{name}}}:counter") is None
    code, _, _ = run("release", name, "--force", "--url", redis_server.url)
    assert code == OK
    token = issuer.try_acquire(name, "next", 60_000)
    assert isinstance(token, int) and token == future + 1


def test_redis_status_counts_queued_waiters_and_they_take_a_force_released_lease(
    redis_server: RedisServer, run: Run
) -> None:
    name = unique("queue")
    backend = connect(redis_server.url)
    evicted = backend.fence(name, ttl=60).acquire(timeout=0)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(backend.fence(name).acquire(60)))
    waiter.start()
    deadline = time.monotonic() + 30
    while True:  # until the waiter has queued (its first attempt)
        _, out, _ = run("status", "--json", "--url", redis_server.url, name)
        if check_json(out)["waiters"] == 1:
            break
        assert time.monotonic() < deadline, "the waiter never showed up in the queue"
        time.sleep(0.01)
    assert run("release", name, "--force", "--url", redis_server.url)[0] == OK
    waiter.join(60)
    assert got and got[0] > evicted


def test_bad_names_and_urls_are_usage_errors(url: str, run: Run) -> None:
    code, out, err = run("status", "--url", url, "ok", "")
    assert code == USAGE and not out and "must not be empty" in err
    code, _, err = run("release", "x" * 300, "--force", "--url", url)
    assert code == USAGE and "256" in err
    code, _, err = run("list", "--url", "mssql://u@h/db")
    assert code == USAGE and "unknown fencing URL scheme" in err


def test_an_unreachable_backend_exits_1_without_a_traceback(run: Run) -> None:
    from fencing.testing.servers import free_port

    code, out, err = run("status", "x", "--url", f"redis://:secret@127.0.0.1:{free_port()}/0")
    assert code == FAILED and not out
    assert err.startswith("fencing status: FenceUnavailable:") and "Traceback" not in err


class PlainIssuer:
    """An issuer with the three required calls only: it cannot be inspected."""

    def __init__(self) -> None:
        self._memory = fencing.MemoryIssuer()

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self._memory.try_acquire(name, holder, ttl_ms)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self._memory.renew(name, token, holder, ttl_ms)

    def release(self, name: str, token: int, holder: str) -> bool:
        return self._memory.release(name, token, holder)


class PlainBackend:
    """A ``connect`` backend (for the scheme ``plain://``) whose issuer has no capability."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.issuer = PlainIssuer()


def test_an_issuer_without_the_capability_exits_4(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(_BACKENDS, "plain", (__name__, "PlainBackend"))
    for args in (["status", "x"], ["list"], ["release", "x", "--force"]):
        code, out, err = run(*args, "--url", "plain://here")
        assert code == UNSUPPORTED and not out and "cannot" in err


def test_the_default_url_is_fencing_url(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    name = unique("env")
    token = connect(redis_server.url).fence(name, ttl=30).acquire(timeout=0)
    monkeypatch.setenv("FENCING_URL", redis_server.url)
    code, out, _ = run("status", "--json", name)
    assert code == OK and check_json(out)["token"] == token


def test_the_embedded_default_needs_no_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    monkeypatch.delenv("FENCING_URL", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "fresh-state"))
    code, out, _ = run("status", "--json", "first")
    assert code == OK and check_json(out)["held"] is False


@pytest.mark.parametrize("command", ["status", "list", "release"])
def test_help_shows_examples_and_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    help_text = capsys.readouterr().out
    assert done.value.code == 0
    assert f"fencing {command}" in help_text and "exit codes: 0" in help_text


def test_the_installed_command_prints_json_and_exits_with_the_documented_codes(
    redis_server: RedisServer,
) -> None:
    name = unique("proc")
    token = connect(redis_server.url).fence(name, ttl=30).acquire(timeout=0)
    env = {**os.environ, "FENCING_URL": redis_server.url}

    def fencing_command(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "fencing", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)

    status = fencing_command("status", "--json", name)
    assert status.returncode == OK and check_json(status.stdout)["token"] == token
    assert fencing_command("release", name).returncode == USAGE
    assert fencing_command("release", name, "--force").returncode == OK
    assert fencing_command("release", name, "--force").returncode == NOT_HELD


def race_force_release(
    new_holder: Callable[[], Callable[[], tuple[int, K | None]]],
    force_release: Callable[[], K | None],
) -> None:
    """Three holders (each from ``new_holder()``) take, use and give back a lease, round
    after round, while another thread force-releases it, until it has ended 4 (or a
    minute has passed): every lease it reports ended is one whose holder then finds it
    lost, and no other. The holders go on until the evictor is done, so how many rounds
    it takes to find the lease held four times does not matter.

    A holder's round returns its fence token and, if giving the lease back found it lost,
    what identifies that lease; ``force_release`` returns what identifies the lease it
    ended, ``None`` if none was live."""
    lost: list[K] = []  # leases whose holder found them lost
    evicted: list[K] = []  # leases force_release reported ending
    tokens: list[int] = []
    evictor_done = threading.Event()

    def worker() -> None:
        take_and_give_back = new_holder()
        while not evictor_done.is_set():
            token, lost_lease = take_and_give_back()
            tokens.append(token)
            if lost_lease is not None:
                lost.append(lost_lease)

    def evictor() -> None:
        deadline = time.monotonic() + 60
        try:
            while len(evicted) < 4 and time.monotonic() < deadline:
                ended = force_release()
                if ended is not None:
                    evicted.append(ended)
        finally:
            evictor_done.set()

    threads = [threading.Thread(target=worker) for _ in range(3)]
    evicting = threading.Thread(target=evictor)
    for thread in [*threads, evicting]:
        thread.start()
    for thread in [evicting, *threads]:
        thread.join(120)
        assert not thread.is_alive()
    assert len(evicted) == 4, f"the evictor found the lease held {len(evicted)} times in 60 s"
    assert Counter(lost) == Counter(evicted)
    assert len(set(tokens)) == len(tokens) >= 4


def test_force_release_racing_holders_ends_exactly_the_lease_it_reports(
    url: str, tmp_path: Path
) -> None:
    """Fences take, use and release the lease while another thread force-releases it:
    the tokens it reports ended are those whose release raised ``LeaseLost``."""
    name = unique("racing")
    backend = connect(url)
    store = fencing.FileStore(tmp_path / "resource")

    def new_holder() -> Callable[[], tuple[int, int | None]]:
        fence = backend.fence(name, ttl=60)  # no lease expires during the test

        def take_and_give_back() -> tuple[int, int | None]:
            token = fence.acquire(timeout=60)
            time.sleep(0.01)  # held a while, so the evictor finds it held (SQLite is quick)
            with contextlib.suppress(fencing.StaleTokenError):
                store.write(b"x", token)
            try:
                fence.release(token)
            except fencing.LeaseLost:
                return int(token), int(token)
            return int(token), None

        return take_and_give_back

    with opened(argparse.Namespace(url=url)) as operated:
        issuer = releaser(operated)
        race_force_release(new_holder, lambda: issuer.force_release(name).token)


def connections_to(url: str) -> int:
    """How many TCP connections this process has open to the servers of ``url`` (its
    ``host:port`` parts): the sockets among its file descriptors whose remote end is one
    of those ports, found in /proc."""
    ports = {int(port) for port in re.findall(r":(\d+)", url.partition("://")[2])}
    ours = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # closed since listed
            target = os.readlink(fd)
            if target.startswith("socket:["):
                ours.add(target[len("socket:[") : -1])
    found = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rpartition(":")[2], 16)
            found += remote_port in ports and fields[3] == "01" and fields[9] in ours  # ESTABLISHED
    return found


@pytest.mark.parametrize("server", ["zookeeper_server", "etcd_cluster"])
def test_the_commands_close_the_backend_they_open(
    server: str, request: pytest.FixtureRequest, run: Run
) -> None:
    """``status``, ``list`` and ``release --force`` on ZooKeeper and etcd leave no session
    or channel behind: no connection to the servers beyond those of the test's own
    holder, and nothing on stderr. (A kazoo client left open goes on reconnecting, and
    says "Connection dropped" on stderr, once its servers go away.)"""
    url = request.getfixturevalue(server).url
    name = unique("closed")
    holder = connect(url)
    assert isinstance(holder, (EtcdBackend, ZooKeeperBackend))
    try:
        token = holder.fence(name, ttl=30).acquire(timeout=0)
        before = connections_to(url)
        assert before > 0  # the holder's: the count sees this process's connections
        code, out, err = run("status", "--json", "--url", url, name)
        assert code == OK and check_json(out)["token"] == token and not err
        assert connections_to(url) == before
        code, out, err = run("list", "--url", url, "--prefix", name)
        assert code == OK and out.split() == [name] and not err
        assert connections_to(url) == before
        code, out, err = run("release", name, "--force", "--url", url)
        assert code == OK and "evicted holder" in out and not err
        assert connections_to(url) == before
    finally:
        holder.close()


def test_a_reader_that_stops_reading_ends_the_output_quietly(tmp_path: Path) -> None:
    """``fencing list | head -1``: no ``BrokenPipeError`` traceback, exit 0."""
    url = f"sqlite:///{tmp_path / 'many.db'}"
    issuer = fencing.SqlIssuer(url)
    issuer.try_acquire("first", "h", 60_000)  # creates the table
    with issuer.engine.begin() as conn:  # many fences, more output than a pipe buffers
        conn.execute(leases.insert(), [{"name": f"n{i:06d}", "token": 1} for i in range(20_000)])
    command = [sys.executable, "-m", "fencing", "list", "--json", "--url", url]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert check_json(proc.stdout.readline().decode())["name"] == "first"
        proc.stdout.close()  # like `head -1`
        err = proc.stderr.read().decode()
        assert proc.wait(60) == OK, err
    assert err == ""


def test_a_redis_lease_without_expiry_is_shown_and_force_released(
    redis_server: RedisServer, run: Run
) -> None:
    """The stuck lease force-release exists for: no expiry (ttl 0, as a ``FencedLock``
    with ``timeout=None`` takes it), so only an operator can end it."""
    name = unique("forever")
    issuer = fencing.RedisIssuer(redis.Redis(port=redis_server.port))
    token = issuer.try_acquire(name, "stuck-holder", 0)
    assert isinstance(token, int)
    code, out, _ = run("status", "--url", redis_server.url, name)
    assert code == OK and f"held by stuck-holder with token {token}, no expiry" in out
    code, out, _ = run("status", "--json", "--url", redis_server.url, name)
    assert check_json(out)["expires_in"] is None
    assert run("release", name, "--force", "--url", redis_server.url)[0] == OK
    assert not issuer.release(name, token, "stuck-holder")  # its holder no longer has it
    newer = issuer.try_acquire(name, "next", 60_000)
    assert isinstance(newer, int) and newer > token


# -- locks kept as redis-py's Lock keeps them: `--lock` ------------------------------------


def fenced_lock(client: redis.Redis, name: str, **kwargs: object) -> fencing.FencedLock:
    made = client.lock(name, lock_class=fencing.FencedLock, **kwargs)  # type: ignore[arg-type]
    assert isinstance(made, fencing.FencedLock)
    return made


def lock_token(lock: redis.lock.Lock) -> str:
    """The lock token of ``lock``'s acquisition, as ``fencing status --lock`` shows it."""
    token = lock.local.token
    assert isinstance(token, bytes)
    return token.decode()


def test_lock_status_of_a_held_a_free_and_an_unused_fenced_lock(
    redis_server: RedisServer, redis_client: redis.Redis, run: Run
) -> None:
    url = redis_server.url
    held, free, unused = unique("held"), unique("free"), unique("unused")
    holder = fenced_lock(redis_client, held, timeout=30)
    assert holder.acquire(blocking=False) and holder.fence_token is not None
    other = fenced_lock(redis_client, free, timeout=30)
    assert other.acquire(blocking=False) and other.fence_token is not None
    last_free = int(other.fence_token)
    other.release()

    code, out, err = run("status", "--lock", "--json", "--url", url, held, free, unused)
    assert code == OK and not err
    first, second, third = map(check_json, out.splitlines())
    assert first == {
        **first,
        "name": held,
        "held": True,
        "holder": lock_token(holder),  # what `redis-cli GET <name>` shows
        "token": None,  # not stored with the lock: see OperatesLocks
        "last_token": holder.fence_token,
        "waiters": 0,
    }
    assert isinstance(first["expires_in"], float) and 0 < first["expires_in"] <= 30
    free_status = {"holder": None, "token": None, "expires_in": None, "waiters": 0}
    assert second == {"name": free, "held": False, "last_token": last_free, **free_status}
    assert third == {"name": unused, "held": False, "last_token": None, **free_status}

    code, out, _ = run("status", "--lock", "--url", url, held)
    assert code == OK and out.startswith(f"{held}: held by {lock_token(holder)}, ")
    assert out.endswith(f"s left; 0 waiting; last token {int(holder.fence_token)}\n")
    assert "with token" not in out
    # without --lock the name is a fence, whose lease is another key: free
    code, out, _ = run("status", "--json", "--url", url, held)
    assert code == OK and check_json(out)["held"] is False
    holder.release()


def test_lock_status_counts_waiters_who_take_a_force_released_lock(
    redis_server: RedisServer, redis_client: redis.Redis, run: Run
) -> None:
    """A blocked ``FencedLock`` queues for a hand-off: status counts it; a force-release
    does not hand the lock over, the waiter takes it at its next attempt (its ``sleep``)
    with a token above the evicted one."""
    url, name = redis_server.url, unique("queued")
    evicted = fenced_lock(redis_client, name, timeout=60, thread_local=False)
    assert evicted.acquire(blocking=False) and evicted.fence_token is not None
    waiter = fenced_lock(redis_client, name, timeout=60, sleep=0.05, thread_local=False)
    thread = threading.Thread(target=lambda: waiter.acquire(blocking_timeout=60))
    thread.start()
    deadline = time.monotonic() + 30
    while True:  # until the waiter has queued (its first attempt)
        code, out, _ = run("status", "--lock", "--json", "--url", url, name)
        if check_json(out)["waiters"] == 1:
            break
        assert time.monotonic() < deadline, "the waiter never showed up in the queue"
        time.sleep(0.01)
    assert code == OK and check_json(out)["holder"] == lock_token(evicted)

    assert run("release", "--lock", name, "--force", "--url", url)[0] == OK
    thread.join(60)
    assert waiter.owned() and waiter.fence_token is not None
    assert waiter.fence_token > evicted.fence_token
    status = check_json(run("status", "--lock", "--json", "--url", url, name)[1])
    assert status["holder"] == lock_token(waiter) and status["waiters"] == 0
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        evicted.release()
    waiter.release()  # the evicted holder's release did not touch the waiter's lock


def test_force_release_of_a_fenced_lock_fences_the_evicted_holder_out(
    redis_server: RedisServer, redis_client: redis.Redis, run: Run, tmp_path: Path
) -> None:
    url, name = redis_server.url, unique("stuck")
    # no expiry: the stuck lock only an operator can end
    evicted = fenced_lock(redis_client, name, timeout=None, thread_local=False)
    assert evicted.acquire(blocking=False) and evicted.fence_token is not None
    old = evicted.fence_token
    store = fencing.FileStore(tmp_path / "resource")
    store.write(b"by the evicted holder", old)
    log: list[bytes] = []
    append = fencing.guard(log.append, mark=fencing.MemoryMark())
    append(old, b"evicted")

    code, out, err = run("release", "--lock", name, "--force", "--url", url)
    assert code == OK and not err
    assert f"released lock {name!r}" in out and f"evicted holder {lock_token(evicted)}" in out
    assert f"the next token will be above {int(old)}," in out  # the counter: old's grant
    assert redis_client.get(name) is None

    newer = fenced_lock(redis.Redis(port=redis_server.port), name, timeout=30)
    assert newer.acquire(blocking=False)  # free at once
    assert newer.fence_token is not None and newer.fence_token > old
    store.write(b"by the next holder", newer.fence_token)
    append(newer.fence_token, b"next")
    with pytest.raises(fencing.StaleTokenError):
        store.write(b"late write of the evicted holder", old)
    with pytest.raises(fencing.StaleTokenError):
        append(old, b"late")
    assert store.read() == b"by the next holder" and log == [b"evicted", b"next"]
    assert not evicted.owned()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        evicted.release()
    assert newer.owned()  # the evicted holder's attempts did not touch the new lock
    newer.release()


def test_force_release_of_a_lock_whose_counter_is_gone_writes_the_clock_floor(
    redis_server: RedisServer, redis_client: redis.Redis, run: Run
) -> None:
    """A lock with no expiry outlives its counter (``counter_idle``): the force-release
    sets the counter to the server clock, above the evicted token, and says so."""
    name = unique("counterless")
    counter = f"fencing:{{{name}}}:counter"
    evicted = fenced_lock(redis_client, name, timeout=None, thread_local=False)
    assert evicted.acquire(blocking=False) and evicted.fence_token is not None
    assert redis_client.delete(counter) == 1  # as if it had expired

    code, out, _ = run("release", "--lock", name, "--force", "--json", "--url", redis_server.url)
    ended = check_json(out)
    assert code == OK and ended["held"] is True and ended["holder"] == lock_token(evicted)
    floor = ended["last_token"]
    assert isinstance(floor, int) and floor > evicted.fence_token
    assert redis_client.get(counter) == b"%d" % floor  # kept, even if the clock steps back
    assert 0 < redis_client.pttl(counter) <= 7 * 24 * 3600 * 1000  # counter_idle, as grants
    newer = fenced_lock(redis_client, name, timeout=30)
    assert newer.acquire(blocking=False) and newer.fence_token is not None
    assert newer.fence_token > floor
    newer.release()


def test_a_plain_redis_py_lock_is_shown_and_force_released(
    redis_server: RedisServer, redis_client: redis.Redis, run: Run
) -> None:
    """An old ``redis.lock.Lock`` (a rolling migration): no token, no counter, no expiry."""
    url, name = redis_server.url, unique("plain")
    plain = redis_client.lock(name, timeout=None)
    assert plain.acquire(blocking=False)
    code, out, _ = run("status", "--lock", "--json", "--url", url, name)
    assert code == OK
    assert check_json(out) == {
        "name": name,
        "held": True,
        "holder": lock_token(plain),
        "token": None,
        "expires_in": None,
        "last_token": None,
        "waiters": 0,
    }
    code, out, _ = run("status", "--lock", "--url", url, name)
    shown = f"{name}: held by {lock_token(plain)}, no expiry; 0 waiting; last token none"
    assert code == OK and out == shown + " on record\n"

    code, out, _ = run("release", "--lock", name, "--force", "--json", "--url", url)
    ended = check_json(out)
    assert code == OK and ended["holder"] == lock_token(plain) and ended["held"] is True
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        plain.release()
    newer = fenced_lock(redis_client, name, timeout=30)
    assert newer.acquire(blocking=False) and newer.fence_token is not None
    assert isinstance(ended["last_token"], int) and newer.fence_token > ended["last_token"]
    newer.release()


def test_lock_exit_codes_and_refusals(
    redis_server: RedisServer, redis_client: redis.Redis, run: Run, tmp_path: Path
) -> None:
    url, name = redis_server.url, unique("kept")
    holder = fenced_lock(redis_client, name, timeout=60, thread_local=False)
    assert holder.acquire(blocking=False)
    code, out, err = run("release", "--lock", name, "--url", url)
    assert code == USAGE and not out and "without --force" in err
    assert holder.owned()
    holder.release()
    code, out, err = run("release", "--lock", name, "--force", "--url", url)
    assert code == NOT_HELD and not out and "is not held" in err and "nothing changed" in err
    code, out, _ = run("release", "--lock", name, "--force", "--json", "--url", url)
    assert code == NOT_HELD and check_json(out)["held"] is False

    # a key of the application's is no lock: refused, left as it was, no counter made
    data = unique("data")
    redis_client.hset(data, "field", "value")
    for command in (["status", "--lock", data], ["release", "--lock", data, "--force"]):
        code, out, err = run(*command, "--url", url)
        assert code == USAGE and not out
        assert f"{data!r} is not a lock: its key holds a hash" in err and "Traceback" not in err
    assert redis_client.hgetall(data) == {b"field": b"value"}
    assert redis_client.exists(f"fencing:{{{data}}}:counter") == 0

    sqlite = f"sqlite:///{tmp_path / 'fencing.db'}"
    for command in (["status", "--lock", "x"], ["release", "--lock", "x", "--force"]):
        code, out, err = run(*command, "--url", sqlite)
        assert code == UNSUPPORTED and not out and "keeps no locks for --lock" in err
    code, _, err = run("status", "--lock", "", "--url", url)
    assert code == USAGE and "must not be empty" in err


@pytest.mark.parametrize("command", ["status", "release"])
def test_help_shows_the_lock_option(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    help_text = capsys.readouterr().out
    assert f"fencing {command} --lock" in help_text and "redis.lock.Lock" in help_text


def test_force_release_of_a_lock_racing_holders_ends_exactly_the_locks_it_reports(
    redis_server: RedisServer,
) -> None:
    """``FencedLock`` holders take and release the lock while another thread
    force-releases it: the lock tokens it reports ended are those whose release raised
    ``LockNotOwnedError``."""
    client = redis.Redis(port=redis_server.port)
    name = unique("racing")
    issuer = fencing.RedisIssuer(client)

    def new_holder() -> Callable[[], tuple[int, str | None]]:
        lock = fenced_lock(client, name, timeout=60, thread_local=False)

        def take_and_give_back() -> tuple[int, str | None]:
            assert lock.acquire(blocking_timeout=60) and lock.fence_token is not None
            token, held = int(lock.fence_token), lock_token(lock)
            try:
                lock.release()
            except redis.exceptions.LockNotOwnedError:
                return token, held
            return token, None

        return take_and_give_back

    def force_release() -> str | None:
        ended = issuer.force_release_lock(name)
        if not ended.held:
            return None
        assert ended.holder is not None and ended.token is None
        return ended.holder

    race_force_release(new_holder, force_release)
