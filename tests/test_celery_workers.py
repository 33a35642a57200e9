"""``fencing.celery.FencedTask`` on real Celery workers (issue 24): a Redis broker and
two prefork workers (``--concurrency=1``, ``acks_late``), separate processes started
once for the module; nothing eager.

The redelivery scenario, fenced and plain (the control): a deposit starts on one
worker and is frozen there (SIGSTOP) past its lease's ttl and the broker's visibility
timeout; the broker gives the message to the other worker, which runs it to the end;
then the frozen worker is resumed and finishes its run too. Fenced, its write is
refused (its token is older): the deposit is applied once. Plain, it is applied twice.
A run whose process is SIGKILLed is delivered again and applied once.

The same redelivery with a Django ``FencedModel`` row (the workers set Django up on a
SQLite file shared with the test, which reads it with ``sqlite3``): the task claims and
reads the row (``fenced_get``), works, and writes the deposit back with its token; the
frozen run's write is refused, and the plain task's control deposits twice.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from celery import Celery
from celery.result import AsyncResult
from waiting import PATIENCE, wait_until

from fencing import FileStore
from fencing.testing.servers import RedisServer

pytestmark = pytest.mark.xdist_group("celery")  # the workers start once, on one xdist worker

TESTS = Path(__file__).resolve().parent


class Workers:
    """The broker and the workers of this module, and what the tests read from them."""

    def __init__(self, work: Path, app: Celery, procs: list[subprocess.Popen[bytes]]) -> None:
        self.work = work
        self.app = app
        self.procs = procs

    def result(self, task_id: str) -> dict[str, Any]:
        """The task's result, once it has one."""
        value: dict[str, Any] = AsyncResult(task_id, app=self.app).get(timeout=PATIENCE)
        return value

    def lines(self, account: str) -> list[str]:
        path = self.work / f"{account}.log"
        return path.read_text().splitlines() if path.exists() else []

    def paused(self, account: str) -> tuple[int, str] | None:
        """(pid, token) of the attempt that paused at the slow step, once it has."""
        try:
            pid, token = (self.work / f"{account}.paused").read_text().split()
        except (FileNotFoundError, ValueError):  # not yet, or being written
            return None
        return int(pid), token


