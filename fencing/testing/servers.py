"""Throwaway ``redis-server``, PostgreSQL and etcd (a 3-member cluster) on free loopback ports.

Used by the test suite, the chaos run and the benchmarks: each server lives in its own
temporary directory, so a test may stop, restart, flush or freeze (SIGSTOP) it without
touching anything else on the machine. ``SentinelGroup`` starts a primary, a replica
and three Sentinels for failover tests. Imports nothing from the package.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar


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


# -- Redis Sentinel: a primary, a replica and three Sentinels ------------------------------


class SentinelServer(_Server):
    """One ``redis-server --sentinel`` watching ``service`` on ``primary``.

    Debian's ``redis-server`` is also the Sentinel (``redis-sentinel`` is a link to it),
    so no other package is needed. Its configuration file is written into its own
    directory (Sentinel rewrites it). ``known`` are the other Sentinels and replicas,
    written in as ``known-sentinel``/``known-replica`` lines, so a fresh group knows
    itself at once instead of after a few hello messages.
    """

    def __init__(self, service: str, primary: int, down_after_ms: int, binary: str) -> None:
        super().__init__("fencing-sentinel-")
        self.binary = binary
        self.service = service
        self.primary = primary
        self.down_after_ms = down_after_ms
        self.myid = os.urandom(20).hex()
        self.known: list[str] = []

    def start(self) -> SentinelServer:
        conf = self.dir / "sentinel.conf"
        conf.write_text(
            "\n".join([
                f"port {self.port}",
                "bind 127.0.0.1",
                f"dir {self.dir}",
                f"logfile {self.dir / 'sentinel.log'}",
                f"sentinel myid {self.myid}",
                f"sentinel monitor {self.service} 127.0.0.1 {self.primary} 2",
                f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}",
                f"sentinel failover-timeout {self.service} {max(3 * self.down_after_ms, 2000)}",
                f"sentinel parallel-syncs {self.service} 1",
                *self.known,
                "",
            ])
        )  # fmt: skip
        self.process = subprocess.Popen(
            [self.binary, str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _wait_for_port(self.port, self.process, "redis-server --sentinel", 10.0)
        return self


def _client(port: int) -> Any:
    """A short-lived redis-py client of the server on ``port`` (redis-py is needed only here)."""
    import redis

    return redis.Redis(port=port, socket_timeout=2, socket_connect_timeout=2, decode_responses=True)


class SentinelGroup:
    """A primary, one replica and three Sentinels on free loopback ports (``service``).

    ``start()`` returns once the replica is in sync and every Sentinel knows the
    primary, the replica and the two other Sentinels. ``down_after_ms`` is how long a
    silent primary takes to be judged down, so a failover takes about twice that.
    ``url`` is the ``redis+sentinel://`` URL of the group for ``fencing.connect``.
    For failover tests: ``freeze_replica`` (SIGSTOP it and cut its link on the primary,
    so it misses what follows: see docs/design.md, *Testing a failover that loses
    writes*), ``kill_primary`` (SIGKILL), ``thaw_replica``, ``wait_for_failover``.
    """

    def __init__(
        self, service: str = "fencing", *, down_after_ms: int = 1000, binary: str = "redis-server"
    ) -> None:
        found = shutil.which(binary)
        if found is None:
            raise ServerError(f"{binary} not found on PATH")
        self.service = service
        self.down_after_ms = down_after_ms
        quick = ["--repl-diskless-sync-delay", "0"]  # a replica syncs at once, not after 5 s
        self.primary = RedisServer(binary=found, args=quick)
        self.replica = RedisServer(
            binary=found, args=[*quick, "--replicaof", "127.0.0.1", str(self.primary.port)]
        )
        self.sentinels = [
            SentinelServer(service, self.primary.port, down_after_ms, found) for _ in range(3)
        ]
        for sentinel in self.sentinels:
            sentinel.known = [
                f"sentinel known-replica {service} 127.0.0.1 {self.replica.port}",
                *(
                    f"sentinel known-sentinel {service} 127.0.0.1 {other.port} {other.myid}"
                    for other in self.sentinels
                    if other is not sentinel
                ),
            ]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The Sentinels' ``(host, port)`` pairs, as ``redis.sentinel.Sentinel`` takes them."""
        return [("127.0.0.1", s.port) for s in self.sentinels]

    def start(self) -> SentinelGroup:
        try:
            self.primary.start()
            self.replica.start()
            for sentinel in self.sentinels:
                sentinel.start()
            self._wait(self._ready, 20.0, "replica in sync and Sentinels aware of each other")
        except BaseException:
            self.close()
            raise
        return self

    def _acknowledged(self) -> bool:
        """Whether the replica acknowledges a write to the primary (WAIT)."""
        with _client(self.primary.port) as primary:
            primary.set("fencing:sentinel-group:ready", 1, px=1000)
            return bool(primary.wait(1, 100) == 1)

    def _ready(self) -> bool:
        if not self._acknowledged():
            return False
        for sentinel in self.sentinels:
            with _client(sentinel.port) as client:
                state = client.sentinel_master(self.service)
            if state["num-slaves"] != 1 or state["num-other-sentinels"] != 2:
                return False
        return True

    def primary_port(self) -> int:
        """The port of the primary as the first Sentinel sees it now."""
        with _client(self.sentinels[0].port) as sentinel:
            return int(sentinel.sentinel_get_master_addr_by_name(self.service)[1])

    def freeze_replica(self) -> None:
        """SIGSTOP the replica and cut its link: it misses every write from now on."""
        self.replica.freeze()
        with _client(self.primary.port) as primary:
            primary.client_kill_filter(_type="replica")

    def thaw_replica(self, *, rejoin: bool = False) -> None:
        """SIGCONT the replica; with ``rejoin``, return once it acknowledges the primary's
        writes again (it reconnects within a second or so)."""
        self.replica.thaw()
        if rejoin:
            self._wait(self._acknowledged, 10.0, "replica acknowledging again")

    def kill_primary(self) -> None:
        """SIGKILL the primary: no goodbye to clients, replica or Sentinels."""
        process = self.primary.process
        if process is not None:
            process.kill()
            process.wait()

    def wait_for_failover(self, timeout: float = 30.0) -> None:
        """Return once every Sentinel names the replica as a healthy primary (a client asks
        them in turn: one that still has the old view would answer "no primary") and it
        accepts writes."""

        def promoted() -> bool:
            for sentinel in self.sentinels:
                with _client(sentinel.port) as client:
                    state = client.sentinel_master(self.service)
                if int(state["port"]) != self.replica.port or not state["is_master"]:
                    return False
                if state["is_sdown"] or state["is_odown"] or state["is_disconnected"]:
                    return False
            with _client(self.replica.port) as replica:
                return bool(replica.info("replication")["role"] == "master")

        self._wait(promoted, timeout, "the replica promoted")

    @staticmethod
    def _wait(done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if done():
                    return
            except Exception:  # a server starting or just killed: ask again
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"Sentinel group: not {what} within {timeout}s")
            time.sleep(0.05)

    def close(self) -> None:
        for server in [*self.sentinels, self.replica, self.primary]:
            server.close()

    def __enter__(self) -> SentinelGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- etcd: a 3-member cluster ------------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    """PEM files of a throwaway CA, a server certificate for 127.0.0.1 and a client one."""

    ca: Path
    server: Path
    server_key: Path
    client: Path
    client_key: Path

    @classmethod
    def make(cls, directory: Path) -> Certificates:
        """Create them in ``directory`` with the ``openssl`` command (EC P-256, 1 day)."""
        openssl = shutil.which("openssl")
        if openssl is None:
            raise ServerError("openssl not found on PATH")

        def run(*args: str) -> None:
            result = subprocess.run([openssl, *args], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise ServerError(f"openssl {args[0]}: {result.stderr.strip()}")

        d = directory
        key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        run("req", "-x509", *key, "-keyout", str(d / "ca-key.pem"), "-out", str(d / "ca.pem"),
            "-days", "1", "-subj", "/CN=fencing test CA")  # fmt: skip
        for name, usage in (("server", "serverAuth"), ("client", "clientAuth")):
            ext = d / f"{name}.ext"
            ext.write_text(f"subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n")
            run("req", *key, "-keyout", str(d / f"{name}-key.pem"), "-out",
                str(d / f"{name}.csr"), "-subj", f"/CN=fencing test {name}")  # fmt: skip
            run("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"),
                "-CAkey", str(d / "ca-key.pem"), "-CAcreateserial", "-days", "1",
                "-extfile", str(ext), "-out", str(d / f"{name}.pem"))  # fmt: skip
        return cls(
            d / "ca.pem", d / "server.pem", d / "server-key.pem", d / "client.pem",
            d / "client-key.pem",
        )  # fmt: skip

    def context(self) -> ssl.SSLContext:
        """An SSL context that trusts the CA and presents the client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client), str(self.client_key))
        return context


def _etcd_post(
    base: str, path: str, timeout: float, context: ssl.SSLContext | None = None
) -> dict[str, object]:
    """POST ``{}`` to the etcd JSON gateway of a member (``/v3/...``); its reply, decoded."""
    request = urllib.request.Request(
        f"{base}{path}", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout, context=context) as reply:
        decoded: dict[str, object] = json.loads(reply.read())
        return decoded


def _memory_dir(needed: int = 1 << 30) -> str | None:
    """``/dev/shm`` when it has ``needed`` bytes free (each etcd member preallocates a
    64 MiB write-ahead log), else ``None``: the system's temporary directory."""
    try:
        stats = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if stats.f_bavail * stats.f_frsize >= needed else None


