"""Every script in examples/ runs as a newcomer would run it, and says what it should."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import docs_blocks
import pytest
from processes import CONTEXT

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

#: Lines (substrings) each example must print, in this order.
EXPECTED: dict[str, list[str]] = {
    "quickstart.py": [
        "wrote with token 1",
        "another holder wrote with token 2",
        "rejected: stale fence token 1",
        "the file holds b'their version' (token 2)",
    ],
    "guard_callable.py": [
        "rejected: stale fence token 7",
        "ledger: ['paid invoice 42', 'refunded invoice 42']",
    ],
    "sqlalchemy_mixin.py": [  # SQL tokens are clock-floored: no fixed numbers
        "wrote total=100",
        "rejected: stale fence token",
        "rejected by invoices (id=42)",
        "invoice 42: total=100",
    ],
    "custom_issuer.py": [
        "first holder got token 1",
        "second holder waited 0.2s and gave up: the lease is taken",
        "second holder got token 2",
    ],
    "http_service.py": [
        "holder 2 wrote with token 2",
        "holder 1 refused: stale fence token 1 rejected by /items/invoice-42",
        "the service holds 'total=100'",
        "no token: 428 Fence token required",
    ],
    "observability.py": [
        "a second worker gave up waiting for the lease",
        "the store refused our stale token 1",
        'fencing_acquire_duration_seconds_count{fencing_backend="memory",'
        'fencing_outcome="acquired"} 2.0',
        'fencing_acquire_duration_seconds_count{fencing_backend="memory",'
        'fencing_outcome="timeout"} 1.0',
        'fencing_lease_held_duration_seconds_count{fencing_backend="memory"} 1.0',
        'fencing_writes_rejected_total{fencing_guard="file"} 1.0',
    ],
    "rwlock.py": [
        "readers share the read epoch 2: True",
        "a writer waits while readers read",
        "the writer got token 3 once the paused reader's lease expired",
        "the paused reader's claim with 2 was refused: the catalog moved on",
    ],
    "lost_lease.py": [
        "working with token 1",
        "on_lost: fence 'nightly-report', token 1: lease expired or was taken over",
        "the lease is gone: stopping early",
        "leaving the hold raised LeaseLost for token 1",
        "the asyncio job works with token 2",
        "its body was cancelled: LeaseLost from CancelledError",
    ],
    "election.py": [
        "host-a leads with term 1",
        "host-b leads with term 2; leader() shows host-b",
        "host-a refused: stale fence token 1",
        "host-a's term found lost: True",
        "the state: b'ran at 09:01 by host-b'; leader now: None",
    ],
    "scheduler.py": [
        "host-a leads with term 1",
        "host-a ran nightly-report #1 (term 1)",
        "host-a is stuck in run #2, past its term",
        "host-b leads with term 2",
        "host-b ran nightly-report #2 (term 2)",
        "host-a's run #2 refused: stale fence token 1",
        "host-a stops leading: term 1 found lost: True",
        "the last run: nightly-report #",
        "by host-b in term 2",
    ],
    "reentrant.py": [
        "closing the day with token 1",
        "posted 'interest' with token 1",
        "posted 'fees' with token 1",
        "the next lease gets token 2",
    ],
    "django_models.py": [  # tokens from Django's database are clock-floored
        "holder 1 read balance=100 with token",
        "holder 2 wrote balance=110 with token",
        "holder 1 refused: stale fence token",
        "a plain save() of an existing row is refused",
        "the row: balance=110",
        "rows left: 0",
    ],
    "celery_tasks.py": [
        "two deliveries at once: one ran with token",
        "the other waited, then returned the recorded result: True",
        "delivered again later: True, the recorded result, not run again",
        "runs of the work: 1; the report: b'2026-Q3: revenue 1.2M'",
    ],
    "cache_fill.py": [  # SQL tokens are clock-floored: no fixed numbers
        "but the write was refused as stale",
        "and filled the cache",
        "cache holds: 'report computed with token",
    ],
    "semaphore_limiter.py": [
        "A holds slot ",
        "a third worker gave up: both permits are held",
        "with token 2 once A's lease expired",
        "A's late write refused: stale fence token 1",
        "B, a long holder of the other slot, still writes to its lane",
        "try_acquire x4: [True, True, True, False]",
        "in use: 3 of 3",
        "sorry: nothing frees within 0.5 s",
        "go: admitted=True once the 0.2 s window ended",
    ],
}


@functools.cache
def run(script: str) -> str:
    """``script``'s output; it runs once per session, whichever tests read it. It runs
    as ``python examples/<script>`` would, from the repository's root, in a child of the
    suite's forkserver (``docs_blocks.run_script``, as the docs' pages do): a script costs
    its own code, not an interpreter's start-up importing fencing, redis-py and SQLAlchemy
    again (the installed ``fencing`` command's start-up is test_cli_operate.py's)."""
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "output.txt"
        child = CONTEXT.Process(
            target=docs_blocks.run_script,
            args=(str(EXAMPLES / script), dict(os.environ), str(EXAMPLES.parent), str(output)),
        )
        child.start()
        child.join(60)
        if child.exitcode is None:
            child.kill()
            child.join()
        printed = output.read_text()
    assert child.exitcode == 0, f"{script} ended with {child.exitcode}:\n{printed}"
    return printed


def test_every_example_is_tested() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example(script: str) -> None:
    output = run(script)
    position = 0
    for line in EXPECTED[script]:
        found = output.find(line, position)
        assert found >= 0, f"{script} did not print {line!r} (in order):\n{output}"
        position = found + len(line)


def test_cache_fill_recomputes_once_per_lease() -> None:
    """Five processes missed the key while the first one was recomputing: none of them
    recomputed while a lease was live; they all read the value the fence let through."""
    lines = run("cache_fill.py").splitlines()
    outcomes = lines[:6]
    assert sum(o.startswith("recomputed") for o in outcomes) == 2
    assert sum(o.startswith("hit") for o in outcomes) == 4
