"""What every throwaway server shares: a free port, waiting for it, a temporary
directory, stop / restart / freeze. Imports nothing from the package.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TypeVar


class ServerError(RuntimeError):
    """A throwaway server could not be started."""


#: Ports handed out are taken below Linux's ephemeral range (32768 and up by default), so
#: no outgoing connection can hold one between ``free_port()`` and the server's start.
_PORTS = range(10000, 32768)
#: One slice of ``_PORTS`` per pytest-xdist worker, so parallel workers never pick alike.
_SLICES = 8
_given: set[int] = set()


def _my_ports() -> range:
    """This process's slice of ``_PORTS``: by its pytest-xdist worker (``gw3``), else all."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return _PORTS
    width = len(_PORTS) // _SLICES
    start = _PORTS.start + int(worker[2:]) % _SLICES * width
    return range(start, start + width)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and that this process has not handed out
    before (a stopped server's port stays its own, for its restart)."""
    ports = _my_ports()
    for _ in range(len(ports)):
        port = random.choice(ports)
        if port in _given:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise ServerError(f"no free port in {ports}")


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


S = TypeVar("S", bound="_Server")


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

    def stop(self) -> None:
        """Stop the server (resuming it first if frozen); SIGKILL after 15 s."""
        if self.process is None:
            return
        if self.process.poll() is None:
            pid = self._pid()
            os.kill(pid, signal.SIGCONT)
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
