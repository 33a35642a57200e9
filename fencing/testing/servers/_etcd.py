"""etcd: a 3-member cluster on loopback (optionally with TLS). Imports the shared server
base.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ._base import ServerError, free_port


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
