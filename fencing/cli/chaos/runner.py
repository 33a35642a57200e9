"""The chaos controller: workers, SIGSTOP/SIGCONT pauses, one Redis restart, the check.

``run_chaos(ChaosConfig(...))`` starts a throwaway ``redis-server`` (the issuer), sets up
the resources, forks the workers, and until the end of the run freezes a random worker
with SIGSTOP for 0 to 3x the TTL (at most half of them at once) and restarts Redis once,
half-way (without persistence: tokens must still increase, from the server clock); with
``ChaosConfig.url`` the workers use that issuer instead, and nothing is restarted. Then
it resumes everyone, waits for the workers, reads every resource's final state and hands
logs and states to the independent ``checker``.

Imports the chaos resources, worker and checker, and the throwaway servers.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...testing.servers import RedisServer
from . import checker
from .resources import FileResource, GuardResource, Resource, SqlRowResource
from .worker import WorkerConfig, log_path, run_worker


@dataclass
class ChaosConfig:
    workers: int = 8
    duration: float = 30.0
    ttl: float = 0.2
    window: float | None = None  # the read-modify-write window; default ttl / 4
    fenced: bool = True
    postgres_url: str | None = None
    restart_redis: bool = True
    seed: int | None = None
    workdir: Path | None = None
    url: str | None = None  # an issuer already running, instead of a throwaway Redis


@dataclass
class ChaosOutcome:
    report: checker.Report
    pauses: int = 0
    longest_pause: float = 0.0
    redis_restarted_at: float | None = None
    notes: list[str] = field(default_factory=list)


def _resources(spec: dict[str, Any], fenced: bool) -> list[Resource]:
    resources: list[Resource] = [
        FileResource(Path(spec["file"]), fenced),
        SqlRowResource("sql-row-sqlite", spec["sqlite"], 1, fenced),
    ]
    if spec.get("postgres"):
        resources.append(SqlRowResource("sql-row-postgresql", spec["postgres"], 1, fenced))
    resources.append(GuardResource(Path(spec["guard"]), fenced))
    return resources


def _worker_main(config: WorkerConfig, spec: dict[str, Any]) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    run_worker(config, _resources(spec, config.fenced))


def run_chaos(config: ChaosConfig, say: Callable[[str], None] = print) -> ChaosOutcome:
    rng = random.Random(config.seed)
    workdir = config.workdir or Path(tempfile.mkdtemp(prefix="fencing-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    window = config.window if config.window is not None else config.ttl / 4
    spec = {
        "file": str(workdir / "file-store.json"),
        "sqlite": f"sqlite:///{workdir / 'rows.db'}",
        "postgres": config.postgres_url,
        "guard": str(workdir / "guarded.json"),
    }
    for url in (spec["sqlite"], spec["postgres"]):
        if url:
            SqlRowResource.setup(url, [1])
    redis = RedisServer().start() if config.url is None else None
    issuer = f"Redis ({'restarted once' if config.restart_redis else 'never restarted'})"
    outcome = ChaosOutcome(report=checker.Report())
    mode = "fenced" if config.fenced else "UNFENCED"
    say(
        f"chaos ({mode}): {config.workers} workers, {config.duration:g}s, ttl {config.ttl:g}s, "
        f"read-modify-write window {window:g}s, resources: file-store, sql-row-sqlite"
        + (", sql-row-postgresql" if config.postgres_url else "")
        + f", callable-guard; issuer: {issuer if redis else config.url}"
    )
    started = time.monotonic()
    deadline = started + config.duration
    fence_name = f"chaos-{os.getpid()}-{rng.randrange(1 << 30)}"
    context = multiprocessing.get_context("fork")
    processes = []
    try:
        for index in range(config.workers):
            worker_config = WorkerConfig(
                index=index,
                redis_url=redis.url if redis else str(config.url),
                fence_name=fence_name,
                ttl=config.ttl,
                window=window,
                deadline=deadline,
                log_path=str(log_path(workdir, index)),
                fenced=config.fenced,
            )
            process = context.Process(target=_worker_main, args=(worker_config, spec))
            process.start()
            processes.append(process)
        _control(processes, redis, config, rng, started, deadline, outcome)
    finally:
        for process in processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGCONT)
        for process in processes:
            process.join(config.ttl * 6 + window * 8 + 10)
            if process.is_alive():
                process.kill()
                process.join()
        if redis is not None:
            redis.close()
    finals = {r.name: r.final() for r in _resources(spec, config.fenced)}
    records = checker.read_logs(log_path(workdir, i) for i in range(config.workers))
    outcome.report = checker.check(records, finals)
    say(
        f"pauses: {outcome.pauses} (longest {outcome.longest_pause:.2f}s = "
        f"{outcome.longest_pause / config.ttl:.1f} ttl); redis restarted at "
        + (f"{outcome.redis_restarted_at:.1f}s" if outcome.redis_restarted_at else "never")
    )
    say(outcome.report.summary())
    say(f"logs and final states in {workdir}")
    return outcome


def _control(
    processes: list[Any],
    redis: RedisServer | None,
    config: ChaosConfig,
    rng: random.Random,
    started: float,
    deadline: float,
    outcome: ChaosOutcome,
) -> None:
    frozen: dict[int, float] = {}  # pid -> when to resume
    restart = redis is not None and config.restart_redis
    restart_at = started + config.duration / 2 if restart else None
    limit = max(1, len(processes) // 2)
    while (now := time.monotonic()) < deadline:
        for pid, until in list(frozen.items()):
            if now >= until:
                os.kill(pid, signal.SIGCONT)
                del frozen[pid]
        if redis is not None and restart_at is not None and now >= restart_at:
            redis.restart()
            outcome.redis_restarted_at = time.monotonic() - started
            restart_at = None
        running = [p.pid for p in processes if p.pid not in frozen and p.is_alive()]
        if running and len(frozen) < limit:
            pid = rng.choice(running)
            length = rng.uniform(0, 3 * config.ttl)
            os.kill(pid, signal.SIGSTOP)
            frozen[pid] = time.monotonic() + length
            outcome.pauses += 1
            outcome.longest_pause = max(outcome.longest_pause, length)
        time.sleep(rng.uniform(0.2, 1.0) * config.ttl)
    for pid in frozen:
        os.kill(pid, signal.SIGCONT)
