"""The chaos controller: workers, SIGSTOP/SIGCONT pauses, issuer failures, the check.

``run_chaos(ChaosConfig(...))`` starts a throwaway issuer, sets up the resources, forks
the workers, and until the end of the run freezes a random worker with SIGSTOP for 0 to
3x the TTL (at most half of them at once) while the issuer fails on schedule. The first
worker to hold a lease also makes the staged pause (``worker``): frozen between a read
and its write, it is resumed (``_StagedPause``) only once another holder has written
with a newer token, so every run has a stale write for the guards to refuse, or to lose
an update unfenced. Then it
resumes everyone, waits for the workers, reads every resource's final state and hands
logs and states to the independent ``checker``. The issuers (``ChaosConfig.issuer``):

- ``redis``: a ``redis-server``, restarted once half-way (without persistence: tokens
  must still increase, from the server clock);
- ``etcd``: a 3-member etcd cluster whose leader is killed (SIGKILL) a third of the way
  in and restarted two thirds of the way in;
- ``redlock``: Redlock over three independent ``redis-server`` masters (``RedlockFence``),
  each restarted empty in turn (no persistence), a minority at a time, at a quarter, a
  half and three quarters of the run;
- with ``failover``: Redis behind Sentinel (a primary, a replica, three Sentinels); at a
  quarter of the run the replica is cut off until a worker has taken a lease from the
  primary alone, the primary is killed and the replica promoted (``_fail_over``), and
  the run goes on until a lease has been taken from it; ``failover.py`` runs that
  fenced and with both controls (unfenced, and the INCR-only issuer of ``incr_only``);
- with ``failover`` and ``cluster``: a Redis Cluster (3 masters, a replica each); the
  same with the replica of the master serving the fence's slot, promoted by
  ``CLUSTER FAILOVER TAKEOVER`` (``_fail_over_cluster``);
- ``ChaosConfig.url``: an issuer that is already running (no failures of ours).

Imports the chaos resources, worker and checker, and the throwaway servers.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import random
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...testing.servers import EtcdCluster, EtcdMember, RedisCluster, RedisServer, SentinelGroup
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
    issuer: str = "redis"  # or "etcd", "redlock" (see the module docstring)
    url: str | None = None  # an issuer already running, instead of a throwaway one
    seed: int | None = None
    workdir: Path | None = None
    #: Redis behind Sentinel instead: at a quarter of the run the replica is frozen and cut
    #: off, the primary is killed and the replica promoted (no restart then)
    failover: bool = False
    cluster: bool = False  # with ``failover``: a Redis Cluster instead of Sentinel
    incr_only: bool = False  # the INCR-only control issuer (``incr``) instead of fencing's


@dataclass
class ChaosOutcome:
    report: checker.Report
    pauses: int = 0
    longest_pause: float = 0.0
    redis_restarted_at: float | None = None
    started: float = 0.0  # time.monotonic() at the start of the run
    failover_at: float | None = None  # when the primary was killed (failover runs)
    promoted_after: float | None = None  # seconds until the replica was the primary
    issuer_events: list[tuple[float, str]] = field(default_factory=list)
    staged: str | None = None  # what the staged pause did, once it is over

    @property
    def promoted_at(self) -> float | None:
        """When (``time.monotonic``) the replica was the primary, once it is (failover runs)."""
        if self.failover_at is None or self.promoted_after is None:
            return None
        return self.started + self.failover_at + self.promoted_after


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


def _await_workers(processes: list[Any], logs: list[Path], limit: float = 60.0) -> None:
    """Wait until every worker has started (opened its log), a minute at most: on a
    loaded machine starting them takes seconds, which would otherwise eat the run (its
    pauses then froze workers that had not begun)."""
    deadline = time.monotonic() + limit
    while not all(log.exists() for log in logs) and time.monotonic() < deadline:
        if not all(process.is_alive() for process in processes):
            return  # one died at its start: the checker reports what the logs show
        time.sleep(0.01)


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
    outcome = ChaosOutcome(report=checker.Report())
    fence_name = f"chaos-{os.getpid()}-{rng.randrange(1 << 30)}"
    logs = [log_path(workdir, index) for index in range(config.workers)]
    acquisitions = _Acquisitions(logs)
    issuer = _ChaosIssuer.start(config, outcome, fence_name, acquisitions)
    mode = "fenced" if config.fenced else "UNFENCED"
    say(
        f"chaos ({mode}): {config.workers} workers, {config.duration:g}s, ttl {config.ttl:g}s, "
        f"read-modify-write window {window:g}s, resources: file-store, sql-row-sqlite"
        + (", sql-row-postgresql" if config.postgres_url else "")
        + f", callable-guard; issuer: {issuer.description}"
    )
    context = multiprocessing.get_context("fork")
    # shared with the forked workers, so that the run can go on until the staged pause is over
    deadline = context.RawValue(ctypes.c_double, time.monotonic() + config.duration)
    processes = []
    try:
        for index in range(config.workers):
            worker_config = WorkerConfig(
                index=index,
                redis_url=issuer.url,
                fence_name=fence_name,
                ttl=config.ttl,
                window=window,
                deadline=deadline,
                log_path=str(log_path(workdir, index)),
                fenced=config.fenced,
                incr_only=config.incr_only,
                staged=STAGED_RESOURCE,
                staged_claim=str(workdir / "staged.claim"),
            )
            process = context.Process(target=_worker_main, args=(worker_config, spec))
            process.start()
            processes.append(process)
        _await_workers(processes, logs)
        # the run, its pauses and the issuer's failures count from here
        started = outcome.started = time.monotonic()
        deadline.value = started + config.duration
        staged = _StagedPause([process.pid for process in processes], logs)
        _control(processes, issuer, config, rng, started, deadline, outcome, staged, acquisitions)
    finally:
        for process in processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGCONT)
        for process in processes:
            process.join(config.ttl * 6 + window * 8 + 10)
            if process.is_alive():
                process.kill()
                process.join()
        issuer.close()
    finals = {r.name: r.final() for r in _resources(spec, config.fenced)}
    records = checker.read_logs(log_path(workdir, i) for i in range(config.workers))
    outcome.report = checker.check(records, finals)
    events = "; ".join(f"{what} at {at:.1f}s" for at, what in outcome.issuer_events)
    say(
        f"pauses: {outcome.pauses} (longest {outcome.longest_pause:.2f}s = "
        f"{outcome.longest_pause / config.ttl:.1f} ttl); " + (events or "no issuer failures")
    )
    say(f"staged pause: {outcome.staged or 'no worker was frozen and then overtaken'}")
    say(outcome.report.summary())
    say(f"logs and final states in {workdir}")
    return outcome


def _control(
    processes: list[Any],
    issuer: _ChaosIssuer,
    config: ChaosConfig,
    rng: random.Random,
    started: float,
    deadline: ctypes.c_double,
    outcome: ChaosOutcome,
    staged: _StagedPause,
    acquisitions: _Acquisitions,
) -> None:
    frozen: dict[int, float] = {}  # pid -> when to resume
    failures = sorted(issuer.failures, key=lambda failure: failure[0])
    limit = max(1, len(processes) // 2)
    while (now := time.monotonic()) < deadline.value or _overtime(
        deadline, started, config, outcome, acquisitions
    ):
        for pid, until in list(frozen.items()):
            if now >= until:
                del frozen[pid]
                if not staged.holds(pid):  # a staged pause ends only once overtaken
                    os.kill(pid, signal.SIGCONT)
        while failures and now >= started + failures[0][0] * config.duration:
            _fail(failures.pop(0), started, outcome)
        if outcome.staged is None:
            outcome.staged = staged.resume_when_overtaken()
        # until it is over, the staged pause counts as one of the frozen: the others must
        # run, to take the lease and overtake it
        staging = [staged.pid] if staged.pid is not None and outcome.staged is None else []
        running = [
            p.pid
            for p in processes
            if p.pid not in frozen and p.pid not in staging and p.is_alive()
        ]
        if running and len(frozen) + len(staging) < limit:
            pid = rng.choice(running)
            length = rng.uniform(0, 3 * config.ttl)
            os.kill(pid, signal.SIGSTOP)
            frozen[pid] = time.monotonic() + length
            outcome.pauses += 1
            outcome.longest_pause = max(outcome.longest_pause, length)
        time.sleep(rng.uniform(0.2, 1.0) * config.ttl)
    for pid in frozen:
        os.kill(pid, signal.SIGCONT)
    for failure in failures:  # overdue on a slow machine: they still happen, last
        _fail(failure, started, outcome)


#: How long a run may go on past its duration until its staged pause is over and, in a
#: failover run, a lease has been taken from the promoted replica (a loaded machine, an
#: issuer that took long to fail over): then it ends without.
OVERTIME_GRACE = 60.0


def _overtime(
    deadline: ctypes.c_double,
    started: float,
    config: ChaosConfig,
    outcome: ChaosOutcome,
    acquisitions: _Acquisitions,
) -> bool:
    """At the deadline: move it on a little while the staged pause is not over yet, or a
    failover run has not yet taken a lease from the promoted replica (what makes the
    INCR-only control hand a token out again, on every run)."""
    now = time.monotonic()
    if now >= started + config.duration + OVERTIME_GRACE:
        return False
    promoted = outcome.promoted_at
    served = not config.failover or (promoted is not None and acquisitions.since(promoted))
    if outcome.staged is not None and served:
        return False
    deadline.value = now + 4 * config.ttl
    return True


class _Acquisitions:
    """The leases the workers' logs show taken: whether one was asked for after a moment
    (``time.monotonic``) and granted."""

    def __init__(self, logs: list[Path]) -> None:
        self.logs = logs

    def since(self, moment: float) -> bool:
        records = checker.read_logs(log for log in self.logs if log.exists())
        return any(r["kind"] == "acquire" and r["t0"] >= moment for r in records)

    def await_since(self, moment: float, limit: float) -> None:
        """Return once a lease asked for after ``moment`` has been granted, or after
        ``limit`` seconds (the workers all frozen or failing: the run reports that)."""
        deadline = time.monotonic() + limit
        while not self.since(moment) and time.monotonic() < deadline:
            time.sleep(0.01)


#: The resource of the staged pause: a SQL row (SQLite, in every run) keeps no
#: lock between its read and its write, so the other workers go on while it is frozen.
STAGED_RESOURCE = "sql-row-sqlite"


class _StagedPause:
    """Finds the worker frozen by the staged pause (``worker``: a ``staged`` record in its
    log) and resumes it once the logs show another worker's accepted write of the same
    resource with a newer token."""

    def __init__(self, pids: list[int | None], logs: list[Path]) -> None:
        self.pids, self.logs = pids, logs
        self.pid: int | None = None  # the staged worker's, once its record is in
        self._record: dict[str, Any] | None = None
        self._over = False

    def _find(self) -> dict[str, Any] | None:
        if self._record is None:
            for index, log in enumerate(self.logs):
                found = next((r for r in self._records([log]) if r["kind"] == "staged"), None)
                if found is not None:
                    self._record, self.pid = {**found, "index": index}, self.pids[index]
        return self._record

    def holds(self, pid: int) -> bool:
        """``pid`` is the staged worker and its pause is not over: no one else resumes it."""
        return self._find() is not None and pid == self.pid and not self._over

    def _stopped(self) -> bool:
        """The process is stopped (state ``T`` in ``/proc``): its SIGSTOP has landed."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rpartition(")")[2].split()[0] == "T"

    @staticmethod
    def _records(logs: list[Path]) -> list[dict[str, Any]]:
        return checker.read_logs(log for log in logs if log.exists())  # not all opened yet

    def resume_when_overtaken(self) -> str | None:
        """SIGCONT the staged worker if it is frozen and has been overtaken; what happened."""
        paused = self._find()
        if paused is None or self.pid is None or not self._stopped():
            return None
        others = [log for index, log in enumerate(self.logs) if index != paused["index"]]
        newer = [
            r
            for r in self._records(others)
            if r["kind"] == "write"
            and r["resource"] == paused["resource"]
            and r["outcome"] == "accepted"
            and r["token"] > paused["token"]
        ]
        if not newer:
            return None
        self._over = True
        os.kill(self.pid, signal.SIGCONT)
        return (
            f"worker {paused['index']} frozen between its read and its write of "
            f"{paused['resource']} with token {paused['token']}, resumed after worker "
            f"{newer[0]['worker']} wrote it with token {newer[0]['token']}"
        )


