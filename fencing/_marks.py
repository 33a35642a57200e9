"""High-water marks for ``guard``: where the highest accepted token lives, and what
serializes the check with the guarded call.

A mark's one operation is ``admit(token, resource)``, a context manager: it raises
``StaleTokenError`` (nothing called) if ``token`` is below the mark, else raises the mark
to ``token`` and runs the ``with`` block (the guarded call). The mark is raised at
admission, before the call, and stays raised if the call fails:

- a retry with the same token is still accepted (equal tokens always are);
- a lower token is refused even if the newer call failed: its lease was superseded
  whether or not the newer holder's write worked;
- after a crash the mark is never behind the data it protects (raising it only after
  the call would leave a window where a write landed but its mark did not).

``MemoryMark`` (threads of one process) and ``FileMark`` (processes of one host) hold
their lock across check, raise and call, so guarded calls are fully serialized.
``RedisMark`` (``_redis_mark``) is atomic only for check-and-raise.

Imports the errors module and the file record (``_records``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, runtime_checkable

from ._errors import rejected
from ._records import PathArg, check_record_path, locked, read_token, replace_record


@runtime_checkable
class Mark(Protocol):
    """What ``guard`` needs from a high-water mark backend."""

    @property
    def current(self) -> int | None:
        """The high-water mark, ``None`` if no token was ever admitted."""
        ...

    def admit(self, token: int, resource: str) -> AbstractContextManager[None]:
        """Refuse (``StaleTokenError``) or raise the mark to ``token`` and run the block."""
        ...


class MemoryMark:
    """The high-water mark in this process's memory; a lock serializes check and call.

    Guards threads of one process; forgotten when the process exits (a restarted process
    accepts any token again). Not reentrant: a guarded call must not call a guarded
    function that shares its mark.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mark: int | None = None

    def __repr__(self) -> str:
        return f"MemoryMark(current={self._mark})"

    @property
    def current(self) -> int | None:
        return self._mark

    @contextmanager
    def admit(self, token: int, resource: str) -> Iterator[None]:
        with self._lock:
            if self._mark is not None and token < self._mark:
                raise rejected(token, self._mark, resource, "callable", "memory")
            self._mark = token
            yield


class FileMark:
    """The high-water mark in a small file, durable and shared by processes of one host.

    The ``flock`` of its sidecar lock file is held across check, durable raise (fsync +
    atomic rename, only when the token is new) and the guarded call, so guarded calls
    never overlap, in any thread or process. Same file format as ``FileStore`` (a header
    with no data). Local file systems only (``flock`` over NFS is not reliable). Not
    reentrant.
    """

    def __init__(self, path: PathArg) -> None:
        self.path = check_record_path(path, "FileMark")

    def __repr__(self) -> str:
        return f"FileMark({str(self.path)!r})"

    @property
    def current(self) -> int | None:
        return read_token(self.path)

    @contextmanager
    def admit(self, token: int, resource: str) -> Iterator[None]:
        with locked(self.path):
            current = read_token(self.path)
            if current is not None and token < current:
                raise rejected(token, current, resource, "callable", "file")
            if current != token:
                replace_record(self.path, token, memoryview(b""))
            yield
