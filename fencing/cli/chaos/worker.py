"""One chaos worker: acquire -> read-modify-write every resource -> release, in a loop.

Each attempt is one JSON line appended to the worker's own log file (never a shared
queue or lock: a worker frozen by SIGSTOP must not block the others' logging):

- ``{"kind": "acquire", "token", "t0", "t1"}`` (``t0``/``t1``: ``time.monotonic`` before
  and after; one system-wide clock on Linux),
- ``{"kind": "write", "resource", "seq", "token", "outcome", "t0", "tw", "t1"}`` (``tw``:
  just before the write, after the read) with outcome ``accepted``, ``rejected`` (stale
  token) or ``error: ...``,
- ``{"kind": "unavailable", "what", "t0", "t1"}`` when the issuer could not be reached,
- ``{"kind": "staged", "resource", "token"}`` just before the staged pause (below).

The staged pause: the first worker to come between its read and its write of
``WorkerConfig.staged`` (a resource's name), the first to create the file
``WorkerConfig.staged_claim`` there, freezes itself with SIGSTOP once, at that point: the pause of
Kleppmann's scenario, at the worst moment, in every run. The controller resumes it once
another holder has written that resource with a newer token, so that its write is
refused when fenced and loses an update when not, whatever the random pauses did.

Imports the public package and the chaos resources.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import fencing

from .incr import IncrOnlyFence
from .resources import Between, Resource


@dataclass(frozen=True)
class WorkerConfig:
    index: int
    redis_url: str  # the issuer's URL: redis://, redis+sentinel://, or any fencing.connect takes
    fence_name: str
    ttl: float
    window: float
    #: ``time.monotonic()`` after which no new cycle starts: shared with the controller
    #: (forked), which may move it later (``runner``: until the staged pause is over)
    deadline: ctypes.c_double
    log_path: str
    fenced: bool
    incr_only: bool = False  # the control issuer of the failover run (``incr``)
    staged: str | None = None  # the resource of the run's staged pause, if it makes one
    staged_claim: str = ""  # the file whose creation makes a worker the one that pauses


class _Log:
    def __init__(self, path: str) -> None:
        self.file: TextIO = open(path, "a", buffering=1)  # noqa: SIM115  # line-buffered

    def __call__(self, **record: Any) -> None:
        self.file.write(json.dumps(record) + "\n")


def run_worker(config: WorkerConfig, resources: list[Resource]) -> None:
    """The loop; returns at the deadline. Never raises for expected failures."""
    logging.getLogger("fencing").setLevel(logging.CRITICAL)
    log = _Log(config.log_path)
    fence = _fence(config)
    seq = 0
    rng = random.Random(os.getpid())
    while time.monotonic() < config.deadline.value:
        t0 = time.monotonic()
        try:
            token = fence.acquire(timeout=config.ttl * 4)
        except fencing.AcquireTimeout:
            continue
        except fencing.FenceUnavailable:
            log(kind="unavailable", what="acquire", t0=t0, t1=time.monotonic())
            time.sleep(0.05)
            continue
        log(kind="acquire", worker=config.index, token=int(token), t0=t0, t1=time.monotonic())
        for resource in resources:
            seq += 1
            op = [config.index, seq, int(token)]
            between = _sleep(config.window)
            if resource.name == config.staged:
                between = _stop_first(config, log, resource.name, int(token))
            t0 = written = time.monotonic()
            try:
                written = resource.rmw(op, int(token), between)
                outcome = "accepted"
            except fencing.StaleTokenError:
                outcome = "rejected"
            except Exception as error:  # a database hiccup: logged, never fatal
                outcome = f"error: {type(error).__name__}"
            log(
                kind="write",
                worker=config.index,
                resource=resource.name,
                seq=seq,
                token=int(token),
                outcome=outcome,
                t0=t0,
                tw=written,
                t1=time.monotonic(),
            )
        with contextlib.suppress(fencing.LeaseLost, fencing.FenceUnavailable):
            fence.release(token)
        time.sleep(rng.uniform(0, config.window))
    log.file.close()


def _sleep(window: float) -> Between:
    return lambda: time.sleep(window)


def _claimed(path: str) -> bool:
    """Create ``path``; True for the one worker that created it."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _stop_first(config: WorkerConfig, log: _Log, resource: str, token: int) -> Between:
    """The window; then, for the first worker to get here (between its read and its write
    of ``resource``: a holder refused at its claim never gets here), the staged pause: a
    note in the log and SIGSTOP to itself."""

    def stop() -> None:
        time.sleep(config.window)
        if not os.path.exists(config.staged_claim) and _claimed(config.staged_claim):
            log(kind="staged", resource=resource, token=token)
            os.kill(os.getpid(), signal.SIGSTOP)

    return stop


def _fence(config: WorkerConfig) -> fencing.Fence | IncrOnlyFence:
    """The worker's fence: on Redis with short socket timeouts (a restart must not stall
    a worker), the INCR-only control on the same Redis (Sentinel primary, or Cluster: its
    two keys share a hash tag, one slot), and on any other issuer (Sentinel, Cluster,
    etcd) as ``fencing.connect`` makes it."""
    if config.incr_only and "+cluster://" in config.redis_url:
        from fencing.redis._backend import RedisClusterBackend

        client = RedisClusterBackend(config.redis_url).new_client()
        return IncrOnlyFence(client, config.fence_name, config.ttl)
    if config.incr_only:
        from fencing.redis._sentinel import parse_sentinel_url, sentinel_client

        return IncrOnlyFence(
            sentinel_client(parse_sentinel_url(config.redis_url)), config.fence_name, config.ttl
        )
    if not config.redis_url.startswith("redis://"):
        return fencing.connect(config.redis_url).fence(config.fence_name, ttl=config.ttl)
    import redis

    client = redis.Redis.from_url(config.redis_url, socket_timeout=2, socket_connect_timeout=2)
    return fencing.RedisFence(client, config.fence_name, ttl=config.ttl)


def log_path(directory: Path, index: int) -> Path:
    return directory / f"worker-{index}.jsonl"
