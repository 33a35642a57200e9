"""``fencing status [--lock] NAME... [--json] [--url URL]``: the state of fences (or, with
``--lock``, of locks kept as redis-py's ``Lock`` keeps them), for operators.

Imports the shared operators' helpers (``_operate``) only.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._operate import OK, add_url, as_json, as_text, checked_name, opened, reader, run_command

EXAMPLES = """\
examples:
  fencing status invoice:42
  fencing status --url redis://localhost:6379/0 invoice:42 report
  fencing status --json invoice:42 | jq '.expires_in'
  fencing status --lock --url redis://localhost:6379/0 invoice:42

Each line (or JSON object, one per line with --json) gives: held or free, the holder id,
the lease's token and seconds left, the queued waiters where the backend knows them
(Redis), and the last token issued. JSON keys: name, held, holder, token, expires_in,
last_token, waiters (null when unknown or not applicable). An election's fence
(fencing.Election) shows its leader's value in the text; its holder id ends "|VALUE".

--lock: NAME is a lock kept as redis-py's Lock keeps it (a fencing.FencedLock, or a
redis.lock.Lock): the Redis key NAME itself. The holder shown is its lock token; its
fence token is not stored with it (token null: the holder has it as lock.fence_token),
and last_token, the fence's counter, is at least that token.
exit codes: 0 done, 1 backend failed or not set up, 2 usage (with --lock: the key is
not a lock), 4 not inspectable (with --lock: no locks on that backend)."""


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
    parser.add_argument(
        "--lock",
        action="store_true",
        help="NAME is a lock kept as redis-py's Lock keeps it (FencedLock, redis.lock.Lock)",
    )
    add_url(parser)
    parser.set_defaults(func=lambda args: run_command("status", status, args))


def status(args: argparse.Namespace) -> int:
    names = [checked_name(name) for name in args.names]
    show = as_json if args.json else as_text
    with opened(args.url) as backend:
        read = reader(backend, lock=args.lock)
        for name in names:
            print(show(read(name)), flush=True)
    return OK
