"""A throwaway MariaDB server (Debian's ``mariadb-server``): its own data directory on a
free loopback port, no system service, the machine's own MariaDB never touched.

The data directory is made by ``mariadbd --bootstrap`` fed the system tables' SQL, as
``mariadb-install-db`` does, without the help tables, the ``sys`` schema and the GIS
procedures that it also loads: they take more than half of its 5 to 6 s here, and no
test reads them. Started as root, the server runs as the ``mysql`` user (``--user``), a
non-root one; it writes to the operating system at each commit but never syncs
(``innodb_flush_log_at_trx_commit=2``, ``innodb_flush_method=nosync``), so a killed
server keeps every commit and a test pays for no disk flush. Imports the shared server
base.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ._base import ServerError, _Server, _wait_for_port

#: The server binary and the system tables' SQL, where Debian's packages put them.
MARIADBD = Path("/usr/sbin/mariadbd")
_SHARE = Path("/usr/share/mysql")
_SYSTEM_TABLES = ("mysql_system_tables.sql", "mysql_system_tables_data.sql")

#: The options of the bootstrap and of the server: small, unsynced, no config files read.
_OPTIONS = (
    "--no-defaults",
    "--skip-log-bin",
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=16M",
    "--innodb-flush-log-at-trx-commit=2",
    "--innodb-flush-method=nosync",
    "--innodb-doublewrite=0",
)

#: What the tests log in as: a user of its own (no password, loopback only) and the
#: database of the SDK's tables.
USER = "fencing"
#: What the server logs once it accepts connections.
_READY = "ready for connections"
DATABASE = "fencing"


class MariaDBServer(_Server):
    """A MariaDB server in a temporary directory on a free loopback port.

    ``url`` (a property) is the SQLAlchemy URL of its ``fencing`` database through
    PyMySQL, as the user ``fencing`` (no password, from 127.0.0.1 only, every privilege:
    the tests create and drop databases). ``stop``/``restart`` shut it down cleanly,
    ``kill`` as a crash, ``freeze``/``thaw`` with SIGSTOP/SIGCONT.
    """

    def __init__(self) -> None:
        if not MARIADBD.exists() and shutil.which("mariadbd") is None:
            raise ServerError("mariadbd not found: install Debian's mariadb-server")
        super().__init__("fencing-mariadb-")
        self.data = self.dir / "data"
        self.data.mkdir()
        # a temporary directory of its own: servers bootstrapped side by side (a worker
        # each) in the shared /tmp once had one's temporary table removed under the other
        self._tmp = self.dir / "tmp"
        self._tmp.mkdir()
        self._user = ["--user=mysql"] if os.geteuid() == 0 else []
        if self._user:
            for path in (self.dir, self.data, self._tmp):
                shutil.chown(path, "mysql", "mysql")
        self._bootstrap()

    @property
    def binary(self) -> str:
        return str(MARIADBD) if MARIADBD.exists() else str(shutil.which("mariadbd"))

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the ``fencing`` database (PyMySQL)."""
        return self.url_for()

    def url_for(self, driver: str = "pymysql", database: str = DATABASE) -> str:
        """The URL of ``database`` through another ``driver`` (``aiomysql``)."""
        return f"mysql+{driver}://{USER}@127.0.0.1:{self.port}/{database}"

    def _bootstrap(self) -> None:
        sql = [
            "CREATE DATABASE IF NOT EXISTS mysql;",
            "USE mysql;",
            "SET @auth_root_socket=NULL;",
        ]
        for name in _SYSTEM_TABLES:
            sql.append((_SHARE / name).read_text())
        sql += [
            "FLUSH PRIVILEGES;",  # loads the grant tables just filled: CREATE USER needs them
            f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4;",
            f"CREATE USER '{USER}'@'127.0.0.1';",
            f"GRANT ALL ON *.* TO '{USER}'@'127.0.0.1';",
        ]
        args = [
            self.binary,
            *_OPTIONS,
            "--bootstrap",
            f"--datadir={self.data}",
            f"--tmpdir={self._tmp}",
            *self._user,
        ]
        result = subprocess.run(
            args, input="\n".join(sql), capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise ServerError(f"mariadbd --bootstrap failed: {result.stderr.strip()[-2000:]}")

    def start(self) -> MariaDBServer:
        args = [
            self.binary,
            *_OPTIONS,
            f"--datadir={self.data}",
            f"--tmpdir={self._tmp}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.dir / 'mariadb.sock'}",
            f"--pid-file={self.dir / 'mariadb.pid'}",
            f"--log-error={self.dir / 'error.log'}",
            "--skip-name-resolve",
            "--max-connections=300",
            *self._user,
        ]
        ready = self._log().count(_READY)
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for_port(self.port, self.process, "mariadbd", 30.0)
            # the port opens before the server has set up its signals: a SIGTERM then
            # would be lost, so wait for the log's "ready" of this start
            deadline = time.monotonic() + 30.0
            while self._log().count(_READY) == ready:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise ServerError("mariadbd did not get ready")
                time.sleep(0.02)
        except ServerError as exc:
            raise ServerError(f"{exc}: {self._log()[-2000:]}") from None
        return self

    def _log(self) -> str:
        log = self.dir / "error.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def kill(self) -> None:
        """Kill the server (SIGKILL), as a crash: what was committed survives a ``start``."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self._pid(), signal.SIGKILL)
            self.process.wait()
        self.stop()

    def freeze(self) -> None:
        """SIGSTOP the server: it keeps its connections but answers nothing."""
        os.kill(self._pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)
