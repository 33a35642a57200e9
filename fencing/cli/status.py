"""``fencing status [--lock | --rwlock | --semaphore [--permits N] | --limiter --per S
[--window W] [--limit N]] NAME... [--json] [--url URL]``: the state of fences (with
``--lock``, of locks kept as redis-py's ``Lock`` keeps them; with ``--rwlock``, of
read-write locks: the writer, or the readers and their epoch; with ``--semaphore``, of
every slot of a semaphore; with ``--limiter``, a rate limiter's use and reset time), for
operators.

Imports the shared operators' helpers (``_operate``), the semaphore's slot names and the
limiter's checks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from typing import Any

from .._primitives.limiter import WINDOWS, BaseLimiter, InspectsLimits
from .._primitives.semaphore import MAX_PERMITS, slot_name
from ..issuer import FenceStatus, Inspects
from ._operate import (
    OK,
    UNSUPPORTED,
    USAGE,
    CommandError,
    add_url,
    as_json,
    as_text,
    checked_name,
    inspector,
    opened,
    reader,
    run_command,
    rw_as_text,
    rw_operator,
    shown,
)

EXAMPLES = """\
examples:
  fencing status invoice:42
  fencing status --url redis://localhost:6379/0 invoice:42 report
  fencing status --json invoice:42 | jq '.expires_in'
  fencing status --lock --url redis://localhost:6379/0 invoice:42
  fencing status --rwlock --url redis://localhost:6379/0 catalog
  fencing status --semaphore --permits 3 render
  fencing status --limiter --per 1 --limit 5 --url redis://localhost partner-api

Each line (or JSON object, one per line with --json) gives: held or free, the holder id,
the lease's token and seconds left, the queued waiters where the backend knows them
(Redis), and the last token issued. JSON keys: name, held, holder, token, expires_in,
last_token, waiters (null when unknown or not applicable). An election's fence
(fencing.Election) shows its leader's value in the text; its holder id ends "|VALUE".

--lock: NAME is a lock kept as redis-py's Lock keeps it (a fencing.FencedLock, or a
redis.lock.Lock): the Redis key NAME itself. The holder shown is its lock token; its
fence token is not stored with it (token null: the holder has it as lock.fence_token),
and last_token, the fence's counter, is at least that token.

