"""The Celery app and tasks that tests/test_celery_workers.py runs on real workers.

A worker imports this module (``celery -A celery_app worker``) and reads its broker, its
issuer and its work directory from the environment the test gives it:

- ``FENCING_TEST_BROKER``: the Redis broker's URL (also the result backend, another db);
- ``FENCING_URL``: the issuer (the same Redis server, db 0);
- ``FENCING_TEST_WORK``: where the tasks keep their accounts and logs;
- ``DJANGO_SETTINGS_MODULE`` (``django_app.settings``) and ``FENCING_TEST_DJANGO_DB``:
  the Django of the ``django_deposit`` tasks, set up in the worker at their first run
  (never at import: the test process imports this module too).

The tasks move money the way the pause scenario needs: a deposit claims the account's
row (the fenced one, with its token) and reads it, then does its slow step, then writes
the balance back increased. A deposit whose test asked for a pause (a ``pause`` file)
reports its pid (a ``paused`` file) and waits at the slow step until the test opens
the gate, so the test can freeze it there with SIGSTOP.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from celery import Celery

from fencing import FileStore, StaleTokenError
from fencing.celery import FencedTask

BROKER = os.environ.get("FENCING_TEST_BROKER", "redis://127.0.0.1:6379/1")
WORK = Path(os.environ.get("FENCING_TEST_WORK", "."))
#: Seconds an unacknowledged message stays with its worker before the broker gives it
#: to another (the Redis transport's visibility timeout); far above a deposit's run.
VISIBILITY = 3

# shared=False on every task: this module is reloaded by the test (a new app each time),
# and a shared task would be added to every Celery app made later in the same process
# (tests/test_celery_task.py's), twice: DuplicateTaskNameWarning.
app = Celery("celery_app", broker=BROKER, backend=BROKER.rsplit("/", 1)[0] + "/2")
app.conf.update(
    broker_transport_options={
        "visibility_timeout": VISIBILITY,
        # sweep for overdue messages every second (default: every 100 s)
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    },
    result_backend_transport_options={"visibility_timeout": VISIBILITY},
    worker_prefetch_multiplier=1,
    task_acks_late=True,
    task_reject_on_worker_lost=True,  # a killed pool child's task is delivered again
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


def log(account: str, line: str) -> None:
    """Append one line to the account's log (what happened, in order)."""
    with open(WORK / f"{account}.log", "a") as out:
        out.write(line + "\n")


def slow_step(account: str, token: int | None) -> None:
    """The work between claim and read. With a ``pause`` file for this account, the
    first attempt to get here says where it runs (a ``paused`` file: its pid and token)
    and waits for the gate; later attempts go on."""
    if not (WORK / f"{account}.pause").exists():
        return
    try:
        with open(WORK / f"{account}.paused", "x") as paused:
            paused.write(f"{os.getpid()} {token}")
    except FileExistsError:
        return
    deadline = time.monotonic() + 120
    while not (WORK / f"{account}.gate").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def deposit_to_file(task: FencedTask, account: str, amount: int) -> int:
    """docs/celery.md's quick start deposit, on a ``FileStore`` per account: claim, read,
    the slow step, write with the token. Idempotent per task id (the ids applied are
    kept with the balance): a copy of a message the broker delivers again (acks_late,
    at least once) applies nothing twice."""
    assert task.fence_token is not None
    token = int(task.fence_token)
    store = FileStore(WORK / f"{account}.json")
    store.claim(token)
    try:
        state = json.loads(store.read())
    except FileNotFoundError:
        state = {"balance": 0, "applied": []}
    slow_step(account, token)
    if task.request.id not in state["applied"]:
        state = {
            "balance": state["balance"] + amount,
            "applied": [*state["applied"], task.request.id],
        }
        store.write(json.dumps(state).encode(), token)
    return int(state["balance"])


@app.task(bind=True, shared=False, base=FencedTask, fence_key="account:{account}", fence_ttl=5)
def deposit(self: FencedTask, account: str, amount: int) -> int:
    """The quick start's task, with the default ``fence_on_busy``."""
    return deposit_to_file(self, account, amount)


@app.task(
    bind=True,
    shared=False,
    base=FencedTask,
    fence_key="account:{account}",
    fence_ttl=5,
    fence_on_busy="skip",
)
def skip_deposit(self: FencedTask, account: str, amount: int) -> int:
    """The same with ``fence_on_busy="skip"``, the default up to 0.2.0 (the control)."""
    return deposit_to_file(self, account, amount)


@app.task(
    bind=True,
    shared=False,
    base=FencedTask,
    fence_key="report:{name}",
    fence_ttl=5,
    fence_once=True,
)
def once_report(self: FencedTask, name: str) -> dict[str, Any]:
    """A report made at most once per name (``fencing_once_dir`` is set by the test's
    worker configuration below); each real run is logged."""
    assert self.fence_token is not None
    log(f"report-{name}", f"ran {int(self.fence_token)}")
    return {"name": name, "token": int(self.fence_token), "pid": os.getpid()}


app.conf.fencing_once_dir = str(WORK / "once-reports")


def django_account() -> Any:
    """The test app's ``Account`` model, Django set up on first use (in the worker)."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from django_app.models import Account

    return Account


@app.task(
    bind=True,
    shared=False,
    base=FencedTask,
    fence_key="django-account:{pk}",
    fence_ttl=1,
    # acks_late delivers at least once: a killed child's task is requeued, and a task
    # unacknowledged past the visibility timeout (a loaded machine) is delivered again,
    # even after its first copy finished. The guard refuses a stale write; a copy with a
    # newer token after the work was done is stopped by the record of fence_once (one
    # deposit per account in these tests, so the account's key names the work).
    fence_once=True,
    fence_on_busy="retry",
    fence_retry_countdown=0.5,
    max_retries=None,
)
def fenced_django_deposit(self: FencedTask, pk: int, amount: int) -> dict[str, Any]:
    """Reads a ``FencedModel`` row (claim before read), works, writes the deposit back with
    its token: ``balance = balance + amount`` in the guarded ``UPDATE``."""
    from django.db.models import F

    from fencing.django import fenced_get

    assert self.fence_token is not None
    token = int(self.fence_token)
    account = f"row{pk}"
    row = fenced_get(django_account(), token, pk=pk)  # claim, then read: one transaction
    slow_step(account, token)
    row.balance = F("balance") + amount
    try:
        row.save(fence_token=token, update_fields=["balance"])
    except StaleTokenError:
        log(account, f"refused {token}")
        raise
    log(account, f"applied {token}")
    return {"token": token, "pid": os.getpid()}


@app.task(bind=True, shared=False)
def plain_django_deposit(self: Any, pk: int, amount: int) -> dict[str, Any]:
    """The same task, unfenced (the control)."""
    from django.db.models import F

    account = f"row{pk}"
    row = django_account().objects.get(pk=pk)
    slow_step(account, None)
    row.balance = F("balance") + amount
    row.save(unfenced=True, update_fields=["balance"])
    log(account, "applied")
    return {"pid": os.getpid()}
