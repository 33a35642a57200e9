"""``fencing release [--lock | --rwlock] NAME [--slot K] --force [--json] [--url URL]``:
end a stuck lease (or, with ``--lock``, a lock kept as redis-py's ``Lock`` keeps it; with
``--rwlock``, every lease of a read-write lock; with ``--slot``, one permit of the
semaphore ``NAME``), whoever holds it.

The issuer ends the lease and makes sure the next token is above the ended lease's in
one atomic step (``fencing.issuer.ForceReleases``; for a lock ``OperatesLocks``, for a
read-write lock ``OperatesReadWrites``), so
the evicted holder is refused at every guard once the next holder has written. Logged
on ``fencing.release``.
Imports the shared operators' helpers (``_operate``) and the logs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .._base.log import release_log
from .._primitives.semaphore import MAX_PERMITS, slot_name
from ..issuer import WRITE
from ._operate import (
    NOT_HELD,
    OK,
    USAGE,
    CommandError,
    add_url,
    as_json,
    checked_name,
    lock_operator,
    on_lock,
    opened,
    releaser,
    run_command,
    rw_operator,
    shown,
)

EXAMPLES = """\
examples:
  fencing release invoice:42 --force
  fencing release invoice:42 --force --url postgresql://app@db/app
  fencing status invoice:42 && fencing release invoice:42 --force --json
  fencing release --lock invoice:42 --force --url redis://localhost:6379/0
  fencing status --semaphore render && fencing release render --slot 1 --force
  fencing status --rwlock catalog && fencing release --rwlock catalog --force

It ends the live lease whoever holds it, and the next token is above the ended one, so
the evicted holder's writes are refused at every guard once the next holder has written;
its renew and release fail with LeaseLost. Queued waiters take the lease at their next
attempt. Without --force it changes nothing. With --json it prints the ended lease as
`fencing status --json` does (held false: there was none).

--lock: NAME is a lock kept as redis-py's Lock keeps it (a fencing.FencedLock, or a
redis.lock.Lock): the Redis key NAME, which it deletes whoever holds it. Its holder's
fence token is not stored with it, but the next token is above the fence's counter,
which every grant of the lock raised to its token, so above the evicted holder's; the
holder's release and extend raise LockNotOwnedError. A key that is no lock (not a
string) is refused. Queued FencedLock waiters take the lock within their `sleep`.

--rwlock: NAME is a read-write lock: it ends the writer's lease, or every reader's (the
whole epoch), and the next token is above their token, so the evicted holders are
refused at every guard once the next holder has claimed; their renew and release fail
with LeaseLost. A waiting writer stays first in line. With --json, the ended leases as
`fencing status --rwlock --json` prints them.

--slot K: NAME is a semaphore; it ends the permit of slot K (the slot's fence,
{NAME}#slot<K>), as for a fence: that slot's next token is above the evicted holder's,
the other slots are untouched. With --json, the ended lease plus semaphore and slot, as
`fencing status --semaphore --json` prints them.
exit codes: 0 released, 1 backend failed or not set up, 2 usage (no --force, a bad --slot),
3 not held (nothing changed), 4 the backend cannot force-release (with --lock: it keeps
no locks; with --rwlock: no read-write locks); with --lock, 2 also when the key is not a
lock (nothing changed)."""


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
    parser.add_argument(
        "--lock",
        action="store_true",
        help="NAME is a lock kept as redis-py's Lock keeps it (FencedLock, redis.lock.Lock)",
    )
    parser.add_argument(
        "--rwlock",
        action="store_true",
        help="NAME is a read-write lock: end its writer's or all its readers' leases",
    )
    parser.add_argument(
        "--slot",
        type=int,
        metavar="K",
        help="NAME is a semaphore: end the permit of its slot K",
    )
    add_url(parser)
    parser.set_defaults(func=lambda args: run_command("release", release, args))


def release(args: argparse.Namespace) -> int:
    name = checked_name(args.name)
    slot: int | None = args.slot
    if args.lock + args.rwlock + (slot is not None) > 1:
        raise CommandError(USAGE, "--lock, --rwlock and --slot exclude each other; nothing changed")
    if slot is not None:
        if not 0 <= slot < MAX_PERMITS:
            raise CommandError(
                USAGE, f"--slot must be from 0 to {MAX_PERMITS - 1}, not {slot}; nothing changed"
            )
        semaphore, name = name, slot_name(name, slot)
    if not args.force:
        raise CommandError(
            USAGE,
            f"refusing to release {name!r} without --force: it evicts whoever holds the "
            "lease (see `fencing status`); nothing changed",
        )
    if args.rwlock:
        return _release_rwlock(args, name)
    with opened(args) as backend:
        if args.lock:
            ended = on_lock(lock_operator(backend).force_release_lock, name)
        else:
            ended = releaser(backend).force_release(name)
    url = backend.url
    if args.json and slot is not None:
        print(json.dumps({"semaphore": semaphore, "slot": slot, **json.loads(as_json(ended))}))
    elif args.json:
        print(as_json(ended))
    what = f"slot {slot} of semaphore {semaphore!r} ({name!r})" if slot is not None else repr(name)
    if not ended.held:
        raise CommandError(NOT_HELD, f"{what} is not held on {shown(url)}; nothing changed")
    if args.lock:
        release_log.warning(
            "lock %r: held by lock token %s, force-released; next token above %s",
            name,
            ended.holder,
            ended.last_token,
        )
        evicted = f"evicted holder {ended.holder} (its lock token)"
        above = ended.last_token  # the counter: at least every token of the evicted holder
    else:
        release_log.warning(
            "fence %r: lease of token %s (holder %s) force-released",
            name,
            ended.token,
            ended.holder,
        )
        evicted = f"evicted holder {ended.holder} (token {ended.token})"
        above = ended.token
    if not args.json:
        print(
            f"released {'lock ' if args.lock else ''}{what} on {shown(url)}: {evicted}; "
            f"the next token will be above {above}, so that holder is refused at every "
            "guard once the next holder writes"
        )
    sys.stdout.flush()
    return OK


def _release_rwlock(args: argparse.Namespace, name: str) -> int:
    """``--rwlock``: end every lease of the read-write lock ``name``."""
    with opened(args) as backend:
        ended = rw_operator(backend).rw_force_release(name)
    url = backend.url
    if args.json:
        print(as_json(ended))
    if not ended.held:
        raise CommandError(NOT_HELD, f"{name!r} is not held on {shown(url)}; nothing changed")
    holders = ", ".join(sorted(ended.holders))
    release_log.warning(
        "rwlock %r: %s leases of token %s (holders %s) force-released",
        name,
        ended.mode,
        ended.token,
        holders,
    )
    if not args.json:
        count = len(ended.holders)
        evicted = (
            f"evicted writer {holders} (token {ended.token})"
            if ended.mode == WRITE
            else f"evicted {count} reader{'s' * (count != 1)} {holders} (epoch {ended.token})"
        )
        print(
            f"released read-write lock {name!r} on {shown(url)}: {evicted}; the next token "
            f"will be above {ended.token}, so they are refused at every guard once the next "
            "holder claims"
        )
    sys.stdout.flush()
    return OK
