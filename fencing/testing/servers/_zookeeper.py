"""ZooKeeper: a standalone server or a 3-server ensemble. Imports the shared server base."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ._base import ServerError, _Server, _wait_for_port, free_port

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
        return [member for member in self.members if member.running]

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
