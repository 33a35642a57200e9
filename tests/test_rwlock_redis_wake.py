"""A Redis read-write lock's waiter wakes at a release that lands between its refused
attempt and its wait on the release stream: ``RW_ACQUIRE``'s refusal reads the stream's
last id in the same atomic step, and the wait reads from that id (not from "now").

``Interleave`` is the real ``RedisIssuer`` with one sequencing hook: the first time the
writer is refused, the reader's release runs (on the server) before the refusal is
returned, so the release lands in that window every run. The client's socket timeout
and the writer's longest block are above the test's patience, so a missed release
would leave the writer blocked until the reader's lease (60 s) ends: the test fails.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import redis

import fencing
from fencing import Busy, FenceToken
from fencing.issuer import WRITE
from fencing.redis import RedisIssuer
from fencing.testing.servers import RedisServer

PATIENCE = 30.0  # seconds; a missed release blocks the writer for 60


class Interleave:
    """A ``RedisIssuer`` that runs ``between()`` once, after the first refused write
    attempt and before its refusal is returned."""

    def __init__(self, issuer: RedisIssuer) -> None:
        self.issuer = issuer
        self.between: Callable[[], object] | None = None

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.issuer, attribute)

    def rw_acquire(self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int) -> Any:
        reply = self.issuer.rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        if mode == WRITE and isinstance(reply, Busy) and self.between is not None:
            between, self.between = self.between, None
            between()
        return reply


def test_a_release_before_the_writers_wait_wakes_it(redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port, socket_timeout=300)
    issuer = Interleave(RedisIssuer(client))
    rw = fencing.RWLock(issuer, "rw-wake-window", ttl=60)
    rw.write._waiting.max_block = 120.0  # only the release's wake can end the wait early
    read = rw.read.acquire(timeout=0)
    released = threading.Event()

    def release_reader() -> None:
        rw.read.release(read)
        released.set()

    issuer.between = release_reader
    got: list[FenceToken] = []
    writer = threading.Thread(target=lambda: got.append(rw.write.acquire(timeout=120)))
    writer.start()
    writer.join(PATIENCE)
    try:
        assert released.is_set(), "the writer was never refused"
        assert got, "the writer missed the release that landed before its wait"
    finally:
        writer.join(120)
        if got:
            rw.write.release(got[0])
        client.close()