class EtcdMember:
    """One member of an ``EtcdCluster``: its ports, directory and process."""

    def __init__(self, name: str, data: Path) -> None:
        self.name = name
        self.data = data
        self.client_port = free_port()
        self.peer_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: signal.Signals) -> None:
        if self.process is None:
            raise ServerError(f"etcd member {self.name} is not running")
        os.kill(self.process.pid, signum)


class EtcdCluster:
    """A real 3-member etcd cluster (Debian's ``etcd-server``) on free loopback ports.

    The members keep their data under one temporary directory (in ``/dev/shm`` when the
    machine has room there: etcd fsyncs every commit, and a tmpfs makes that cheap). Raft runs
    with a 50 ms heartbeat and a 500 ms election timeout, so a new leader is elected
    within about a second of a leader's death, and the smallest lease the cluster grants
    is 1 s (etcd's floor is 1.5 election timeouts, rounded up to whole seconds).
    ``kill_leader`` (SIGKILL), ``freeze``/``thaw`` (SIGSTOP/SIGCONT) and ``restart``
    act on single members, so tests can take the cluster through failures;
    ``extra_args`` go to every member's command line, ``etcdctl`` runs Debian's
    ``etcdctl`` (package etcd-client) against the cluster.
    """

    HEARTBEAT_MS = 50
    ELECTION_MS = 500

    def __init__(
        self,
        size: int = 3,
        *,
        binary: str = "etcd",
        extra_args: tuple[str, ...] = (),
        tls: bool = False,
    ) -> None:
        found = shutil.which(binary)
        if found is None:
            raise ServerError(f"{binary} not found on PATH (Debian package etcd-server)")
        self.binary = found
        self.dir = Path(tempfile.mkdtemp(prefix="fencing-etcd-", dir=_memory_dir()))
        self.members = [EtcdMember(f"m{i}", self.dir / f"m{i}") for i in range(size)]
        self.extra_args = extra_args
        self.certificates = Certificates.make(self.dir) if tls else None
        self._context = None if self.certificates is None else self.certificates.context()
        self._scheme = "http" if self.certificates is None else "https"

    @property
    def endpoints(self) -> list[str]:
        return [member.endpoint for member in self.members]

    @property
    def url(self) -> str:
        """``etcd://host:port,...`` (``etcds://...?ca=...&cert=...&key=...`` with TLS): the
        URL of the whole cluster for ``fencing.connect``."""
        hosts = ",".join(self.endpoints)
        certs = self.certificates
        if certs is None:
            return f"etcd://{hosts}"
        return f"etcds://{hosts}?ca={certs.ca}&cert={certs.client}&key={certs.client_key}"

    def _command(self, member: EtcdMember, state: str) -> list[str]:
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        client = f"{self._scheme}://{member.endpoint}"
        certs = self.certificates
        tls = () if certs is None else (
            "--cert-file", str(certs.server), "--key-file", str(certs.server_key),
            "--trusted-ca-file", str(certs.ca), "--client-cert-auth",
        )  # fmt: skip
        return [
            self.binary,
            "--name", member.name,
            "--data-dir", str(member.data),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", member.peer_url,
            "--initial-advertise-peer-urls", member.peer_url,
            "--initial-cluster", initial,
            "--initial-cluster-state", state,
            "--initial-cluster-token", self.dir.name,
            "--heartbeat-interval", str(self.HEARTBEAT_MS),
            "--election-timeout", str(self.ELECTION_MS),
            "--logger", "zap",
            "--log-outputs", str(self.dir / f"{member.name}.log"),
            *tls,
            *self.extra_args,
        ]  # fmt: skip

    def _launch(self, member: EtcdMember, state: str) -> None:
        member.process = subprocess.Popen(
            self._command(member, state), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        """Start every member and return once each one serves (has a leader)."""
        for member in self.members:
            self._launch(member, "new")
        try:
            self.wait_until_serving(timeout)
        except ServerError:
            self.close()
            raise
        return self

    def wait_until_serving(self, timeout: float = 30.0) -> None:
        """Block until every running member reports a leader (``/health``)."""
        deadline = time.monotonic() + timeout
        for member in self.members:
            if not member.running:
                continue
            while True:
                if member.process is not None and member.process.poll() is not None:
                    raise ServerError(f"etcd {member.name} exited ({member.process.returncode})")
                try:
                    with urllib.request.urlopen(
                        f"{self._scheme}://{member.endpoint}/health",
                        timeout=1.0,
                        context=self._context,
                    ) as reply:
                        if json.loads(reply.read()).get("health") == "true":
                            break
                except (OSError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    raise ServerError(f"etcd {member.name} not serving within {timeout}s")
                time.sleep(0.05)

    def etcdctl(self, *args: str) -> str:
        """Run ``etcdctl`` (API v3) against the cluster; its output, or ``ServerError``."""
        found = shutil.which("etcdctl")
        if found is None:
            raise ServerError("etcdctl not found on PATH (Debian package etcd-client)")
        certs = self.certificates
        tls = [] if certs is None else [
            f"--cacert={certs.ca}", f"--cert={certs.client}", f"--key={certs.client_key}",
        ]  # fmt: skip
        endpoints = ",".join(f"{self._scheme}://{e}" for e in self.endpoints)
        result = subprocess.run(
            [found, "--endpoints", endpoints, *tls, *args],
            capture_output=True,
            text=True,
            env={**os.environ, "ETCDCTL_API": "3"},
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            raise ServerError(f"etcdctl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def leader(self, timeout: float = 30.0) -> EtcdMember:
        """The current leader among the running, unfrozen members (waits for one)."""
        deadline = time.monotonic() + timeout
        while True:
            for member in self.members:
                if not member.running:
                    continue
                try:
                    status = _etcd_post(
                        f"{self._scheme}://{member.endpoint}",
                        "/v3/maintenance/status",
                        1.0,
                        self._context,
                    )
                    header = status["header"]
                    if str(status.get("leader")) == str(header["member_id"]):  # type: ignore[index]
                        return member
                except (OSError, ValueError, KeyError):
                    pass
            if time.monotonic() > deadline:
                raise ServerError(f"no etcd leader within {timeout}s")
            time.sleep(0.05)

    def kill_leader(self) -> EtcdMember:
        """SIGKILL the current leader (no chance to hand over); the member it was."""
        member = self.leader()
        member.signal(signal.SIGKILL)
        if member.process is not None:
            member.process.wait()
        return member

    def freeze(self, member: EtcdMember) -> None:
        """SIGSTOP ``member``: it keeps its sockets but answers nothing."""
        member.signal(signal.SIGSTOP)

    def thaw(self, member: EtcdMember) -> None:
        member.signal(signal.SIGCONT)

    def restart(self, member: EtcdMember, timeout: float | None = 30.0) -> None:
        """Start a stopped (killed) ``member`` again on its data; it rejoins the cluster.
        Waits until every member serves, at most ``timeout`` seconds (``None``: no wait)."""
        self._stop(member)
        self._launch(member, "existing")
        if timeout is not None:
            self.wait_until_serving(timeout)

    def _stop(self, member: EtcdMember) -> None:
        if member.process is None:
            return
        if member.process.poll() is None:
            os.kill(member.process.pid, signal.SIGCONT)
            member.process.kill()
        member.process.wait()
        member.process = None

    def close(self) -> None:
        """Stop every member and delete the cluster's directory."""
        for member in self.members:
            self._stop(member)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
