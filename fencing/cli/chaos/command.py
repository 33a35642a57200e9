"""``fencing chaos``: the real-process chaos run (see ``fencing.cli.chaos``).

Needs ``redis-server`` on PATH (``--issuer etcd``: Debian's ``etcd-server``; ``--url``:
neither), and PostgreSQL binaries for the PostgreSQL row, else that resource is left
out. Imports the chaos runner and the throwaway servers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "chaos",
        help="run workers under random SIGSTOP pauses and a Redis restart; check invariants",
        description=(
            "N worker processes loop acquire -> read-modify-write on each guarded resource "
            "-> release while random workers are frozen (SIGSTOP) for 0 to 3x the TTL and "
            "Redis is restarted once (or, with --failover, a Sentinel failover loses writes; "
            "with --failover --cluster, a Redis Cluster failover). "
            "An independent checker replays the log. Exit 1 on any violation (with "
            "--unfenced, violations are the expected lesson)."
        ),
    )
    parser.add_argument("--workers", type=int, default=8, help="worker processes (default 8)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
    parser.add_argument("--ttl", type=float, default=0.2, help="lease TTL (default 0.2 s)")
    parser.add_argument(
        "--postgres",
        default="auto",
        metavar="URL|auto|none",
        help="PostgreSQL for the SQL row: a URL, 'auto' (a throwaway server), or 'none'",
    )
    parser.add_argument(
        "--issuer",
        choices=["redis", "etcd", "redlock"],
        default="redis",
        help="throwaway issuer: redis (restarted once, the default), etcd (3 members, the "
        "leader killed, later restarted; use --ttl 1 or more: etcd leases are whole seconds) "
        "or redlock (3 Redis masters, each restarted empty in turn)",
    )
    parser.add_argument(
        "--url", help="run on an issuer already running (e.g. etcd://h1:2379,h2:2379) instead"
    )
    parser.add_argument("--unfenced", action="store_true", help="switch the guards off")
    parser.add_argument(
        "--failover",
        action="store_true",
        help=(
            "Redis behind Sentinel: kill the primary and promote a replica that missed "
            "writes, instead of a restart; runs fenced, then the unfenced and INCR-only "
            "controls, and prints the figures (exit 1 unless fenced is clean and both "
            "controls show violations)"
        ),
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help=(
            "with --failover: a Redis Cluster (3 masters, a replica each) instead of "
            "Sentinel; the master serving the fence's slot is killed and its replica, "
            "which missed writes, promoted (CLUSTER FAILOVER TAKEOVER)"
        ),
    )
    parser.add_argument("--seed", type=int, help="seed of the pause schedule")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.workers < 2 or args.workers > 64:
        print("fencing chaos: --workers must be between 2 and 64", file=sys.stderr)
        return 2
    if not 0.05 <= args.ttl <= 10 or not 1 <= args.duration <= 24 * 3600:
        print("fencing chaos: --ttl must be 0.05-10 s and --duration 1 s-24 h", file=sys.stderr)
        return 2
    if args.cluster and not args.failover:
        print("fencing chaos: --cluster goes with --failover", file=sys.stderr)
        return 2
    from ...testing.servers import PostgresServer, ServerError
    from .failover import run_failover_proof
    from .runner import ChaosConfig, run_chaos

    server = None
    url = None if args.postgres == "none" else args.postgres
    if args.postgres == "auto":
        try:
            server = PostgresServer().start()
            url = server.url
        except ServerError as error:
            print(f"fencing chaos: no PostgreSQL row ({error})")
            url = None
    try:
        config = ChaosConfig(
            workers=args.workers,
            duration=args.duration,
            ttl=args.ttl,
            fenced=not args.unfenced,
            postgres_url=url,
            seed=args.seed,
            issuer=args.issuer,
            url=args.url,
            cluster=args.cluster,
        )
        if args.failover:
            return 0 if run_failover_proof(config).ok else 1
        outcome = run_chaos(config)
    finally:
        if server is not None:
            server.close()
    return 0 if outcome.report.ok else 1
