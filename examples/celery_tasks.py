"""A Celery task that runs once per key, whoever delivers it (fencing.celery.FencedTask).

The same report is delivered twice at once (a duplicate, or a redelivery while the first
run still works): one run holds the fence and does the work; the other waits for the
lease (``fence_on_busy="wait"``, the default), then finds the result recorded by the run
that did the work (``fence_once``) and returns it without running. Delivered again
later, the same. The report is written with the run's token, so a run that lost its
lease could not overwrite a newer one.

A real worker (two threads) consumes the queue, here in this process on Celery's memory
broker so the file runs alone; the leases are on a SQLite file. In production: a Redis
or RabbitMQ broker, ``celery -A yourapp worker``, and ``fencing_url`` set to the issuer
all workers share (docs/celery.md).

Run: python examples/celery_tasks.py  (needs ``fencing[celery,sql]``)
"""

import tempfile
import threading
from pathlib import Path

from celery import Celery
from celery.contrib.testing.worker import start_worker

from fencing import FileStore
from fencing.celery import FencedTask

folder = Path(tempfile.mkdtemp())
app = Celery("example", broker="memory://", backend="cache+memory://")
app.conf.broker_transport_options = {"polling_interval": 0.01}  # the memory broker
app.conf.fencing_url = f"sqlite:///{folder / 'fencing.db'}"  # the issuer every worker uses
app.conf.fencing_once_dir = str(folder / "once")  # where fence_once records results
report = FileStore(folder / "report-2026-Q3")
runs: list[int] = []
working = threading.Event()  # set once a run is at its work, for the demo
release_first = threading.Event()  # holds that run at its work until both are delivered


@app.task(bind=True, base=FencedTask, fence_key="report:{quarter}", fence_ttl=10, fence_once=True)
def make_report(self: FencedTask, quarter: str) -> dict[str, object]:
    assert self.fence_token is not None
    token = int(self.fence_token)
    runs.append(token)
    working.set()
    release_first.wait(30)  # the work
    report.write(f"{quarter}: revenue 1.2M".encode(), token)  # refused if stale
    return {"quarter": quarter, "token": token}


# a real worker of two threads, in this process (in production: `celery -A yourapp worker`)
with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False):
    first, duplicate = make_report.delay("2026-Q3"), make_report.delay("2026-Q3")
    working.wait(30)  # one run holds the fence and works; the other waits for the lease
    release_first.set()
    done = first.get(timeout=30, interval=0.01)
    print(f"two deliveries at once: one ran with token {done['token']} and wrote the report")
    waited = duplicate.get(timeout=30, interval=0.01)
    print(f"the other waited, then returned the recorded result: {waited == done}")
    again = make_report.delay("2026-Q3").get(timeout=30, interval=0.01)
    print(f"delivered again later: {again == done}, the recorded result, not run again")
    print(f"runs of the work: {len(runs)}; the report: {report.read()!r}")
