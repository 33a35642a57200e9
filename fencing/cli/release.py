"""``fencing release NAME --force [--json] [--url URL]``: end a stuck lease, whoever holds it.

The issuer ends the lease and makes sure the next token is above the ended lease's in
one atomic step (``fencing.issuer.ForceReleases``), so the evicted holder is refused at
every guard once the next holder has written. Logged on ``fencing.release``.
Imports the shared operators' helpers (``_operate``) and the logs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._log import release_log
from ._operate import (
    NOT_HELD,
    OK,
    USAGE,
    CommandError,
    add_url,
    as_json,
    checked_name,
    releaser,
    run_command,
    shown,
)

EXAMPLES = """\
examples:
  fencing release invoice:42 --force
  fencing release invoice:42 --force --url postgresql://app@db/app
  fencing status invoice:42 && fencing release invoice:42 --force --json

It ends the live lease whoever holds it, and the next token is above the ended one, so
the evicted holder's writes are refused at every guard once the next holder has written;
its renew and release fail with LeaseLost. Queued waiters take the lease at their next
attempt. Without --force it changes nothing. With --json it prints the ended lease as
`fencing status --json` does (held false: there was none).
exit codes: 0 released, 1 backend failed or not set up, 2 usage (no --force),
3 not held (nothing changed), 4 the backend cannot force-release."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "release",
        help="end a fence's lease whoever holds it (needs --force)",
        description="End the current lease of NAME, whoever holds it, and make sure the "
        "next token is higher than the evicted holder's.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", metavar="NAME", help="the fence name")
    parser.add_argument(
        "--force", action="store_true", help="required: the holder is not asked, it is evicted"
    )
    parser.add_argument("--json", action="store_true", help="print the ended lease as JSON")
    add_url(parser)
    parser.set_defaults(func=lambda args: run_command("release", release, args))


def release(args: argparse.Namespace) -> int:
    name = checked_name(args.name)
    if not args.force:
        raise CommandError(
            USAGE,
            f"refusing to release {name!r} without --force: it evicts whoever holds the "
            "lease (see `fencing status`); nothing changed",
        )
    issuer, url = releaser(args.url)
    ended = issuer.force_release(name)
    if args.json:
        print(as_json(ended))
    if not ended.held:
        raise CommandError(NOT_HELD, f"{name!r} is not held on {shown(url)}; nothing changed")
    release_log.warning(
        "fence %r: lease of token %s (holder %s) force-released", name, ended.token, ended.holder
    )
    if not args.json:
        print(
            f"released {name!r} on {shown(url)}: evicted holder {ended.holder} (token "
            f"{ended.token}); the next token will be above {ended.token}, so that holder is "
            "refused at every guard once the next holder writes"
        )
    sys.stdout.flush()
    return OK
