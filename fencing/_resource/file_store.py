"""``FileStore``: a file whose writes are guarded by fence tokens.

The data and its token live in one file record (``records``), replaced by one atomic
rename and made durable by one ``fsync``. ``FileStore.write``, ``FileStore.update`` (a
guarded read-modify-write) and ``FileStore.claim`` (raise the mark, keep the data) share
one compare-and-replace under the record's ``flock``; ``update`` only adds the read and
the call inside the lock, ``claim`` writes the data back unchanged. ``flock`` is
reliable on local file systems only; do not share a store over NFS.

A ``FileStore`` opens its lock file once (lazily) and keeps the descriptor until
``close()``; a ``threading.Lock`` serializes its own threads, which share that one open
file description (``flock`` would not exclude them from each other). A forked child
must not use the inherited descriptor either (the flock is shared with the parent):
the store records the pid that opened it and reopens in any other process.

Imports the validation and record modules and ``rejected`` from the marks (POSIX only:
``fcntl``).
"""

from __future__ import annotations

import fcntl
import os
import threading
import weakref
from collections.abc import Callable
from types import TracebackType

from .._base.validate import check_mark_token
from .marks import rejected
from .records import (
    PathArg,
    check_record_path,
    read_data,
    read_record,
    read_token,
    replace_record,
    sidecar,
)


def _check_data(data: object, what: str = "data") -> memoryview:
    if isinstance(data, str):
        raise TypeError(f"{what} must be bytes-like, not str (encode it first)")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes-like, not {type(data).__name__}")
    return memoryview(data).cast("B")


#: What a store accepts as data.
BytesLike = bytes | bytearray | memoryview


class FileStore:
    """A file guarded by fence tokens: a write is applied only if its token is at least
    the highest token that wrote the file before (the high-water mark).

    The mark is stored in the same file as the data (a small header), so both are
    replaced by one atomic rename and made durable by one fsync. Safe across threads
    and processes on one host (``flock`` on a sidecar ``.<name>.lock``) and across
    crashes (a crash mid-write leaves the previous data and token).

    Never written: ``read()`` raises ``FileNotFoundError`` and ``token`` is ``None`` (so
    "never written" is distinguishable from "written with empty data" or "token 0"); a
    store claimed before its first write still reads as never written, with the claim
    as its ``token``.
    """

    def __init__(self, path: PathArg) -> None:
        self.path = check_record_path(path, "FileStore")
        self._lock_path = sidecar(self.path, ".lock")
        self._mutex = threading.Lock()  # this process's threads (they share self._fd)
        self._fd = -1  # the lock file, opened on first write
        self._pid = 0  # the process that opened self._fd
        _stores.add(self)

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    def close(self) -> None:
        """Close the lock file's descriptor; a later write opens it again."""
        with self._mutex:
            self._close_fd()

    def __enter__(self) -> FileStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self._close_fd()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # in a forked child: only the child's copy (the parent keeps its)

    def _after_fork(self) -> None:
        """In a forked child: a thread of the parent may have held the mutex."""
        self._mutex = threading.Lock()

    @property
    def token(self) -> int | None:
        """The high-water mark: the token of the last accepted write or claim, ``None`` if none."""
        return read_token(self.path)

    def read(self) -> bytes:
        """The data of the last accepted write (``FileNotFoundError`` if never written)."""
        return read_record(self.path)[1]

    def read_with_token(self) -> tuple[int, bytes]:
        """``(token, data)`` of the last accepted write, read from one consistent version."""
        return read_record(self.path)

    def write(self, data: BytesLike, token: int) -> None:
        """Replace the data if ``token`` >= the high-water mark, else ``StaleTokenError``.

        An equal token is accepted (the same lease writing again). A rejected write
        changes nothing on disk. A corrupt record raises ``ValueError`` and is not
        overwritten: without a trustworthy mark no write can be judged fresh.
        """
        value = check_mark_token(token)
        view = _check_data(data)
        self._replace_if_fresh(value, lambda: view)

    def update(self, fn: Callable[[bytes | None], BytesLike], token: int) -> bytes:
        """A guarded read-modify-write: replace the data with ``fn(current)``, atomically.

        Under the store's lock: check ``token`` against the high-water mark
        (``StaleTokenError`` if lower: ``fn`` is not called, nothing is written), read the
        current data (``None`` if never written), call ``fn`` with it, and write its
        result with ``token`` exactly as ``write`` does. Returns the data written.

        Unlike a ``read()`` followed by ``write()``, no other writer can land between the
        read and the write, so a holder that paused past its lease can neither lose a
        newer holder's update nor write one computed from data that is no longer current.

        If ``fn`` raises, the error propagates and nothing is written; if it returns
        anything but bytes-like data, ``TypeError`` and nothing is written. A corrupt
        record raises ``ValueError`` before ``fn`` is called. ``fn`` runs while the lock
        is held: keep it short, and never write this store from it (the lock is not
        reentrant: that would deadlock).
        """
        value = check_mark_token(token)
        if not callable(fn):
            raise TypeError(f"fn must be callable, not {type(fn).__name__}")
        result: list[memoryview] = []

        def produce() -> memoryview:
            current = read_data(self.path)
            data = None if current is None else current.tobytes()
            result.append(_check_data(fn(data), "update's fn result"))
            return result[0]

        self._replace_if_fresh(value, produce)
        return result[0].tobytes()

    def claim(self, token: int) -> None:
        """Raise the high-water mark to ``token`` and keep the data: claim before you read.

        ``StaleTokenError`` if ``token`` is below the mark (nothing written); the same
        token as the mark is a no-op. From then on every write, update and claim with an
        older token is refused, so a holder that paused past its lease cannot write
        between this holder's ``read()`` and its ``write()`` (the read-then-write window,
        which a write-only check leaves open)::

            store.claim(token)               # older holders are shut out from here on
            data = store.read()
            store.write(change(data), token)

        ``update`` does all three under one lock; ``claim`` is for reads and writes that
        cannot run under it (a slow computation, several stores, another process).

        Crash-safe like a write: the record is rewritten with the new token and the same
        data (one atomic rename, one ``fsync``), so a claim costs what a write of the same
        size costs. A store never written stays never written (``read()`` raises
        ``FileNotFoundError``; ``token`` is the claim). A corrupt record raises
        ``ValueError`` and is left as it is; a bad token raises ``TypeError`` /
        ``ValueError`` before anything is read.
        """
        self._replace_if_fresh(check_mark_token(token), None)

    def _replace_if_fresh(self, token: int, produce: Callable[[], memoryview] | None) -> None:
        """The guard: under the lock, refuse ``token`` if below the mark, else replace the
        record with ``token`` and ``produce()`` (called only once the token is admitted);
        ``produce=None`` is a claim: the data stays, a record already at ``token`` stays."""
        with self._mutex:
            fd = self._fd
            if fd < 0 or self._pid != os.getpid():  # first write, closed, or forked child
                self._close_fd()
                fd = self._fd = os.open(self._lock_path, _LOCK_FLAGS, 0o666)
                self._pid = os.getpid()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = read_token(self.path)
                if current is not None and token < current:
                    raise rejected(token, current, f"FileStore({str(self.path)!r})", "file")
                if produce is not None:
                    replace_record(self.path, token, produce())
                elif current != token:
                    replace_record(self.path, token, read_data(self.path))
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)


_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
#: Every live store, so a forked child can give each a fresh thread mutex.
_stores: weakref.WeakSet[FileStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_stores):
        store._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