--rwlock: NAME is a read-write lock (backend.rwlock(NAME)): "written by HOLDER with
token T", or "read by N readers with epoch E" and each reader's holder id, each with its
seconds left; a writer whose waiting stops new readers; the last token issued. JSON
keys: name, held, mode ("write", "read" or null), token (the writer's, or the readers'
epoch), holders (holder id -> seconds left), waiting (the waiting writer's holder id),
last_token.

--semaphore: NAME is a semaphore; one line per slot (the slot's fence, {NAME}#slot<k>),
then "NAME: H of N slots held". Without --permits, the slots on record (every slot that
was ever taken); with it, slots 0 to N-1, those never taken shown free. JSON: one object
per slot, the keys above plus semaphore and slot.

--limiter: NAME is a rate limiter of window --window (sliding, the default, or fixed) of
--per seconds: how many admissions count now ("3 of 5 used" with --limit) and in how
many seconds that goes down (sliding: the oldest counted turns --per old; fixed: the
window ends), by the store's clock; nothing is admitted. JSON keys: limiter, window,
per, limit, used, resets_in, at (the store's time of the reading).
exit codes: 0 done, 1 backend failed or not set up, 2 usage (with --lock: the key is
not a lock), 4 not inspectable (with --lock: no locks on that backend; with --rwlock: no
read-write locks)."""


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
    parser.add_argument(
        "--rwlock",
        action="store_true",
        help="NAME is a read-write lock: its writer, or its readers and their epoch",
    )
    parser.add_argument(
        "--semaphore",
        action="store_true",
        help="NAME is a semaphore: the state of each of its slots",
    )
    parser.add_argument(
        "--permits",
        type=int,
        metavar="N",
        help="with --semaphore: the semaphore's permits (else the slots on record)",
    )
    parser.add_argument(
        "--limiter",
        action="store_true",
        help="NAME is a rate limiter: its use and reset time (needs --per)",
    )
    parser.add_argument("--per", type=float, metavar="S", help="with --limiter: its window")
    parser.add_argument(
        "--window", choices=WINDOWS, default="sliding", help="with --limiter (default sliding)"
    )
    parser.add_argument("--limit", type=int, metavar="N", help="with --limiter: its limit")
    add_url(parser)
    parser.set_defaults(func=lambda args: run_command("status", status, args))


def status(args: argparse.Namespace) -> int:
    names = [checked_name(name) for name in args.names]
    if args.semaphore + args.lock + args.rwlock + args.limiter > 1:
        raise CommandError(USAGE, "--semaphore, --lock, --rwlock and --limiter exclude each other")
    if args.limiter:
        return _limiters(args, names)
    if args.per is not None or args.limit is not None:
        raise CommandError(USAGE, "--per and --limit need --limiter")
    if args.permits is not None and not (args.semaphore and 1 <= args.permits <= MAX_PERMITS):
        raise CommandError(
            USAGE, f"--permits needs --semaphore and a count from 1 to {MAX_PERMITS}"
        )
    if args.semaphore:
        with opened(args) as backend:
            issuer = inspector(backend)
            for name in names:
                _semaphore(issuer, name, args.permits, args.json)
        return OK
    if args.rwlock:
        show_lock = as_json if args.json else rw_as_text
        with opened(args) as backend:
            operator = rw_operator(backend)
            for name in names:
                print(show_lock(operator.rw_status(name)), flush=True)
        return OK
    show = as_json if args.json else as_text
    with opened(args) as backend:
        read = reader(backend, lock=args.lock)
        for name in names:
            print(show(read(name)), flush=True)
    return OK


def _semaphore(issuer: Inspects, name: str, permits: int | None, lines_of_json: bool) -> None:
    """Each slot of the semaphore ``name``, then (in text) how many are held."""
    prefix = slot_name(name, 0)[:-1]  # "{name}#slot" (or "name{tag}#slot")
    if permits is None:
        found = (re.fullmatch(r"(0|[1-9][0-9]*)", n[len(prefix) :]) for n in issuer.names(prefix))
        slots = sorted({int(match[0]) for match in found if match})
    else:
        slots = list(range(permits))
    held = 0
    for slot in slots:
        state: FenceStatus = issuer.status(slot_name(name, slot))
        held += state.held
        if lines_of_json:
            print(json.dumps({"semaphore": name, "slot": slot, **dataclasses.asdict(state)}))
        else:
            print(f"{name} slot {slot}: {as_text(state).partition(': ')[2]}", flush=True)
    if not lines_of_json:
        print(f"{name}: {held} of {len(slots)} slots held", flush=True)


def _limiters(args: argparse.Namespace, names: list[str]) -> int:
    if args.per is None:
        raise CommandError(USAGE, "--limiter needs --per (the limiter's window, in seconds)")
    try:
        limit = 1 if args.limit is None else args.limit  # checked as a limiter's
        checked = [BaseLimiter(name, limit, args.per, args.window, float) for name in names]
    except (TypeError, ValueError) as exc:
        raise CommandError(USAGE, str(exc)) from exc
    with opened(args) as backend:
        store = backend.issuer
        if not isinstance(store, InspectsLimits):
            raise CommandError(UNSUPPORTED, f"{shown(backend.url)} keeps no rate limits to read")
        for limiter in checked:
            use = store.limit_use(limiter.name, limiter._args[2], limiter.window)
            if args.json:
                print(
                    json.dumps(
                        {
                            "limiter": limiter.name,
                            "window": limiter.window,
                            "per": limiter.per,
                            "limit": args.limit,
                            **dataclasses.asdict(use),
                        }
                    ),
                    flush=True,
                )
                continue
            used = f"{use.used} of {args.limit}" if args.limit else str(use.used)
            resets = "" if use.resets_in is None else f"; goes down in {use.resets_in:.3f} s"
            print(
                f"{limiter.name} ({limiter.window}, per {limiter.per:g} s): {used} used{resets}",
                flush=True,
            )
    return OK