def start_worker(
    name: str, work: Path, env: dict[str, str], out: IO[bytes]
) -> subprocess.Popen[bytes]:
    """``celery worker`` in its own process group (its pool child goes with it)."""
    command = [
        *(sys.executable, "-m", "celery", "-A", "celery_app", "worker"),
        *("--pool=prefork", "--concurrency=1", "--prefetch-multiplier=1"),
        *("--without-gossip", "--without-mingle", "--without-heartbeat"),
        *("--loglevel=WARNING", f"--hostname={name}@%h"),
    ]
    return subprocess.Popen(
        command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    work = tmp_path_factory.mktemp("celery")
    server = RedisServer().start()
    broker = server.url.rsplit("/", 1)[0] + "/1"
    settings = {"FENCING_TEST_BROKER": broker, "FENCING_TEST_WORK": str(work)}
    env = {
        **os.environ,
        **settings,
        "FENCING_URL": server.url,
        "DJANGO_SETTINGS_MODULE": "django_app.settings",
        "FENCING_TEST_DJANGO_DB": str(work / "django.db"),
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    procs: list[subprocess.Popen[bytes]] = []
    make_django_tables(work, env)
    try:
        for name in ("a", "b"):
            with open(work / f"{name}.out", "wb") as out:  # the worker keeps its own copy
                procs.append(start_worker(name, work, env, out))
        with pytest.MonkeyPatch.context() as patch:  # celery_app reads them at import
            for key, value in settings.items():
                patch.setenv(key, value)
            app = importlib.reload(importlib.import_module("celery_app")).app
        try:
            wait_until(lambda: len(app.control.ping(timeout=0.5) or []) == 2, "both workers up")
            yield Workers(work, app, procs)
        finally:
            app.close()
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(PATIENCE)
        server.close()


def make_django_tables(work: Path, env: dict[str, str]) -> None:
    """The test app's table in the workers' SQLite file, made by Django's schema editor in
    a process of its own (this one may have Django configured otherwise, by
    tests/test_django.py)."""
    script = (
        "import django; django.setup()\n"
        "from django.db import connection\n"
        "from django_app.models import Account\n"
        "with connection.schema_editor() as editor: editor.create_model(Account)\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=work, env=env, check=True, timeout=PATIENCE)


def django_row(workers: Workers) -> int:
    """A new ``Account`` row, balance 0, fence token 0, whose first deposit pauses at its
    slow step; its pk."""
    with sqlite3.connect(workers.work / "django.db") as db:
        pk = db.execute(
            "INSERT INTO django_app_account (fence_token, name, balance, note) "
            "VALUES (0, 'e2e', 0, '')"
        ).lastrowid
    assert pk is not None
    (workers.work / f"row{pk}.pause").touch()
    return pk


def django_stored(workers: Workers, pk: int) -> tuple[int, int]:
    """(balance, fence_token) of the row, as the database has it."""
    with sqlite3.connect(workers.work / "django.db") as db:
        balance, token = db.execute(
            "SELECT balance, fence_token FROM django_app_account WHERE id = ?", (pk,)
        ).fetchone()
    return int(balance), int(token)


def open_account(workers: Workers, account: str, *, fenced: bool) -> None:
    """A balance of 0 (a ``FileStore`` if ``fenced``, else a plain file) whose first
    deposit pauses at its slow step."""
    path = workers.work / f"{account}.json"
    data = json.dumps({"balance": 0}).encode()
    if fenced:
        FileStore(path).write(data, 0)
    else:
        path.write_bytes(data)
    (workers.work / f"{account}.pause").touch()


def freeze_first_attempt(workers: Workers, account: str, task: AsyncResult) -> int:
    """Wait for the first attempt to reach its slow step, SIGSTOP the process running
    it, open the gate for the attempt that follows; return the frozen pid."""

    def started() -> bool:
        if task.ready():  # failed before its slow step: say why now
            raise AssertionError(f"{account}: the task ended early: {task.result!r}")
        return workers.paused(account) is not None

    wait_until(started, f"{account}: an attempt paused")
    pid, _token = workers.paused(account) or (0, "")
    os.kill(pid, signal.SIGSTOP)
    (workers.work / f"{account}.gate").touch()
    return pid


def test_frozen_attempt_is_refused_after_redelivery(workers: Workers) -> None:
    import celery_app

    account = "fenced"
    open_account(workers, account, fenced=True)
    task = celery_app.fenced_deposit.delay(account, 10)
    frozen = freeze_first_attempt(workers, account, task)
    _, first = workers.paused(account) or (0, "")
    try:
        # the broker redelivers after the visibility timeout; the other worker runs it
        done = workers.result(task.id)
        assert done["pid"] != frozen
        assert done["token"] > int(first)
        assert done["balance"] == 10
    finally:
        os.kill(frozen, signal.SIGCONT)
    # the frozen attempt resumes, reads the new balance, writes with its old token
    wait_until(lambda: len(workers.lines(account)) == 2, "the frozen attempt finished")
    assert workers.lines(account) == [f"applied {done['token']}", f"refused {first}"]
    store = FileStore(workers.work / f"{account}.json")
    assert json.loads(store.read()) == {"balance": 10}  # applied once
    assert store.token == done["token"]


def test_killed_attempt_is_run_again_once(workers: Workers) -> None:
    """SIGKILL the process running the deposit: the task is delivered again, waits out
    (retries past) the dead run's lease, and is applied once with a larger token."""
    import celery_app

    account = "killed"
    open_account(workers, account, fenced=True)
    task = celery_app.fenced_deposit.delay(account, 10)
    wait_until(lambda: workers.paused(account) is not None, f"{account}: an attempt paused")
    pid, first = workers.paused(account) or (0, "")
    os.kill(pid, signal.SIGKILL)
    (workers.work / f"{account}.gate").touch()
    done = workers.result(task.id)
    assert done["pid"] != pid
    assert done["token"] > int(first)
    assert workers.lines(account) == [f"applied {done['token']}"]
    assert json.loads(FileStore(workers.work / f"{account}.json").read()) == {"balance": 10}


def test_plain_task_applies_twice_after_redelivery(workers: Workers) -> None:
    """The control: the same run with a plain task deposits twice."""
    import celery_app

    account = "plain"
    open_account(workers, account, fenced=False)
    task = celery_app.plain_deposit.delay(account, 10)
    frozen = freeze_first_attempt(workers, account, task)
    try:
        done = workers.result(task.id)
        assert done["pid"] != frozen
    finally:
        os.kill(frozen, signal.SIGCONT)
    wait_until(lambda: len(workers.lines(account)) >= 2, "the frozen attempt finished")
    balance = json.loads((workers.work / f"{account}.json").read_bytes())["balance"]
    assert balance >= 20  # the deposit was applied twice (or more, on a stalled machine)


def test_fence_once_returns_the_recorded_result(workers: Workers) -> None:
    import celery_app

    first = workers.result(celery_app.once_report.delay("q3").id)
    again = workers.result(celery_app.once_report.delay("q3").id)
    other = workers.result(celery_app.once_report.delay("q4").id)
    assert again == first  # recorded, not run again
    assert workers.lines("report-q3") == [f"ran {first['token']}"]
    assert workers.lines("report-q4") == [f"ran {other['token']}"]
    assert (workers.work / "once-reports" / "report%3Aq3.json").exists()


def test_frozen_django_write_is_refused_after_redelivery(workers: Workers) -> None:
    """A Django ``FencedModel`` row: the frozen run claimed and read it, the redelivered
    run claims it with a larger token and deposits; the resumed run's write is refused
    and the deposit is applied once."""
    import celery_app

    pk = django_row(workers)
    account = f"row{pk}"
    task = celery_app.fenced_django_deposit.delay(pk, 10)
    frozen = freeze_first_attempt(workers, account, task)
    _, first = workers.paused(account) or (0, "")
    try:
        done = workers.result(task.id)
        assert done["pid"] != frozen
        assert done["token"] > int(first)
        assert django_stored(workers, pk) == (10, done["token"])
    finally:
        os.kill(frozen, signal.SIGCONT)
    wait_until(lambda: len(workers.lines(account)) == 2, "the frozen attempt finished")
    assert workers.lines(account) == [f"applied {done['token']}", f"refused {first}"]
    assert django_stored(workers, pk) == (10, done["token"])  # applied once


def test_plain_django_task_applies_twice_after_redelivery(workers: Workers) -> None:
    """The control: the same run with a plain task and a plain ``save()``."""
    import celery_app

    pk = django_row(workers)
    account = f"row{pk}"
    task = celery_app.plain_django_deposit.delay(pk, 10)
    frozen = freeze_first_attempt(workers, account, task)
    try:
        assert workers.result(task.id)["pid"] != frozen
    finally:
        os.kill(frozen, signal.SIGCONT)
    wait_until(lambda: len(workers.lines(account)) >= 2, "the frozen attempt finished")
    balance, _ = django_stored(workers, pk)
    assert balance >= 20  # the deposit was applied twice (or more, on a stalled machine)