def _fail(
    failure: tuple[float, str, Callable[[], None]], started: float, outcome: ChaosOutcome
) -> None:
    """Make the issuer fail as scheduled, and note when."""
    _, what, act = failure
    act()
    outcome.issuer_events.append((time.monotonic() - started, what))
    if what == _REDIS_RESTART:
        outcome.redis_restarted_at = outcome.issuer_events[-1][0]


_REDIS_RESTART = "redis restarted"


class _ChaosIssuer:
    """The issuer of a run: its URL, its scheduled failures ``(fraction of the run, what,
    act)`` and how to stop it."""

    def __init__(
        self,
        url: str,
        description: str,
        failures: list[tuple[float, str, Callable[[], None]]],
        close: Callable[[], None],
    ) -> None:
        self.url = url
        self.description = description
        self.failures = failures
        self.close = close

    @classmethod
    def start(
        cls,
        config: ChaosConfig,
        outcome: ChaosOutcome,
        fence_name: str,
        acquisitions: _Acquisitions,
    ) -> _ChaosIssuer:
        if config.url is not None:
            return cls(config.url, config.url.partition("://")[0], [], lambda: None)
        if config.failover and config.cluster:
            return cls._cluster(config, outcome, fence_name, acquisitions)
        if config.failover:
            return cls._sentinel(config, outcome, acquisitions)
        if config.issuer == "etcd":
            return cls._etcd()
        if config.issuer == "redlock":
            return cls._redlock()
        if config.issuer != "redis":
            raise ValueError(f"unknown chaos issuer {config.issuer!r}: redis, etcd or redlock")
        redis = RedisServer().start()
        failures: list[tuple[float, str, Callable[[], None]]] = []
        if config.restart_redis:
            failures.append((0.5, _REDIS_RESTART, redis.restart))
        return cls(redis.url, "Redis (restarted once)", failures, redis.close)

    @classmethod
    def _etcd(cls) -> _ChaosIssuer:
        cluster = EtcdCluster().start()
        killed: list[EtcdMember] = []

        def kill() -> None:
            killed.append(cluster.kill_leader())

        def restart() -> None:  # not waiting: the workers find it back by themselves
            for member in killed:
                cluster.restart(member, timeout=None)

        return cls(
            cluster.url + "?timeout=3",
            "etcd, 3 members (the leader killed, later restarted)",
            [(1 / 3, "etcd leader killed", kill), (2 / 3, "etcd member restarted", restart)],
            cluster.close,
        )

    @classmethod
    def _redlock(cls) -> _ChaosIssuer:
        nodes: list[RedisServer] = []
        try:
            for _ in range(3):
                nodes.append(RedisServer().start())
        except BaseException:
            for node in nodes:
                node.close()
            raise
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in nodes)

        def close() -> None:
            for node in nodes:
                node.close()

        return cls(
            f"redis+redlock://{hosts}?socket_timeout=1&socket_connect_timeout=1",
            "Redlock on 3 Redis masters (each restarted empty in turn)",
            [
                (i / 4, f"redlock node {i} restarted empty", node.restart)
                for i, node in enumerate(nodes, start=1)
            ],
            close,
        )

    @classmethod
    def _sentinel(
        cls, config: ChaosConfig, outcome: ChaosOutcome, acquisitions: _Acquisitions
    ) -> _ChaosIssuer:
        group = SentinelGroup(down_after_ms=500).start()
        tokens = "INCR-only tokens" if config.incr_only else "Redis"
        return cls._failing_over(
            group.close,
            lambda: _fail_over(group, outcome, acquisitions),
            group.url + "?socket_timeout=1",
            f"{tokens} behind Sentinel (primary killed, a replica that missed writes promoted)",
            "sentinel failover begun",
        )

    @classmethod
    def _cluster(
        cls,
        config: ChaosConfig,
        outcome: ChaosOutcome,
        fence_name: str,
        acquisitions: _Acquisitions,
    ) -> _ChaosIssuer:
        cluster = RedisCluster(masters=3, replicas=1).start()
        tokens = "INCR-only tokens" if config.incr_only else "Redis"
        return cls._failing_over(
            cluster.close,
            lambda: _fail_over_cluster(cluster, fence_name, outcome, acquisitions),
            cluster.url + "?socket_timeout=1&socket_connect_timeout=1",
            f"{tokens} on a Redis Cluster, 3 masters (the fence's master killed, its replica "
            "that missed writes promoted)",
            "cluster failover begun",
        )

    @classmethod
    def _failing_over(
        cls,
        stop: Callable[[], None],
        fail_over: Callable[[], None],
        url: str,
        what: str,
        begun: str,
    ) -> _ChaosIssuer:
        """A run on servers that ``fail_over`` fails over, in a thread started a quarter
        into the run; closing waits for that thread, then stops the servers (``stop``)."""
        failover = threading.Thread(target=fail_over, name="chaos-failover", daemon=True)

        def close() -> None:
            if failover.is_alive():
                failover.join()
            stop()

        return cls(url, what, [(0.25, begun, failover.start)], close)


