"""``fencing demo``: the pause scenario, live (see ``fencing.cli.demo.run``).

Imports the demo (and, for ``--plot``, the plotting module, which needs matplotlib); a
missing driver is reported by ``fencing.cli.main`` with the extra that brings it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="watch a paused lock holder's stale write being rejected",
        description=(
            "Kleppmann's scenario with two real processes: client 1 takes the lease and is "
            "frozen (SIGSTOP) past its TTL, client 2 takes the lease and writes, client 1 "
            "wakes (SIGCONT) and writes with its old token: the SQL row's guard refuses it. "
            "No server needed: the embedded SQLite default issues the tokens."
        ),
    )
    parser.add_argument(
        "--url",
        help=(
            "issuer URL: redis://..., or postgresql://... after `fencing migrate` "
            "(default: the embedded SQLite file)"
        ),
    )
    parser.add_argument(
        "--unfenced", action="store_true", help="write without the guard: see the lost update"
    )
    parser.add_argument(
        "--plot", metavar="FILE", help="also draw the timeline to FILE (.png or .svg; matplotlib)"
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="the resource is an HTTP service (fencing.http.FenceMiddleware; needs fencing[http])",
    )
    parser.add_argument(
        "--election",
        action="store_true",
        help=(
            "three candidate processes in an election: the leader is frozen (SIGSTOP) past "
            "its term, another is elected with a higher term, the old leader's write is refused"
        ),
    )
    parser.add_argument("--ttl", type=float, default=1.0, help="lease TTL in seconds (default 1.0)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.ttl <= 0 or args.ttl > 30:
        print("fencing demo: --ttl must be between 0 and 30 seconds", file=sys.stderr)
        return 2
    if args.plot is not None and not args.plot.lower().endswith((".png", ".svg")):
        print("fencing demo: --plot FILE must end in .png or .svg", file=sys.stderr)
        return 2
    if args.election:
        return _run_election(args)
    if args.plot is not None:  # before the demo runs: a missing matplotlib fails at once
        from .plot import plot_timeline
    from .run import format_timeline, run_demo

    try:
        result = run_demo(args.url, fenced=not args.unfenced, ttl=args.ttl, http=args.http)
    except (ValueError, TypeError, RuntimeError, TimeoutError) as error:
        print(f"fencing demo: {error}", file=sys.stderr)
        return 1
    print(format_timeline(result))
    if args.plot is not None:
        plot_timeline(result, args.plot)
        print(f"timeline picture written to {args.plot}")
    return 0 if result.as_expected else 1


def _run_election(args: argparse.Namespace) -> int:
    """``fencing demo --election`` (see ``fencing.cli.demo.election``)."""
    if args.unfenced or args.http or args.plot is not None:
        print(
            "fencing demo: --election takes only --url and --ttl (not --unfenced, --http, --plot)",
            file=sys.stderr,
        )
        return 2
    from .election import format_election, run_election_demo

    try:
        result = run_election_demo(args.url, ttl=args.ttl)
    except (ValueError, TypeError, RuntimeError, TimeoutError) as error:
        print(f"fencing demo: {error}", file=sys.stderr)
        return 1
    print(format_election(result))
    return 0 if result.as_expected else 1
