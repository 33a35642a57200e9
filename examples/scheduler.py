"""A periodic job that runs only on the elected leader; its "last run" is guarded by the term.

Celery beat runs a schedule in one process: start two and every job runs twice, start
one and nothing runs once it dies. Here every host runs a ``Scheduler``: only the
elected leader fires the job, and each run's state is written with the term token
through a guard, so a leader that was stuck past its term and wakes up has its write
refused instead of overwriting the newer leader's.

Run: python examples/scheduler.py
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import fencing

_say_lock = threading.Lock()


def say(line: str) -> None:
    """Print one whole line (two schedulers' threads print here)."""
    with _say_lock:
        print(line, flush=True)


class Scheduler:
    """Runs ``job(host, run)`` every ``period`` seconds while ``host`` leads ``election``.

    The job's "last run" (its number, who ran it, in which term) lives in ``state``, a
    guarded store, written with the term token: a write of an older term is refused.
    """

    def __init__(
        self,
        election: fencing.Election,
        host: str,
        state: fencing.FileStore,
        job: Callable[[str, int], str],
        period: float,
    ) -> None:
        self.election, self.host, self.state = election, host, state
        self.job, self.period = job, period
        self.stop = threading.Event()
        self.refused = threading.Event()

    def serve(self) -> None:
        """Campaign, lead, campaign again after a lost term; return once stopped."""
        self.election.run(self._lead, self.host)

    def _lead(self, term: fencing.Term) -> None:
        if self.stop.is_set():
            return  # elected as we stop: resign at once
        say(f"{self.host} leads with term {term.token:d}")
        term.on_lost(lambda error: say(f"{self.host}: on_lost: term {term.token:d} is over"))
        while not self.stop.is_set():
            last = self._last_run()
            run = last["run"] + 1 if last else 1
            result = self.job(self.host, run)
            record = {"run": run, "by": self.host, "term": int(term.token), "result": result}
            try:
                self.state.write(json.dumps(record).encode(), term.token)
            except fencing.StaleTokenError as error:
                say(f"{self.host}'s run #{run} refused: {error}")
                self.refused.set()
                lost = term.wait_lost(timeout=30)  # found at the next renewal
                say(f"{self.host} stops leading: term {term.token:d} found lost: {lost}")
                return  # run() campaigns again
            say(f"{self.host} ran {result} (term {term.token:d})")
            if term.wait_lost(self.period):  # sleep till the next run, awake on a loss
                return

    def _last_run(self) -> dict[str, int] | None:
        try:
            last: dict[str, int] = json.loads(self.state.read())
        except FileNotFoundError:
            return None
        return last


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


stuck, unstuck = threading.Event(), threading.Event()


def nightly_report(host: str, run: int) -> str:
    """The job. host-a's run #2 gets stuck (a hung call, or a long GC pause)."""
    if host == "host-a" and run == 2:
        stuck.set()
        unstuck.wait(60)
    return f"nightly-report #{run}"


issuer = fencing.MemoryIssuer()  # one process here; across hosts: fencing.connect(url)
state = fencing.FileStore(Path(tempfile.mkdtemp()) / "last-run.json")
schedulers = [
    Scheduler(fencing.Election(issuer, "beat", ttl=0.6), host, state, nightly_report, 0.05)
    for host in ("host-a", "host-b")
]
threads = [threading.Thread(target=s.serve, name=s.host) for s in schedulers]
threads[0].start()
stuck.wait(60)
say("host-a is stuck in run #2, past its term (here its term is ended for it)")
issuer.force_release("beat")  # what a pause longer than the ttl does
threads[1].start()  # host-b was waiting to be elected
wait_until(lambda: b'"by": "host-b"' in state.read(), "host-b ran the job")
unstuck.set()  # host-a wakes up and writes its run #2
wait_until(schedulers[0].refused.is_set, "host-a's write refused")
for scheduler in schedulers:
    scheduler.stop.set()
for thread in threads:
    thread.join(60)
last = json.loads(state.read())
say(f"the last run: {last['result']} by {last['by']} in term {last['term']}")
