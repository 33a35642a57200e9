"""A throwaway PostgreSQL cluster (Debian's binaries, run as a non-root user). Imports the
shared server base.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ._base import URL, ServerError, _Server, _wait_for_port, children, frozen


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
        # --no-sync: a throwaway cluster (it runs with fsync=off too); initdb's flush of
        # every file it wrote took 1.6 s of the 2.6 s it took (measured, a loaded machine)
        initdb = [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
        self._run([*initdb, "--no-sync"])

    @property
    def user(self) -> str:
        return "postgres"

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The postmaster *and its backends* frozen: stopping the postmaster alone leaves
        every open connection answering. ``runuser``, which stops itself when its child
        stops (as ``su`` does), is resumed too."""
        pid = self._pid()
        try:
            with frozen([pid, *children(pid)]):
                yield
        finally:
            self._resume_launcher()

    def _pid(self) -> int:
        """The postmaster's pid: ``runuser`` forks, and does not pass signals on."""
        pid_file = self.data / "postmaster.pid"
        if self._as_postgres and pid_file.exists():
            return int(pid_file.read_text().split("\n", 1)[0])
        return super()._pid()

    @property
    def url(self) -> URL:
        """The SQLAlchemy URL of the database with psycopg, for ``fencing.connect``."""
        return URL(self.url_for("psycopg"), self.url_for)

    def url_for(self, driver: str = "psycopg") -> str:
        """The SQLAlchemy URL of the database with another ``driver`` (``asyncpg``)."""
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
