"""``run_chaos`` and ``run_failover_proof`` in a process of their own
(``processes.CONTEXT``), for the tests of ``fencing chaos``.

``run_chaos`` forks its workers. Forked from a test process, whose other threads
(pytest-xdist's, a renewer left by an earlier test) may hold a lock at that moment, a
worker can wait on that lock for ever: seen on loaded machines as a worker that never
opened its log. A process of the forkserver has no other thread when it forks.
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TypeVar

from processes import CONTEXT

from fencing.cli.chaos.failover import FailoverProof, run_failover_proof
from fencing.cli.chaos.runner import ChaosConfig, ChaosOutcome, run_chaos

Result = TypeVar("Result")


def _run(
    run: Callable[[ChaosConfig, Callable[[str], None]], object],
    config: ChaosConfig,
    out: Connection,
) -> None:
    lines: list[str] = []
    result = run(config, lines.append)
    out.send((result, lines))


def _apart(
    run: Callable[[ChaosConfig, Callable[[str], None]], Result], config: ChaosConfig
) -> tuple[Result, list[str]]:
    """What ``run(config)`` returned and the lines it said, run in a process of its own (not
    a pool's: those are daemons, which may not start the workers)."""
    receive, send = CONTEXT.Pipe(duplex=False)
    process = CONTEXT.Process(target=_run, args=(run, config, send))
    process.start()
    send.close()
    try:
        result: tuple[Result, list[str]] = receive.recv()
    except EOFError:
        process.join(60)
        raise AssertionError(f"the run's process ended ({process.exitcode}), no result") from None
    process.join(60)
    return result


def chaos(config: ChaosConfig) -> tuple[ChaosOutcome, list[str]]:
    """``run_chaos(config)``'s outcome and the lines it said."""
    return _apart(run_chaos, config)


def failover_proof(config: ChaosConfig) -> tuple[FailoverProof, list[str]]:
    """``run_failover_proof(config)``'s proof and the lines it said."""
    return _apart(run_failover_proof, config)
