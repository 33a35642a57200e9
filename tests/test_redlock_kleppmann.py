"""Kleppmann's Redlock counterexample, with real processes on three real masters.

Client 1 takes the lock and reads the ledger, then freezes (``SIGSTOP``) past its lease;
client 2 takes the lock (once client 1's lease has expired on a majority), reads, and
appends its entry; client 1 is resumed and appends its own entry to what it read::

    client 1: lock -> read "" ... [frozen past the lease] ..............  write ""+"client 1;"
    client 2:            lease expires -> lock -> read "" -> write "client 2;"

With ``RedlockFence`` the ledger is a guarded ``FileStore`` and client 1's write carries
its token, lower than client 2's: refused, and the ledger keeps client 2's entry. The
control, in the same test: pottery's ``Redlock`` (a real peer from PyPI, no token) on
the same nodes, the ledger a plain file: client 1's write goes through and client 2's
entry is lost. Each ending is an assertion, so the test fails if either one changes.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import redis
from pottery import Redlock
from processes import CONTEXT, frozen
from waiting import PATIENCE

from fencing import FileStore, StaleTokenError
from fencing.redis import RedlockFence
from fencing.testing.servers import RedisServer

NAME = "kleppmann"
TTL = 1.0  # seconds: client 1 stays frozen until client 2 has written, far longer


def _client_one(kind: str, ports: list[int], ledger: str, log: str) -> None:
    """In a child process: lock, read, freeze until resumed, then append and write."""
    clients = [redis.Redis(port=port, socket_timeout=5) for port in ports]
    if kind == "fencing":
        fence = RedlockFence(clients, NAME, ttl=TTL)
        token = fence.acquire(timeout=PATIENCE)
        store = FileStore(ledger)
        seen = store.read()
        os.kill(os.getpid(), signal.SIGSTOP)  # paused past its lease, between read and write
        try:
            store.write(seen + b"client 1;", token)
            outcome = "accepted"
        except StaleTokenError:
            outcome = "refused"
    else:
        lock = Redlock(key=NAME, masters=set(clients), auto_release_time=TTL)
        assert lock.acquire(timeout=PATIENCE)
        seen = Path(ledger).read_bytes()
        os.kill(os.getpid(), signal.SIGSTOP)
        Path(ledger).write_bytes(seen + b"client 1;")  # nothing to check a token against
        outcome = "accepted"
    Path(log).write_text(outcome)


def _run(
    kind: str, ports: list[int], ledger: str, log: Path, client_two: Callable[[], None]
) -> str:
    """Client 1 in a child, frozen after its read; ``client_two`` in this process; then
    client 1 resumed. Returns what client 1's write came to."""
    child = CONTEXT.Process(target=_client_one, args=(kind, ports, ledger, str(log)))
    child.start()
    pid = frozen(child, "client 1 has read and frozen")
    try:
        client_two()
    finally:
        os.kill(pid, signal.SIGCONT)
        child.join(PATIENCE)
    assert child.exitcode == 0
    return log.read_text()


def test_a_frozen_holder_is_refused_with_tokens_and_not_with_pottery(
    redis_factory: Callable[..., RedisServer], tmp_path: Path
) -> None:
    nodes = [redis_factory() for _ in range(3)]
    ports = [node.port for node in nodes]
    clients = [redis.Redis(port=port, socket_timeout=5) for port in ports]

    # fenced: RedlockFence's tokens, a guarded FileStore
    ledger = str(tmp_path / "fenced")
    store = FileStore(ledger)
    store.write(b"", 1)

    def fenced_client_two() -> None:
        fence = RedlockFence(clients, NAME, ttl=10)
        token = fence.acquire(timeout=PATIENCE)  # once client 1's lease has expired
        store.write(store.read() + b"client 2;", token)
        fence.release(token)

    outcome = _run("fencing", ports, ledger, tmp_path / "fenced.log", fenced_client_two)
    assert outcome == "refused"
    assert store.read() == b"client 2;"

    # the control: pottery's Redlock on the same nodes, an unguarded file
    plain = tmp_path / "plain"
    plain.write_bytes(b"")

    def pottery_client_two() -> None:
        lock = Redlock(key=NAME, masters=set(clients), auto_release_time=10)
        assert lock.acquire(timeout=PATIENCE)
        plain.write_bytes(plain.read_bytes() + b"client 2;")
        lock.release()

    outcome = _run("pottery", ports, str(plain), tmp_path / "plain.log", pottery_client_two)
    assert outcome == "accepted"
    assert plain.read_bytes() == b"client 1;"  # client 2's entry is lost
    for client in clients:
        client.close()