#: How long a failover waits, its replica cut off, for a lease granted by the primary
#: alone (the workers all frozen or failing that long: the failover goes on without)
LOST_WRITES_LIMIT = 30.0


def _fail_over(group: SentinelGroup, outcome: ChaosOutcome, acquisitions: _Acquisitions) -> None:
    """Freeze the replica and cut its link, wait until a worker has taken a lease from the
    primary alone (a write the replica never gets: an INCR the INCR-only control will hand
    out again), kill the primary, resume the replica, and wait until Sentinel has promoted
    it. In a thread: the pauses go on meanwhile."""
    group.freeze_replica()
    acquisitions.await_since(time.monotonic(), LOST_WRITES_LIMIT)
    group.kill_primary()
    outcome.failover_at = time.monotonic() - outcome.started
    group.thaw_replica()
    group.wait_for_failover(timeout=60.0)
    outcome.promoted_after = time.monotonic() - outcome.started - outcome.failover_at


def _fail_over_cluster(
    cluster: RedisCluster, fence_name: str, outcome: ChaosOutcome, acquisitions: _Acquisitions
) -> None:
    """``_fail_over`` on a Redis Cluster: freeze the replica of the master serving the
    fence's slot and cut its link (freezing alone does not stop the stream: the kernel
    buffers it), wait for a lease taken from the master alone, kill the master, thaw the
    replica and promote it (``CLUSTER FAILOVER TAKEOVER``); wait until every node sees it
    serving the slot."""
    master = cluster.master_for(fence_name)
    replica = cluster.replicas_of(master)[0]
    replica.freeze()
    cluster.cut_replication(master)
    acquisitions.await_since(time.monotonic(), LOST_WRITES_LIMIT)
    master.kill()
    outcome.failover_at = time.monotonic() - outcome.started
    replica.thaw()
    cluster.failover(replica)
    outcome.promoted_after = time.monotonic() - outcome.started - outcome.failover_at
