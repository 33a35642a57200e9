"""One object per key for the whole process (an issuer and its pool per URL or database
alias), closed when the process exits. Imports nothing from the package.

``fencing.connect(url).fence(...)`` opens connections the caller never sees, so nobody
else can close them: left to the interpreter's shutdown, each would be dropped while
open (psycopg says so with a ``ResourceWarning``) and a server session would end without
its goodbye. A forked child shares its parent's sockets: it never closes them (the
parent's sessions would end), only what it made itself.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Shared(Generic[K, V]):
    """``get(key)``: the one value of ``key`` in this process, made by ``make(key)`` on
    first use; at exit, ``close`` is called on each that this process made (a forked
    child goes on using its parent's: they look after their own sockets)."""

    def __init__(self, make: Callable[[K], V], close: Callable[[V], None]) -> None:
        self._make, self._close = make, close
        self._values: dict[K, tuple[int, V]] = {}  # key -> (the maker's pid, value)
        self._lock = threading.Lock()
        atexit.register(self.close_all)

    def get(self, key: K) -> V:
        with self._lock:
            made = self._values.get(key)
            if made is None:
                made = self._values[key] = (os.getpid(), self._make(key))
            return made[1]

    def close_all(self) -> None:
        """Close every value this process made and forget every value (the next ``get``
        makes a new one). Errors are ignored: it runs as the process exits."""
        with self._lock:
            made, self._values = list(self._values.values()), {}
        for pid, value in made:
            if pid == os.getpid():
                with contextlib.suppress(Exception):
                    self._close(value)
