"""Run the benchmark suite: ``python benchmarks/run.py [--quick] [--only FAMILY ...]``.

One process starts a loopback redis-server and PostgreSQL (``fencing.testing.servers``),
pins itself and them to one CPU, runs each family with its variants interleaved in
rounds, prints a table per family (median, p99, ops/s, ratio to the family's floor),
checks the targets of issue 5 from those ratios, and writes JSON plus a PNG of the
hand-off latency distribution to ``benchmarks/results/`` (or ``--out``).

Imports the families, the harness and ``fencing.testing.servers``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import acquire
import advisory_family
import cluster
import etcd_family
import guards
import handoff
import limits_family
import redlock_family
import replicas
import report
import rwlock_family
import throughput
import web
import zookeeper_family
from fencing.testing.servers import PostgresServer, RedisServer
from harness import Context, Table, pin

FAMILIES = {
    "acquire": acquire.run,
    "handoff": handoff.run,
    "guards": guards.run,
    "throughput": throughput.run,
    "cluster": cluster.run,
    "replicas": replicas.run,
    "redlock": redlock_family.run,
    "etcd": etcd_family.run,
    "http": web.run,
    "zookeeper": zookeeper_family.run,
    "advisory": advisory_family.run,
    "limits": limits_family.run,
    "rwlock": rwlock_family.run,
}
RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~30 s run with fewer samples")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(FAMILIES), help="run only these families"
    )
    parser.add_argument(
        "--cpu",
        default="auto",
        help="CPU to pin client and servers to, 'none', or 'auto' (the highest-numbered)",
    )
    parser.add_argument("--out", type=Path, help="directory for the JSON and PNG")
    args = parser.parse_args(argv)
    if args.cpu == "auto":
        cpu: int | None = max(os.sched_getaffinity(0))
    else:
        cpu = None if args.cpu == "none" else int(args.cpu)
    pinning = pin(cpu)  # before the servers start, so they inherit the affinity
    families = args.only or list(FAMILIES)
    out = args.out or RESULTS
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    stamp = time.strftime("%Y%m%d-%H%M%S")  # names the output files: when the run began
    code = describe_code()
    changed = len(code["uncommitted"])
    dirty = f", {changed} uncommitted files in fencing/" if changed else ""
    print(
        f"fencing benchmarks ({'quick' if args.quick else 'full'} run) at {code['commit']}{dirty};"
        f" {pinning}"
    )
    with ExitStack() as stack:
        redis_server = stack.enter_context(RedisServer())
        postgres = _Postgres(cpu, stack) if {"guards", "advisory"} & set(families) else None
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fencing-bench-")))
        ctx = Context(
            args.quick, redis_server.url, postgres.url if postgres else _none, workdir, cpu
        )
        machine = describe_machine(redis_server.binary, pinning)
        tables: list[Table] = []
        errors: dict[str, str] = {}
        for family in families:
            t0 = time.monotonic()
            try:
                for table in FAMILIES[family](ctx):
                    tables.append(table)
                    print()
                    print(table.render(), flush=True)
            except Exception as exc:  # one broken family must not lose the others
                errors[family] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
                print(f"\n== {family} FAILED: {errors[family]}", flush=True)
            print(f"   ({family}: {time.monotonic() - t0:.1f} s)")
    verdicts = report.targets(tables)
    aa = report.noise(tables)
    print()
    print(report.render_targets(verdicts, aa))
    result: dict[str, Any] = {
        "run": "quick" if args.quick else "full",
        "started": stamp,
        "finished": time.strftime("%Y%m%d-%H%M%S"),
        "seconds": round(time.monotonic() - started, 1),
        "machine": machine,
        "code": code,
        "pinning": pinning,
        "cpu": cpu,
        "families": [t.to_json() for t in tables],
        "targets": verdicts,
        "noise_aa": aa,
        "errors": errors,
    }
    machine["loadavg_at_end"] = os.getloadavg()
    markdown = [*(t.to_markdown() for t in tables), report.targets_markdown(verdicts, aa)]
    (out / f"bench-{stamp}.md").write_text("\n\n".join(markdown) + "\n")
    json_path = out / f"bench-{stamp}.json"
    json_path.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nJSON: {json_path}")
    png = report.plot_handoff(tables, out / f"handoff-{stamp}.png", pinning)
    if png is not None:
        print(f"plot: {png}")
    print(f"total: {time.monotonic() - started:.1f} s")
    return 1 if errors else 0


def _none() -> None:
    return None


class _Postgres:
    """PostgreSQL for the SQL guards: ``initdb`` (slow: ~5-15 s) runs in a thread at once,
    on the other CPUs so it does not disturb the Redis families; ``url()`` then starts
    the server from the main thread, so the server inherits the pinning.
    """

    def __init__(self, cpu: int | None, stack: ExitStack) -> None:
        self._stack = stack
        self._pool = stack.enter_context(ThreadPoolExecutor(1))
        self._created = self._pool.submit(self._create, cpu)
        self._url: str | None = None

    @staticmethod
    def _create(cpu: int | None) -> PostgresServer:
        others = set(range(os.cpu_count() or 1)) - {cpu} if cpu is not None else set()
        if others:
            os.sched_setaffinity(0, others)  # pid 0 = this thread only (Linux)
        return PostgresServer()

    def url(self) -> str:
        if self._url is None:
            server = self._stack.enter_context(self._created.result())
            self._url = server.url
        return self._url


def describe_machine(redis_binary: str, pinning: str) -> dict[str, Any]:
    """The facts a reader needs to judge the numbers: CPUs, versions, load, pinning."""
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "redis_server": _version([redis_binary, "--version"]),
        "postgresql": _version([str(_pg_binary()), "--version"]),
        "loadavg_at_start": os.getloadavg(),
        "pinning": pinning,
    }


def describe_code() -> dict[str, Any]:
    """Which fencing was measured: the commit, and the files under fencing/ changed since."""
    root = Path(__file__).resolve().parent.parent
    head = _version(["git", "-C", str(root), "rev-parse", "--short", "HEAD"])
    status = _version(["git", "-C", str(root), "status", "--porcelain", "--", "fencing"])
    return {"commit": head, "uncommitted": status.splitlines()}


def _pg_binary() -> Path:
    from fencing.testing.servers import _postgres_bin

    return _postgres_bin() / "postgres"


def _version(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError as exc:
        return f"unknown ({exc})"


if __name__ == "__main__":
    sys.exit(main())
