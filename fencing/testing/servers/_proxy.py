"""``CuttableProxy``: a TCP proxy on a free loopback port whose links a test can cut.

While cut (``with proxy.cut():``), it forwards nothing either way but keeps every
connection open, so the client's calls hang until their own timeouts, as in a network
partition (the kernel here has no ``netem``; see docs/design.md for the namespaces that
cut a real network). On leaving the block, what was held back flows again, as TCP
delivers after a partition heals. For a server whose clients connect only to the
addresses they were given (not Sentinel, ZooKeeper or etcd peers, which announce their
own). Imports nothing from the package.
"""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ._base import free_port


class CuttableProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target``; ``cut()`` stops it for a
    ``with`` block. ``start()``, ``close()``; a context manager as well."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []

    def start(self) -> CuttableProxy:
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.settimeout(0.1)
        self._listener = listener
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    @contextmanager
    def cut(self) -> Iterator[None]:
        """Nothing goes through during the block; it flows again on leaving, always."""
        self._flowing.clear()
        try:
            yield
        finally:
            self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        for sock in [*self._sockets, *([self._listener] if self._listener else [])]:
            sock.close()

    def __enter__(self) -> CuttableProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self._sockets += [client, upstream]
            threading.Thread(
                target=self._pump, args=(client, upstream), name="proxy-pump", daemon=True
            ).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        """Copy bytes both ways, only while not cut; end when either side closes."""
        other = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in other:
                selector.register(sock, selectors.EVENT_READ, sock)
            while not self._closed.is_set():
                self._flowing.wait()
                for key, _ in selector.select(0.05):
                    if not self._flowing.is_set():
                        break  # cut meanwhile: leave it unread
                    source: socket.socket = key.data
                    try:
                        data = source.recv(65536)
                        if not data:
                            raise OSError("closed")
                        other[source].sendall(data)
                    except OSError:
                        for end in other:
                            end.close()
                        return
