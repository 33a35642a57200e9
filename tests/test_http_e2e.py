"""The pause scenario across a real HTTP call: uvicorn worker processes serve a FastAPI
app whose marks live in Redis; client processes hold leases of a ``RedisFence``; one is
frozen with SIGSTOP past its lease, another holder writes, and the frozen one, resumed,
is refused with 409 (``StaleTokenError`` on its side) and changes nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from processes import CONTEXT, frozen
from waiting import PATIENCE, wait_until

from fencing import RedisFence, StaleTokenError
from fencing.http import FenceAuth
from fencing.testing.servers import RedisServer, free_port

TTL = 0.5
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def service(redis_server: RedisServer) -> Iterator[str]:
    """uvicorn with two workers running tests/fenced_service.py, on a free loopback port."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "fenced_service:app",
            "--app-dir",
            str(TESTS),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "2",
            "--no-access-log",
        ],
        env={**os.environ, "FENCING_HTTP_REDIS": redis_server.url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PATIENCE
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"uvicorn exited: {process.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                httpx.get(f"{url}/items/none", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(15)
        process.stderr.close()  # type: ignore[union-attr]


def holder(redis_url: str, url: str, value: str, pause: bool, out: Connection) -> None:
    """A client process: take the lease, (optionally) freeze, then write over HTTP.

    Reports go through a pipe, whose ``send`` is done when it returns (a queue's
    feeder thread could still hold "holding" when the process freezes itself)."""
    fence = RedisFence(redis.Redis.from_url(redis_url), "http-e2e", ttl=TTL)
    token = fence.acquire(timeout=30)
    out.send(("holding", int(token)))
    if pause:
        os.kill(os.getpid(), signal.SIGSTOP)  # the pause: a GC, swap, a stopped VM
    with httpx.Client(base_url=url, auth=FenceAuth(token), timeout=10) as client:
        try:
            reply = client.put("/items/ledger", json={"value": value})
            out.send(("written", reply.status_code, reply.json()["token"]))
        except StaleTokenError as refused:
            out.send(("refused", refused.token, refused.current))


def receive(reports: Connection) -> Any:
    """A client's next report; a clear failure instead of a hang if it never comes."""
    assert reports.poll(30), "the client process did not report within 30 s"
    return reports.recv()


def test_a_holder_frozen_past_its_lease_is_refused_by_the_service(
    redis_server: RedisServer, service: str
) -> None:
    out_a, into_a = CONTEXT.Pipe(duplex=False)
    out_b, into_b = CONTEXT.Pipe(duplex=False)
    a = CONTEXT.Process(target=holder, args=(redis_server.url, service, "A", True, into_a))
    a.start()
    try:
        kind, token_a = receive(out_a)
        assert kind == "holding"
        pid_a = frozen(a, "A stops itself")
        client = redis.Redis.from_url(redis_server.url)
        lease = "fencing:{http-e2e}:lease"
        wait_until(lambda: client.exists(lease) == 0, "A's lease expires while A is frozen")
        client.close()
        b = CONTEXT.Process(target=holder, args=(redis_server.url, service, "B", False, into_b))
        b.start()
        kind, token_b = receive(out_b)
        assert kind == "holding" and token_b > token_a
        assert receive(out_b) == ("written", 200, token_b)
        b.join(PATIENCE)
        assert b.exitcode == 0
        os.kill(pid_a, signal.SIGCONT)  # A wakes up believing it holds the lease
        assert receive(out_a) == ("refused", token_a, token_b)
        a.join(PATIENCE)
        assert a.exitcode == 0
    finally:
        if a.is_alive():
            os.kill(pid_a, signal.SIGCONT)
            a.kill()
    state = httpx.get(f"{service}/items/ledger", timeout=10).json()
    assert state["value"] == f"{token_b}:B"  # A's write never reached the store
