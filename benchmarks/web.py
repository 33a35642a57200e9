"""Family ``http``: what ``FenceMiddleware`` costs a request, next to the same app without it.

Each variant is a uvicorn process (one worker, keep-alive) serving ``web_app.py``; one
client in this process sends ``PUT /items/k`` with a fresh, increasing
``Fencing-Token`` (every request is admitted) and times each request to its response.
Floors: the plain app (and its A/A copy, a second plain process); for the middleware
with a ``RedisMark``, the plain app whose handler makes one Redis round trip (the
least a check in Redis can add). The servers inherit this process's CPU pinning.

Imports httpx, the harness and fencing's test servers (for a free port).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from fencing.testing.servers import free_port
from harness import Context, Table, Variant, run_rounds, timed

PLAIN = "plain app (floor)"
AA = "A/A: plain app, 2nd process"
ROUND_TRIP = "plain app + one Redis GET in the handler"
MEMORY = "FenceMiddleware (MemoryMark)"
REDIS = "FenceMiddleware (RedisMark, in a thread)"
INLINE = "FenceMiddleware (RedisMark, threaded=False)"
SERVERS = {
    PLAIN: "plain",
    AA: "plain",
    ROUND_TRIP: "redis-get",
    MEMORY: "memory",
    REDIS: "redis",
    INLINE: "redis-inline",
}
HERE = Path(__file__).resolve().parent


def run(ctx: Context) -> list[Table]:
    servers: list[subprocess.Popen[bytes]] = []
    clients: list[httpx.Client] = []
    tokens = itertools.count(1)
    variants = []
    try:
        for name, kind in SERVERS.items():
            url = _serve(kind, ctx.redis_url, servers)
            client = httpx.Client(base_url=url)
            clients.append(client)
            variants.append(Variant(name, timed(_put(client, tokens))))
        stats = run_rounds(
            variants, rounds=ctx.scale(4, 20), per_round=ctx.scale(50, 100), warmup=50
        )
    finally:
        for client in clients:
            client.close()
        for server in servers:
            server.terminate()
            server.wait(10)
    return [
        Table(
            "http",
            "HTTP: PUT through uvicorn (keep-alive, one client), with and without FenceMiddleware",
            [stats[name] for name in SERVERS],
            floor=PLAIN,
            floor_of={REDIS: ROUND_TRIP, INLINE: ROUND_TRIP},
            notes=[
                "each op: one PUT /items/k with a fresh Fencing-Token, timed to its response",
                "RedisMark rows: their floor is the plain app whose handler makes one "
                "Redis round trip",
            ],
        )
    ]


def _put(client: httpx.Client, tokens: Iterator[int]) -> Callable[[], None]:
    def put() -> None:
        client.put(
            "/items/k", content=b"x", headers={"Fencing-Token": str(next(tokens))}
        ).raise_for_status()

    return put


def _serve(kind: str, redis_url: str, servers: list[subprocess.Popen[bytes]]) -> str:
    """Start one uvicorn process serving ``kind``; its URL once it answers."""
    port = free_port()
    env = {**os.environ, "FENCING_BENCH_HTTP": kind, "FENCING_BENCH_REDIS": redis_url}
    command = [sys.executable, "-m", "uvicorn", "web_app:app", "--app-dir", str(HERE)]
    command += ["--port", str(port), "--no-access-log", "--log-level", "warning"]
    servers.append(subprocess.Popen(command, env=env))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.put(f"{url}/items/warm", headers={"Fencing-Token": "0"}).raise_for_status()
            return url
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
