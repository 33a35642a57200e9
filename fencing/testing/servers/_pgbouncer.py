"""A throwaway pgbouncer (Debian's package) in front of a PostgreSQL server, in session or
transaction pooling mode. Imports the shared server base.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ._base import URL, ServerError, _Server, _wait_for_port

#: The pooling modes pgbouncer knows.
POOL_MODES = ("session", "transaction", "statement")


def _pgbouncer_bin() -> str:
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")
    if found is None:
        raise ServerError("pgbouncer not found (Debian package pgbouncer)")
    return found


class PgBouncer(_Server):
    """pgbouncer on a free loopback port, pooling every database of the PostgreSQL on
    ``127.0.0.1:<postgres_port>`` as its ``user`` (``auth_type = any``: a client's user
    name and password are not checked, every server connection logs in as ``user``).

    ``pool_mode`` is ``session`` (a client keeps one server connection until it
    disconnects), ``transaction`` or ``statement`` (a server connection goes back to the
    pool after each transaction or statement). pgbouncer refuses to run as root: when we
    are root it drops to the ``postgres`` user itself (``-u postgres``), so the process we
    start is pgbouncer's own and signals reach it. ``url`` is the URL of ``database``
    through it.
    """

    def __init__(
        self,
        postgres_port: int,
        pool_mode: str = "session",
        *,
        user: str = "postgres",
        database: str = "fencing",
        pool_size: int = 50,
    ) -> None:
        if pool_mode not in POOL_MODES:
            raise ValueError(f"pool_mode must be one of {POOL_MODES}, not {pool_mode!r}")
        self.bin = _pgbouncer_bin()
        self.pool_mode = pool_mode
        self.postgres_port = postgres_port
        self.user = user
        self.database = database
        super().__init__("fencing-pgbouncer-")
        self._as_root = os.geteuid() == 0
        self.ini = self.dir / "pgbouncer.ini"
        self.ini.write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={postgres_port} user={user}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = any\n"
            f"pool_mode = {pool_mode}\n"
            f"default_pool_size = {pool_size}\n"
            f"max_client_conn = {4 * pool_size}\n"
            # psycopg and asyncpg send these at connect; pgbouncer must let them through
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\n"
        )
        if self._as_root:
            shutil.chown(self.dir, "postgres", "postgres")

    @property
    def log(self) -> Path:
        """pgbouncer's log file (its start-up failures are there)."""
        return self.dir / "pgbouncer.log"

    @property
    def url(self) -> URL:
        """The SQLAlchemy URL of ``database`` through this pgbouncer, with psycopg, for
        ``fencing.connect``."""
        return URL(self.url_for("psycopg"), self._old_url)

    def url_for(self, driver: str, database: str | None = None) -> str:
        """The SQLAlchemy URL of ``database`` (by default the one given at creation)
        through this pgbouncer, with ``driver``."""
        name = self.database if database is None else database
        return f"postgresql+{driver}://{self.user}@127.0.0.1:{self.port}/{name}"

    def _old_url(self, database: str, driver: str = "psycopg") -> str:
        """What the ``url(database, driver)`` method returned (deprecated)."""
        return self.url_for(driver, database)

    def start(self) -> PgBouncer:
        args = [self.bin, *(["-u", "postgres"] if self._as_root else []), str(self.ini)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for_port(self.port, self.process, "pgbouncer", 30.0)
        except ServerError as exc:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise ServerError(f"{exc}: {tail.strip()}") from exc
        return self
