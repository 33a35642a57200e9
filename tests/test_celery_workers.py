"""``fencing.celery.FencedTask`` on real Celery workers (issue 24): a Redis broker and
three prefork workers (``--concurrency=1``, ``acks_late``), separate processes started
once per test session (per xdist worker); nothing eager. The workers set Django up on a
SQLite file shared with the test, which reads it with ``sqlite3``.

The run: deposits into ``FencedModel`` rows, each task claiming and reading its row
(``fenced_get``), working, and writing the deposit back with its token. One deposit is
frozen (SIGSTOP) on its worker mid-task past its lease's ttl and the broker's visibility
timeout: the broker gives the message to another worker, which runs it to the end with
a larger token; the frozen run is then resumed and its write is refused. Another
deposit's process is SIGKILLed mid-task: the task is delivered again and completes once.
The others run meanwhile on whatever worker is free. Delivery is at least once (a copy
may come again after its first finished, on a loaded machine): the deposits are
``fence_once`` tasks, so at the end every deposit is applied exactly once. The same run
with a plain task and a plain ``save()`` (the control) deposits twice on the frozen row.

And docs/celery.md's quick start: two deposits to one account sent together are both
applied (the second waits for the first's lease, the default ``fence_on_busy``); the
control, ``fence_on_busy="skip"``, drops the second.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from celery import Celery
from celery.result import AsyncResult
from waiting import PATIENCE, wait_until

import fencing
from fencing import FileStore
from fencing.issuer import Inspects
from fencing.testing.servers import RedisServer

pytestmark = pytest.mark.xdist_group("celery")  # the workers start once, on one xdist worker

TESTS = Path(__file__).resolve().parent


class Workers:
    """The broker and the workers of this module, and what the tests read from them."""

    def __init__(
        self, work: Path, app: Celery, procs: list[subprocess.Popen[bytes]], issuer: str
    ) -> None:
        self.work = work
        self.app = app
        self.procs = procs
        # the workers' issuer (their FENCING_URL), to read the leases' queues
        inspects = fencing.connect(issuer).fence("inspect", ttl=1).issuer
        assert isinstance(inspects, Inspects)
        self.issuer = inspects

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


# Session, not module: another file's test run between two of these on the same xdist
# worker would tear the workers down and start them again (about 5 s each time).
@pytest.fixture(scope="session")
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
        for name in ("a", "b", "c"):
            with open(work / f"{name}.out", "wb") as out:  # the worker keeps its own copy
                procs.append(start_worker(name, work, env, out))
        with pytest.MonkeyPatch.context() as patch:  # celery_app reads them at import
            for key, value in settings.items():
                patch.setenv(key, value)
            app = importlib.reload(importlib.import_module("celery_app")).app
        try:
            wait_until(
                lambda: len(app.control.ping(timeout=0.5) or []) == 3, "the three workers up"
            )
            yield Workers(work, app, procs, server.url)
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


def django_row(workers: Workers, *, pause: bool = True) -> int:
    """A new ``Account`` row, balance 0, fence token 0, whose first deposit pauses at its
    slow step if ``pause``; its pk."""
    with sqlite3.connect(workers.work / "django.db") as db:
        pk = db.execute(
            "INSERT INTO django_app_account (fence_token, name, balance, note) "
            "VALUES (0, 'e2e', 0, '')"
        ).lastrowid
    assert pk is not None
    if pause:
        (workers.work / f"row{pk}.pause").touch()
    return pk


def django_stored(workers: Workers, pk: int) -> tuple[int, int]:
    """(balance, fence_token) of the row, as the database has it."""
    with sqlite3.connect(workers.work / "django.db") as db:
        balance, token = db.execute(
            "SELECT balance, fence_token FROM django_app_account WHERE id = ?", (pk,)
        ).fetchone()
    return int(balance), int(token)


def stop_first_attempt(
    workers: Workers, account: str, task: AsyncResult, how: signal.Signals
) -> int:
    """Wait for the first attempt to reach its slow step, send ``how`` (SIGSTOP or
    SIGKILL) to the process running it, open the gate for the attempt that follows;
    return that process's pid."""

    def started() -> bool:
        if task.ready():  # failed before its slow step: say why now
            raise AssertionError(f"{account}: the task ended early: {task.result!r}")
        return workers.paused(account) is not None

    wait_until(started, f"{account}: an attempt paused")
    pid, _token = workers.paused(account) or (0, "")
    os.kill(pid, how)
    (workers.work / f"{account}.gate").touch()
    return pid


def test_fence_once_returns_the_recorded_result(workers: Workers) -> None:
    import celery_app

    first = workers.result(celery_app.once_report.delay("q3").id)
    again = workers.result(celery_app.once_report.delay("q3").id)
    other = workers.result(celery_app.once_report.delay("q4").id)
    assert again == first  # recorded, not run again
    assert workers.lines("report-q3") == [f"ran {first['token']}"]
    assert workers.lines("report-q4") == [f"ran {other['token']}"]
    assert (workers.work / "once-reports" / "report%3Aq3.json").exists()


