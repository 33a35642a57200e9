"""``fencing list [--prefix P] [--json] [--url URL]``: the fences that exist.

Imports the shared operators' helpers (``_operate``) only.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._operate import OK, add_url, as_json, inspector, opened, run_command

EXAMPLES = """\
examples:
  fencing list
  fencing list --prefix invoice: --url redis://localhost:6379/0
  fencing list --json | jq 'select(.held)'

Prints one fence name per line (SQL: every name ever used, sorted; Redis: every name
with a lease or a token counter, found by SCAN, never KEYS, in no particular order).
With --json, one object per fence with the keys of `fencing status --json`.
exit codes: 0 done, 1 backend failed or not set up, 2 usage, 4 not inspectable."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "list",
        help="list the fences that exist",
        description="List the fences known to the issuer (read only).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--prefix", default="", help="only names that start with this")
    parser.add_argument("--json", action="store_true", help="one status object per fence")
    add_url(parser)
    parser.set_defaults(func=lambda args: run_command("list", listing, args))


def listing(args: argparse.Namespace) -> int:
    with opened(args) as backend:
        issuer = inspector(backend)
        for name in issuer.names(args.prefix):
            print(as_json(issuer.status(name)) if args.json else name, flush=True)
    return OK
