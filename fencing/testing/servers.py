"""Throwaway ``redis-server``, PostgreSQL and ZooKeeper instances on free loopback ports.

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

    def __init__(self, *, persistent: bool = False, binary: str = "redis-server") -> None:
        found = shutil.which(binary)
        if found is None:
            raise ServerError(f"{binary} not found on PATH")
        self.binary = found
        self.persistent = persistent
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


# -- ZooKeeper ------------------------------------------------------------------------------

#: Debian's ``zookeeper`` package: the server jar (its manifest lists the other jars).
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


def four_letter(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word (``ruok``, ``srvr``) and return the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer(_Server):
    """One ZooKeeper server (Debian's ``zookeeper`` package, a JVM): standalone, or a
    member of a ``ZooKeeperEnsemble`` (``peers``: the member id and quorum/election
    ports of every member, this one included).

    Its own data directory and generated ``zoo.cfg``; a small heap (``-Xmx128m``); no
    fsync of the transaction log (a throwaway server, like the PostgreSQL one); a 200 ms
    tick, so sessions may be as short as 0.4 s (``minSessionTimeout``) and as
    long as 60 s; the four-letter words ``ruok``, ``srvr`` and ``stat`` allowed.
    """

    TICK_MS = 200
    JAVA_OPTIONS = (
        "-Xmx128m", "-Xms16m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
        "-Dzookeeper.forceSync=no",
    )  # fmt: skip

    def __init__(self, *, myid: int = 0, peers: dict[int, tuple[int, int]] | None = None) -> None:
        java = shutil.which("java")
        if java is None:
            raise ServerError("java not found on PATH (install a JRE: default-jre-headless)")
        if not ZOOKEEPER_JAR.exists():
            raise ServerError(f"{ZOOKEEPER_JAR} not found (install Debian's zookeeper package)")
        self.java = java
        self.myid = myid
        self.peers = peers or {}
        super().__init__("fencing-zookeeper-")
        (self.dir / "data").mkdir()
        self._write_config()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"zookeeper://{self.hosts}"

    def _write_config(self) -> None:
        lines = [
            f"tickTime={self.TICK_MS}",
            "initLimit=25",
            "syncLimit=10",
            f"dataDir={self.dir / 'data'}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "4lw.commands.whitelist=ruok,srvr,stat",
            "admin.enableServer=false",
            "preAllocSize=1024",
            "snapCount=100000",
        ]
        if self.peers:
            (self.dir / "data" / "myid").write_text(f"{self.myid}\n")
            lines += [
                f"server.{sid}=127.0.0.1:{quorum}:{election}"
                for sid, (quorum, election) in sorted(self.peers.items())
            ]
        (self.dir / "zoo.cfg").write_text("\n".join(lines) + "\n")

    def start(self) -> ZooKeeperServer:
        """Start the JVM; wait only for the port (``ZooKeeperEnsemble`` waits for quorum)."""
        args = [
            self.java, *self.JAVA_OPTIONS,
            "-cp", str(ZOOKEEPER_JAR),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(self.dir / "zoo.cfg"),
        ]  # fmt: skip
        log = (self.dir / "server.log").open("ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        log.close()
        _wait_for_port(self.port, self.process, "zookeeper", 60.0)
        if not self.peers:
            self.wait_serving(60.0)
        return self

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` while it serves requests, else None."""
        try:
            answer = four_letter(self.port, "srvr")
        except OSError:
            return None
        for line in answer.splitlines():
            if line.startswith("Mode: "):
                return line.removeprefix("Mode: ").strip()
        return None

    def wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.mode() is None:
            if self.process is None or self.process.poll() is not None:
                raise ServerError(f"zookeeper exited; see {self.dir / 'server.log'}")
            if time.monotonic() > deadline:
                raise ServerError(f"zookeeper did not serve within {timeout}s")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the server (a crash: no clean shutdown); ``start`` brings it back."""
        if self.process is not None:
            os.kill(self._pid(), signal.SIGKILL)
            self.process.wait()
            self.process = None

    def freeze(self) -> None:
        """SIGSTOP the server: it keeps its sockets but answers nothing."""
        os.kill(self._pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)


class ZooKeeperEnsemble:
    """A ZooKeeper ensemble of ``size`` servers on loopback, for failover tests.

    ``start()`` waits until every member serves; ``leader()`` finds the leader (by
    ``srvr``), ``kill_leader()`` SIGKILLs it and waits until the others serve again.
    """

    def __init__(self, size: int = 3) -> None:
        peers = {sid: (free_port(), free_port()) for sid in range(1, size + 1)}
        self.members: list[ZooKeeperServer] = []
        try:
            for sid in peers:
                self.members.append(ZooKeeperServer(myid=sid, peers=peers))
        except BaseException:
            self.close()
            raise

    @property
    def hosts(self) -> str:
        return ",".join(member.hosts for member in self.members)

    @property
    def url(self) -> str:
        return f"zookeeper://{self.hosts}"

    def start(self) -> ZooKeeperEnsemble:
        try:
            for member in self.members:
                member.start()
            self.wait_serving(self.running())
        except BaseException:
            self.close()
            raise
        return self

    def running(self) -> list[ZooKeeperServer]:
        return [m for m in self.members if m.process is not None and m.process.poll() is None]

    def wait_serving(self, members: list[ZooKeeperServer], timeout: float = 60.0) -> None:
        """Until each of ``members`` serves (a quorum formed with it)."""
        deadline = time.monotonic() + timeout
        for member in members:
            member.wait_serving(max(1.0, deadline - time.monotonic()))

    def leader(self, timeout: float = 60.0) -> ZooKeeperServer:
        deadline = time.monotonic() + timeout
        while True:
            for member in self.running():
                if member.mode() == "leader":
                    return member
            if time.monotonic() > deadline:
                raise ServerError(f"no zookeeper leader within {timeout}s")
            time.sleep(0.05)

    def kill_leader(self) -> ZooKeeperServer:
        """SIGKILL the leader; return it once the others serve again (a new leader)."""
        leader = self.leader()
        leader.kill()
        self.wait_serving(self.running())
        return leader

    def heal(self) -> None:
        """Thaw every member and start those that were killed; wait until all serve."""
        for member in self.members:
            if member.process is None:
                member.start()
            else:
                member.thaw()
        self.wait_serving(self.members)

    def close(self) -> None:
        for member in self.members:
            member.close()

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
