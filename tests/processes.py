"""How the suite starts the child processes of its tests: from a forkserver that has
imported the heavy libraries once.

A spawned child is a fresh interpreter that imports fencing, redis-py, SQLAlchemy,
pytest and its test module again: 0.3 to 1 s of CPU each, for more than a hundred
children per run, on a suite that is CPU-bound on 2 vCPUs. A forkserver child is forked
from a server process that imported them once (one per test worker, started by the
worker's first child), so it costs a fork and its test module's own code. It is as safe
as a spawned child: the server is single-threaded, so a fork never copies a lock that
another thread held (the reason the suite never forks its threaded test workers).

A child inherits the server's environment, working directory and standard streams,
which are the worker's when its first child starts: a test that starts children must not
change the first two before (pass ``env=`` to a ``subprocess`` instead), and what a child
prints is not in the test's report (a child reports through its pipe, queue or files).
A child ends with ``os._exit``, as a forked one does: what it writes must be flushed or
closed by its own code. It is the server's child, not the test's: ``os.waitpid`` cannot
see it stop (``frozen`` can).
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.process import BaseProcess
from pathlib import Path

from waiting import wait_until

#: What the server imports before it forks the first child (an import that fails is
#: left to the child, which then fails the way its test would). ``fencing.sql`` loads
#: its names on first use: its guard, claims and migrations (SQLAlchemy's ORM, Alembic)
#: are named, for the children that write guarded rows or make tables.
PRELOAD = [
    "fencing",
    "fencing.redis",
    "fencing.sql",
    "fencing.sql._claims",
    "fencing.sql._migrate",
    "fencing.sql._mixin",
    "redis",
    "sqlalchemy",
    "pytest",
]

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(PRELOAD)


def stopped(pid: int) -> bool:
    """The process is stopped (state ``T`` in ``/proc``): its ``SIGSTOP`` has landed."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"


def frozen(process: BaseProcess, what: str) -> int:
    """Wait until ``process`` has stopped itself (``SIGSTOP``) and return its pid; fail at
    once if it ended instead."""
    pid = process.pid
    assert pid is not None, f"{what}: the process was never started"

    def check() -> bool:
        assert process.exitcode is None, f"{what}: it ended ({process.exitcode}) instead"
        return stopped(pid)

    wait_until(check, what)
    return pid
