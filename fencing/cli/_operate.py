"""What the operators' commands (``fencing status``, ``list``, ``release``) share: the
exit codes, the ``--url`` option, opening the issuer of a URL (or taking the one a host
program gives) and reporting a fence.

Exit codes, documented in docs/operations.md (scripts rely on them):

====  =====================================================================
0     done
1     the backend failed or is not set up (``FenceUnavailable``, ``FenceSetupError``)
2     usage: a bad option, URL or fence name; ``release`` without ``--force``; with
      ``--lock``, a name whose key is not a lock
3     ``release --force``: no lease was live, nothing changed
4     the backend cannot be inspected (its issuer lacks the capability; with ``--lock``,
      it keeps no redis-py-style locks; with ``--rwlock``, no read-write locks)
====  =====================================================================

Messages for a non-zero code go to stderr as ``fencing <command>: <what happened>``. A
reader that stops reading (``fencing list | head``) ends the output quietly, with 0.
A command opens its backend with ``opened`` and closes it when it ends, so it leaves no
session or channel behind (a kazoo client would go on reconnecting, and saying so on
stderr, once its servers went away).
Imports the core (``connect``, the errors, the issuer protocols) only; the backend is
loaded by ``connect`` from the URL's scheme.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from .._base.errors import FencingError
from .._base.validate import check_name
from .._connect import connect
from .._primitives.election import leader_of
from ..issuer import (
    WRITE,
    FenceStatus,
    ForceReleases,
    Inspects,
    OperatesLocks,
    OperatesReadWrites,
    RWStatus,
)

OK, FAILED, USAGE, NOT_HELD, UNSUPPORTED = 0, 1, 2, 3, 4


class CommandError(Exception):
    """Ends a command with ``code`` after printing ``message`` on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def add_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        help="the issuer's URL: redis://..., sqlite:///path, postgresql://... "
        "(default: $FENCING_URL, else the embedded SQLite file)",
    )


