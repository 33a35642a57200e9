"""A throwaway ``redis-server``. Imports the shared server base."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence

from ._base import ServerError, _Server, _wait_for_port


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
