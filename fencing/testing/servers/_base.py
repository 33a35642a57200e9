"""What every throwaway server shares: a free port, waiting for it, a temporary
directory, stop / restart / freeze. Imports nothing from the package.
"""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar


class ServerError(RuntimeError):
    """A throwaway server could not be started."""


#: Ports handed out are taken below Linux's ephemeral range (32768 and up by default), so
#: no outgoing connection can hold one between ``free_port()`` and the server's start.
_PORTS = range(10000, 32768)
#: A port handed out is claimed machine-wide for the life of the process that took it: an
#: exclusive ``flock`` on a file named after it here, so neither another pytest-xdist
#: worker nor a second test run on the same machine takes the port of a stopped server
#: before that server restarts on it. The kernel drops the claim when the process ends.
_CLAIMS = Path(tempfile.gettempdir()) / "fencing-test-ports"
_claimed: dict[int, int] = {}  # port -> the descriptor holding its claim


def _claim(port: int) -> bool:
    """Claim ``port`` for this process; False if another live process holds it."""
    _CLAIMS.mkdir(mode=0o777, exist_ok=True)
    fd = os.open(_CLAIMS / str(port), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _claimed[port] = fd
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and that no live process of any test run
    on this machine has handed out (a stopped server's port stays its own, for its
    restart)."""
    for _ in range(len(_PORTS)):
        port = random.choice(_PORTS)
        if port in _claimed:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if _claim(port):
            return port
    raise ServerError(f"no free port in {_PORTS}")


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"{what} exited with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise ServerError(f"{what} did not open port {port} within {timeout}s")


class URL(str):
    """A server's URL (``server.url``, a property on every server), still callable as
    ``server.url(...)``, the method it once was on PostgreSQL and pgbouncer: that call
    warns ``DeprecationWarning`` and returns what the method returned.

    It is a ``str`` to everything else (``fencing.connect(server.url)``), and pickles as
    a plain one, so a child process never receives the server behind it.
    """

    _make: Callable[..., str]

    def __new__(cls, url: str, make: Callable[..., str]) -> URL:
        self = super().__new__(cls, url)
        self._make = make
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        warnings.warn(
            "calling a server's url is deprecated: `url` is a property (a str); "
            "use url_for(driver) for another driver",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._make(*args, **kwargs)

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return (str, (str(self),))


S = TypeVar("S", bound="_Server")


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped: state ``T`` in ``/proc/PID/stat`` (its
    ``SIGSTOP`` has landed; until then it may still answer)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def children(pid: int) -> list[int]:
    """The ids of the processes whose parent is ``pid`` (PostgreSQL's backends)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # it exited meanwhile
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@contextmanager
def frozen(pids: Iterable[int], patience: float = 10.0) -> Iterator[None]:
    """Freeze the processes ``pids`` (SIGSTOP) for the ``with`` block: each is checked
    stopped in ``/proc`` before the block starts, and each is resumed (SIGCONT) on
    leaving, whatever happened. ``ServerError`` if one is not stopped within
    ``patience`` seconds."""
    stopping: list[int] = []
    try:
        for pid in pids:
            stopping.append(pid)
            os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + patience
        while not all(stopped(pid) for pid in stopping):
            if time.monotonic() > deadline:
                raise ServerError(f"processes {stopping} not all stopped after {patience}s")
            time.sleep(0.005)
        yield
    finally:
        for pid in stopping:
            os.kill(pid, signal.SIGCONT)


@contextmanager
def all_frozen(servers: Iterable[_Server]) -> Iterator[None]:
    """Every server of ``servers`` frozen for the ``with`` block (each ``frozen()``),
    all resumed on leaving."""
    with ExitStack() as stack:
        for server in servers:
            stack.enter_context(server.frozen())
        yield


class _Server:
    """A server process on a free loopback port, in a temporary directory of its own.

    Subclasses say how to start it (``start`` sets ``process``) and which signal stops
    it quickly; stopping, restarting and cleaning up are the same for all.
    """

    STOP_SIGNAL = signal.SIGTERM

    def __init__(self, prefix: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self: S) -> S:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        """True while the server's process has been started and has not exited."""
        return self.process is not None and self.process.poll() is None

    def _pid(self) -> int:
        """The server's own process id (subclasses whose launcher forks override it)."""
        if self.process is None:
            raise ServerError("server is not running")
        return self.process.pid

    def frozen(self) -> AbstractContextManager[None]:
        """The server frozen (SIGSTOP, checked stopped) for a ``with`` block, resumed on
        leaving it (see ``frozen``)."""
        return frozen([self._pid()])

    def _resume_launcher(self) -> None:
        """SIGCONT the process started, where it is a launcher of the server (``runuser``
        stops itself when the server is stopped, and would never reap it)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the server (resuming it first if frozen); SIGKILL after 15 s."""
        if self.process is None:
            return
        if self.process.poll() is None:
            pid = self._pid()
            os.kill(pid, signal.SIGCONT)
            self._resume_launcher()
            os.kill(pid, self.STOP_SIGNAL)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:  # redis-server's stderr pipe: close it with the process
                pipe.close()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
