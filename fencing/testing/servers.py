"""Throwaway ``redis-server`` and PostgreSQL instances on free loopback ports.

Used by the test suite, the chaos run and the benchmarks: each server lives in its own
temporary directory, so a test may stop, restart, flush or freeze (SIGSTOP) it without
touching anything else on the machine. Imports nothing from the package.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar


class ServerError(RuntimeError):
    """A throwaway server could not be started."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


class RedisServer(_Server):
    """A ``redis-server`` on a free loopback port, in its own directory.

    ``persistent=True`` turns on the append-only file (fsync always), so a restart keeps
    the data; by default nothing is kept, like a cache that loses its counters.
    """

    def __init__(
        self,
        *,
        persistent: bool = False,
        binary: str = "redis-server",
        args: Sequence[str] = (),
    ) -> None:
        found = shutil.which(binary)
        if found is None:
            raise ServerError(f"{binary} not found on PATH")
        self.binary = found
        self.persistent = persistent
        self.args = list(args)  # more options, e.g. ``--replicaof host port``
        super().__init__("fencing-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

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
            *self.args,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_for_port(self.port, self.process, "redis-server", 10.0)
        return self

    def freeze(self) -> None:
        """SIGSTOP the server: it keeps its sockets but answers nothing."""
        os.kill(self._pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)


def _postgres_bin() -> Path:
    for base in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (base / "initdb").exists():
            return base
    found = shutil.which("initdb")
    if found is None:
        raise ServerError("PostgreSQL server binaries (initdb) not found")
    return Path(found).parent


class PostgresServer(_Server):
    """A PostgreSQL cluster in a temporary directory on a free loopback port.

    PostgreSQL refuses to run as root, so when we are root the cluster is created and
    run as the ``postgres`` user. Authentication is ``trust`` on loopback only.
    """

    STOP_SIGNAL = signal.SIGINT  # "fast shutdown"

    def __init__(self, database: str = "fencing") -> None:
        self.bin = _postgres_bin()
        self.database = database
        super().__init__("fencing-pg-")
        self.data = self.dir / "data"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"])

    @property
    def user(self) -> str:
        return "postgres"

    def _pid(self) -> int:
        """The postmaster's pid: ``runuser`` forks, and does not pass signals on."""
        pid_file = self.data / "postmaster.pid"
        if self._as_postgres and pid_file.exists():
            return int(pid_file.read_text().split("\n", 1)[0])
        return super()._pid()

    def url(self, driver: str = "psycopg") -> str:
        return f"postgresql+{driver}://postgres@127.0.0.1:{self.port}/{self.database}"

    def _command(self, args: list[str]) -> list[str]:
        if self._as_postgres:
            return ["runuser", "-u", "postgres", "--", *args]
        return args

    def _run(self, args: list[str]) -> None:
        result = subprocess.run(self._command(args), capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ServerError(f"{args[0]} failed: {result.stderr.strip()}")

    def start(self) -> PostgresServer:
        args = [
            str(self.bin / "postgres"),
            "-D", str(self.data),
            "-p", str(self.port),
            "-h", "127.0.0.1",
            "-k", str(self.dir),
            "-c", "fsync=off",
            "-c", "max_connections=200",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            self._command(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_for_port(self.port, self.process, "postgres", 30.0)
        self._create_database()
        return self

    def _create_database(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            result = subprocess.run(
                self._command(
                    [
                        str(self.bin / "psql"),
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(self.port),
                        "-U",
                        "postgres",
                        "-d",
                        "postgres",
                        "-tAc",
                        f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'",
                    ]
                ),
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise ServerError(f"postgres not ready: {result.stderr.strip()}")
            time.sleep(0.1)
        if result.stdout.strip() != "1":
            self._run([
                str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                "-U", "postgres", self.database,
            ])  # fmt: skip