def two_deposits_sent_together(workers: Workers, task: Any) -> tuple[str, Any, Any]:
    """Two deposits of 10 into one new account: the first is held at its slow step
    (its lease held) until the second has met the held lease, by waiting on it (the
    lease's queue) or by returning at once; then both run to their end."""
    account = f"acct-{uuid.uuid4().hex[:8]}"
    (workers.work / f"{account}.pause").touch()
    first = task.delay(account, 10)
    wait_until(lambda: workers.paused(account) is not None, f"{account}: the first deposit holds")
    second = task.delay(account, 10)
    status = workers.issuer.status
    wait_until(
        lambda: second.ready() or (status(f"account:{account}").waiters or 0) >= 1,
        f"{account}: the second deposit met the held lease",
    )
    (workers.work / f"{account}.gate").touch()
    return account, first.get(timeout=PATIENCE), second.get(timeout=PATIENCE)


def stored_deposits(workers: Workers, account: str) -> tuple[int, int]:
    """(balance, how many deposits were applied) of the account's file."""
    state = json.loads(FileStore(workers.work / f"{account}.json").read())
    return int(state["balance"]), len(state["applied"])


def test_two_deposits_sent_together_are_both_applied(workers: Workers) -> None:
    """docs/celery.md's quick start: distinct calls sharing a key both run (the second
    waits for the first's lease); the control, ``fence_on_busy="skip"``, drops one."""
    import celery_app

    account, first, second = two_deposits_sent_together(workers, celery_app.deposit)
    assert sorted([first, second]) == [10, 20]
    assert stored_deposits(workers, account) == (20, 2)

    account, first, second = two_deposits_sent_together(workers, celery_app.skip_deposit)
    assert (first, second) == (10, None)  # the second deposit is gone
    assert stored_deposits(workers, account) == (10, 1)


#: Deposits of the run that neither pause nor are frozen or killed.
OTHERS = 4


class Run:
    """One run of a deposit task over fresh rows: one frozen, one killed, ``OTHERS`` left
    alone; what the test reads back."""

    def __init__(self, workers: Workers, task: Any) -> None:
        self.workers = workers
        self.frozen_row, self.killed_row = django_row(workers), django_row(workers)
        self.frozen_task = task.delay(self.frozen_row, 10)
        self.frozen_pid = stop_first_attempt(
            workers, f"row{self.frozen_row}", self.frozen_task, signal.SIGSTOP
        )
        self.frozen_token = self.paused_token(self.frozen_row)
        self.killed_task = task.delay(self.killed_row, 10)
        self.killed_pid = stop_first_attempt(
            workers, f"row{self.killed_row}", self.killed_task, signal.SIGKILL
        )
        self.killed_token = self.paused_token(self.killed_row)
        self.other_rows = [django_row(workers, pause=False) for _ in range(OTHERS)]
        self.other_tasks = [task.delay(pk, 10) for pk in self.other_rows]

    def paused_token(self, pk: int) -> str:
        _, token = self.workers.paused(f"row{pk}") or (0, "")
        return token

    def results(self) -> list[dict[str, Any]]:
        """Every task's result, the frozen one's redelivery and the killed one's included;
        then the frozen run is resumed (whatever happened) and has finished."""
        try:
            tasks = [self.frozen_task, self.killed_task, *self.other_tasks]
            done = [self.workers.result(task.id) for task in tasks]
        finally:
            os.kill(self.frozen_pid, signal.SIGCONT)
        account = f"row{self.frozen_row}"
        wait_until(lambda: len(self.workers.lines(account)) >= 2, "the frozen run finished")
        return done


def test_three_workers_one_frozen_one_killed_every_deposit_applied_once(
    workers: Workers,
) -> None:
    import celery_app

    run = Run(workers, celery_app.fenced_django_deposit)
    frozen, killed, *others = run.results()
    assert frozen["pid"] != run.frozen_pid and frozen["token"] > int(run.frozen_token)
    assert killed["pid"] != run.killed_pid and killed["token"] > int(run.killed_token)
    assert workers.lines(f"row{run.frozen_row}") == [
        f"applied {frozen['token']}",
        f"refused {run.frozen_token}",  # the resumed run's write
    ]
    assert workers.lines(f"row{run.killed_row}") == [f"applied {killed['token']}"]
    rows = [run.frozen_row, run.killed_row, *run.other_rows]
    for pk, done in zip(rows, [frozen, killed, *others], strict=True):
        assert django_stored(workers, pk) == (10, done["token"])  # applied once each


def test_plain_task_applies_the_frozen_deposit_twice(workers: Workers) -> None:
    """The control: the same run with a plain task and a plain ``save()``."""
    import celery_app

    run = Run(workers, celery_app.plain_django_deposit)
    frozen, killed, *_ = run.results()
    assert frozen["pid"] != run.frozen_pid and killed["pid"] != run.killed_pid
    balance, _ = django_stored(workers, run.frozen_row)
    assert balance >= 20  # the deposit was applied twice (or more, on a stalled machine)
    for pk in [run.killed_row, *run.other_rows]:  # at least once (at-least-once delivery)
        assert django_stored(workers, pk)[0] >= 10
