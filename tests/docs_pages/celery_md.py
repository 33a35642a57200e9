# Generated from docs/celery.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/celery.md:22

import json
from pathlib import Path

from celery import Celery

import fencing
from fencing.celery import FencedTask

app = Celery("tasks", broker="redis://localhost:6379/1", backend="redis://localhost:6379/2")
app.conf.update(
    task_acks_late=True,  # a task a worker dies on is delivered again
    task_reject_on_worker_lost=True,  # also when only the pool child died
    worker_prefetch_multiplier=1,
    fencing_url="redis://localhost:6379/0",  # the issuer (else $FENCING_URL)
)


@app.task(
    bind=True,
    base=FencedTask,
    fence_key="account:{account}",  # one lease per account: deposits take turns
    fence_ttl=30,
    fence_on_busy="wait",  # the default: a second deposit waits, it is never dropped
)
def deposit(self, account, amount):
    store = fencing.FileStore(Path(f"{account}.json"))
    store.claim(self.fence_token)  # claim before read: older runs are shut out
    try:
        balance = json.loads(store.read())["balance"]
    except FileNotFoundError:
        balance = 0
    balance += amount
    store.write(json.dumps({"balance": balance}).encode(), self.fence_token)
    return balance

# docs/celery.md:222

from celery import Celery

from fencing.celery import FencedTask

app = Celery("reports", broker="redis://localhost:6379/1")


def build_report(day):
    return {"day": day, "revenue": 1200}


@app.task(
    bind=True, base=FencedTask, fence_key="report:{day}", fence_once=True, fence_once_ttl=7 * 86400
)
def daily_report(self, day):
    return build_report(day)  # JSON-serializable