def shown(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@runtime_checkable
class _Closes(Protocol):
    """A backend that holds connections or a session until closed (Redis, etcd,
    ZooKeeper; a SQL backend's issuer is shared by the process, not closed)."""

    def close(self) -> None: ...


class Opened(NamedTuple):
    """A command's backend: its blocking issuer and its URL."""

    issuer: object
    url: str


@contextmanager
def opened(args: argparse.Namespace) -> Iterator[Opened]:
    """The backend a command operates: ``args.backend`` when the program running the
    command gave one (``manage.py fencing --database``: Django's own issuer), else the
    backend of ``args.url`` (``None``: ``connect``'s default), closed when the command
    is done with it (a backend from ``connect`` exposes its issuer as ``issuer``)."""
    given: Opened | None = getattr(args, "backend", None)
    if given is not None:
        yield given
        return
    url = args.url
    try:
        backend = connect(url)
    except (TypeError, ValueError) as exc:
        raise CommandError(USAGE, str(exc)) from exc
    except ImportError as exc:
        raise CommandError(FAILED, f"the backend of this URL is not installed: {exc}") from exc
    try:
        yield Opened(getattr(backend, "issuer", None), backend.url)
    finally:
        if isinstance(backend, _Closes):
            backend.close()


def inspector(backend: Opened) -> Inspects:
    """The backend's issuer if it can be inspected, else ``CommandError`` (exit 4)."""
    if not isinstance(backend.issuer, Inspects):
        raise CommandError(UNSUPPORTED, f"the issuer of {shown(backend.url)} cannot be inspected")
    return backend.issuer


def releaser(backend: Opened) -> ForceReleases:
    """The backend's issuer if it can force-release (else exit 4)."""
    if not isinstance(backend.issuer, ForceReleases):
        raise CommandError(UNSUPPORTED, f"the issuer of {shown(backend.url)} cannot force-release")
    return backend.issuer


def lock_operator(backend: Opened) -> OperatesLocks:
    """The backend's issuer if it operates redis-py-style locks (the ``--lock`` option;
    else exit 4)."""
    if not isinstance(backend.issuer, OperatesLocks):
        raise CommandError(
            UNSUPPORTED,
            f"the issuer of {shown(backend.url)} keeps no locks for --lock (FencedLock and "
            "redis.lock.Lock live on Redis)",
        )
    return backend.issuer


def rw_operator(backend: Opened) -> OperatesReadWrites:
    """The backend's issuer if it operates read-write locks (the ``--rwlock`` option;
    else exit 4)."""
    if not isinstance(backend.issuer, OperatesReadWrites):
        raise CommandError(
            UNSUPPORTED, f"the issuer of {shown(backend.url)} cannot operate read-write locks"
        )
    return backend.issuer


def on_lock(call: Callable[[str], FenceStatus], name: str) -> FenceStatus:
    """``call(name)`` of an ``OperatesLocks``; a key that is no lock is a usage error."""
    try:
        return call(name)
    except ValueError as exc:
        raise CommandError(USAGE, str(exc)) from exc


def reader(backend: Opened, *, lock: bool) -> Callable[[str], FenceStatus]:
    """What reads one name's status: the issuer's ``status``, or with ``lock`` its
    ``lock_status`` (exit 4 when the issuer has neither capability asked for)."""
    if lock:
        return partial(on_lock, lock_operator(backend).lock_status)
    return inspector(backend).status


def checked_name(name: str) -> str:
    try:
        return check_name(name)
    except ValueError as exc:
        raise CommandError(USAGE, str(exc)) from exc


def as_json(status: FenceStatus | RWStatus) -> str:
    """One fence (or read-write lock) as a JSON object on one line (the ``--json`` output)."""
    return json.dumps(dataclasses.asdict(status))


def as_text(status: FenceStatus) -> str:
    """One fence as one line of text."""
    if status.held:
        left = "no expiry" if status.expires_in is None else f"{status.expires_in:.3f} s left"
        state = f"held by {status.holder}"
        if status.token is not None:  # a lock's is not stored (``OperatesLocks``)
            state += f" with token {status.token}"
            leader = leader_of(status)
            if leader is not None and leader.value:  # a term of an election
                state += f" (election leader {leader.value!r})"
        state += f", {left}"
    else:
        state = "free"
    if status.waiters is not None:
        state += f"; {status.waiters} waiting"
    last = "none on record" if status.last_token is None else str(status.last_token)
    return f"{status.name}: {state}; last token {last}"


def rw_as_text(status: RWStatus) -> str:
    """One read-write lock as one line of text: the writer, or the readers and their
    epoch, each holder with its time left."""
    if status.held:
        leases = ", ".join(
            f"{holder} ({'no expiry' if left is None else f'{left:.3f} s left'})"
            for holder, left in sorted(status.holders.items())
        )
        if status.mode == WRITE:
            state = f"written by {leases} with token {status.token}"
        else:
            count = len(status.holders)
            state = (
                f"read by {count} reader{'s' * (count != 1)} with epoch {status.token}: {leases}"
            )
    else:
        state = "free"
    if status.waiting is not None:
        state += f"; writer {status.waiting} waiting (no new reader enters)"
    last = "none on record" if status.last_token is None else str(status.last_token)
    return f"{status.name}: {state}; last token {last}"


def run_command(
    command: str, body: Callable[[argparse.Namespace], int], args: argparse.Namespace
) -> int:
    """Run ``body(args)``; map its ``CommandError`` and backend errors to exit codes."""
    try:
        code = body(args)
    except CommandError as exc:
        print(f"fencing {command}: {exc}", file=sys.stderr)
        return exc.code
    except FencingError as exc:
        print(f"fencing {command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return FAILED
    except BrokenPipeError:  # the reader stopped reading (`fencing list | head`): fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the exit's flush does not fail again
        os.close(devnull)
        return OK
    return code
