"""A throwaway ``redis-server``, optionally with its wall clock moved by libfaketime.
Imports the shared server base."""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence

from ._base import ServerError, _Server, _wait_for_port

#: An offset libfaketime reads, as this module accepts it: a sign, a number and a unit
#: (``s``, ``m``, ``h`` or ``d``; none: seconds), e.g. ``"-1h"``, ``"+90m"``, ``"+0"``.
_OFFSET = re.compile(r"^([+-])(\d+(?:\.\d+)?)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
#: How far the clock a server reports (``TIME``) may be from the offset asked for: the
#: check tells a shift that took from one that did not, not seconds apart.
CLOCK_TOLERANCE = 30.0


def offset_seconds(offset: str) -> float:
    """The seconds an offset like ``"-1h"`` moves a clock by; ``ValueError`` if it is not
    one this module passes to libfaketime."""
    found = _OFFSET.match(offset) if isinstance(offset, str) else None
    if found is None:
        raise ValueError(
            f"faketime offset must be a sign, a number and s/m/h/d, e.g. '-1h', not {offset!r}"
        )
    sign, number, unit = found.groups()
    return (-1 if sign == "-" else 1) * float(number) * _UNITS[unit]


def _library(patterns: Sequence[str], package: str) -> str:
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise ServerError(f"{patterns[0]} not found: install Debian's {package} package")


def faketime_preload() -> str:
    """``LD_PRELOAD`` for a process under libfaketime: glibc's ``libc_malloc_debug.so.0``
    first (else Debian's jemalloc ``redis-server`` dies with "recursive calls to
    clock_gettime"), then libfaketime. ``ServerError`` if either is missing."""
    debug = _library(
        ["/usr/lib/*/libc_malloc_debug.so.0", "/lib/*/libc_malloc_debug.so.0"], "libc6"
    )
    fake = _library(["/usr/lib/*/faketime/libfaketime.so.1"], "faketime")
    return f"{debug}:{fake}"


def server_time(port: int, timeout: float = 10.0) -> float:
    """The wall clock of the Redis server on ``port`` (its ``TIME``), in seconds."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(b"*1\r\n$4\r\nTIME\r\n")
        reply = b""
        while reply.count(b"\r\n") < 5:
            chunk = sock.recv(256)
            if not chunk:
                raise ServerError(f"redis-server on port {port} closed the connection")
            reply += chunk
    lines = reply.split(b"\r\n")  # *2, $n, seconds, $n, microseconds
    return int(lines[2]) + int(lines[4]) / 1e6


class RedisServer(_Server):
    """A ``redis-server`` on a free loopback port, in its own directory.

    ``persistent=True`` turns on the append-only file (fsync always), so a restart keeps
    the data; by default nothing is kept, like a cache that loses its counters. It
    publishes keyspace notifications of sets, deletions, expiries and evictions (what
    ``Election.observe`` waits on; the contract checks that an observer is woken).

    ``faketime="-1h"`` runs the server under libfaketime (Debian's ``faketime``
    package) with its **wall clock** that far off (``TIME``, key expiry, everything
    Redis reads from ``clock_gettime(CLOCK_REALTIME)``); the monotonic clock is left
    alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``: faking it breaks sleeps). The offset is
    read from a file on every clock call, so ``jump("+1h")`` moves the clock of the
    running server; ``start`` and ``jump`` check with ``TIME`` that the shift took
    (``ServerError`` if not). ``"+0"`` starts it on time, ready to jump. The offset:
    a sign, a number and ``s``/``m``/``h``/``d``.
    """

    def __init__(
        self,
        *,
        persistent: bool = False,
        binary: str = "redis-server",
        args: Sequence[str] = (),
        faketime: str | None = None,
    ) -> None:
        found = shutil.which(binary)
        if found is None:
            raise ServerError(f"{binary} not found on PATH")
        if faketime is not None:
            offset_seconds(faketime)  # a ValueError before anything starts
        self.binary = found
        self.persistent = persistent
        self.args = list(args)  # more options, e.g. ``--replicaof host port``
        self.faketime = faketime
        super().__init__("fencing-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def _faketime_file(self) -> str:
        return str(self.dir / "faketime.rc")

    def _write_offset(self, offset: str) -> None:
        """Replace the offset file at once (a rename: never read half-written)."""
        scratch = self._faketime_file + ".new"
        with open(scratch, "w") as out:
            out.write(offset + "\n")
        os.replace(scratch, self._faketime_file)

    def _environment(self) -> dict[str, str] | None:
        if self.faketime is None:
            return None
        self._write_offset(self.faketime)
        preload = faketime_preload()
        env = dict(os.environ)
        env["LD_PRELOAD"] = ":".join(filter(None, [preload, env.get("LD_PRELOAD", "")]))
        env["FAKETIME_TIMESTAMP_FILE"] = self._faketime_file
        env["FAKETIME_NO_CACHE"] = "1"  # read the file at every call: jump() takes at once
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        env.pop("FAKETIME", None)
        return env

    def start(self) -> RedisServer:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--save", "",
            "--appendonly", "yes" if self.persistent else "no",
            "--appendfsync", "always",
            "--logfile", str(self.dir / "redis.log"),
            # the lease keys' events, which Election.observe waits on (fencing.redis._watch)
            "--notify-keyspace-events", "Kg$xe",
            *self.args,
        ]  # fmt: skip
        env = self._environment()
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
        )
        _wait_for_port(self.port, self.process, "redis-server", 10.0)
        if self.faketime is not None:
            self._check_clock(self.faketime)
        return self

    def clock_offset(self) -> float:
        """How far the server's wall clock (``TIME``) is from this process's, in seconds."""
        before = time.time()
        theirs = server_time(self.port)
        return theirs - (before + time.time()) / 2

    def _check_clock(self, offset: str, timeout: float = 10.0) -> None:
        wanted = offset_seconds(offset)
        deadline = time.monotonic() + timeout
        while True:
            seen = self.clock_offset()
            if abs(seen - wanted) <= CLOCK_TOLERANCE:
                return
            if time.monotonic() > deadline:
                raise ServerError(
                    f"redis-server on port {self.port}: its clock is {seen:+.0f} s off, "
                    f"not {offset} ({wanted:+.0f} s): libfaketime did not take"
                )
            time.sleep(0.02)

    def jump(self, offset: str) -> None:
        """Move the running server's wall clock to ``offset`` from the real one (a server
        started with ``faketime=``), and check with ``TIME`` that it moved."""
        if self.faketime is None:
            raise ServerError("jump() needs a server started with faketime= (e.g. '+0')")
        offset_seconds(offset)
        self.faketime = offset
        self._write_offset(offset)
        if self.running:
            self._check_clock(offset)

    def freeze(self) -> None:
        """SIGSTOP the server: it keeps its sockets but answers nothing."""
        os.kill(self._pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)
