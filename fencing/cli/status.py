"""``fencing status NAME... [--json] [--url URL]``: the state of fences, for operators.

Imports the shared operators' helpers (``_operate``) only.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._operate import OK, add_url, as_json, as_text, checked_name, inspector, run_command

EXAMPLES = """\
examples:
  fencing status invoice:42
  fencing status --url redis://localhost:6379/0 invoice:42 report
  fencing status --json invoice:42 | jq '.expires_in'

Each line (or JSON object, one per line with --json) gives: held or free, the holder id,
the lease's token and seconds left, the queued waiters where the backend knows them
(Redis), and the last token issued. JSON keys: name, held, holder, token, expires_in,
last_token, waiters (null when unknown or not applicable).
exit codes: 0 done, 1 backend failed or not set up, 2 usage, 4 not inspectable."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="show whether fences are held, by whom, with which token",
        description="Show the state of one or more fences (read only).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="+", metavar="NAME", help="fence names")
    parser.add_argument("--json", action="store_true", help="one JSON object per name")
    add_url(parser)
    parser.set_defaults(func=lambda args: run_command("status", status, args))


def status(args: argparse.Namespace) -> int:
    names = [checked_name(name) for name in args.names]
    issuer = inspector(args.url)
    show = as_json if args.json else as_text
    for name in names:
        print(show(issuer.status(name)), flush=True)
    return OK
