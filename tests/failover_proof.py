"""``run_failover_proof`` in a fresh, spawned process, for the tests of
``fencing chaos --failover``.

``run_chaos`` forks its workers. Forked from a test process, whose other threads
(pytest-xdist's, a renewer left by an earlier test) may hold a lock at that moment, a
worker can wait on that lock for ever: seen on loaded machines as a worker that never
opened its log. A spawned process has no other thread when it forks.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection

from fencing.cli.chaos.failover import FailoverProof, run_failover_proof
from fencing.cli.chaos.runner import ChaosConfig


def _run(config: ChaosConfig, out: Connection) -> None:
    lines: list[str] = []
    proof = run_failover_proof(config, say=lines.append)
    out.send((proof, lines))


def failover_proof(config: ChaosConfig) -> tuple[FailoverProof, list[str]]:
    """The proof and the lines it said, run in a spawned process (not a pool's: those
    are daemons, which may not start the workers)."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_run, args=(config, send))
    process.start()
    send.close()
    try:
        result: tuple[FailoverProof, list[str]] = receive.recv()
    except EOFError:
        process.join(60)
        raise AssertionError(f"the proof's process ended ({process.exitcode}), no result") from None
    process.join(60)
    return result
