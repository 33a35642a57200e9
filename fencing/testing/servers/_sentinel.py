"""Redis Sentinel: a primary, a replica and three Sentinels, for failover tests. Imports
the shared server base and the Redis server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

from ._base import ServerError, _Server, _wait_for_port
from ._redis import RedisServer


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
    writes*), ``kill_primary`` (SIGKILL), ``thaw_replica``, ``judge_down_after``,
    ``wait_for_failover``.
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
            self._wait(self._ready, 60.0, "replica in sync and Sentinels aware of each other")
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

    def judge_down_after(self, ms: int) -> None:
        """Tell every Sentinel how long a silent primary takes to be judged down from now
        on. A test raises it while it checks what clients see of a frozen or dead primary
        (no failover can start under it), then lowers it back to ``down_after_ms``."""
        for sentinel in self.sentinels:
            with _client(sentinel.port) as client:
                client.sentinel_set(self.service, "down-after-milliseconds", ms)

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
