"""``FileStore``: a file whose writes are guarded by fence tokens, and the file record
primitives it shares with ``FileMark`` (``_marks``).

The on-disk record is one file: a fixed 28-byte header carrying the token that wrote
it, then the data. Token and data are therefore replaced together by one atomic
``os.replace`` and made durable by one ``fsync``: the high-water mark is exactly as
durable as the data it protects (DESIGN.md, invariant 4).

Header, big-endian: ``magic`` (8 bytes, ``b"FENCING\\x01"``), ``token`` (u64), ``length``
of the data (u64), CRC-32 of the preceding 24 bytes (u32).

Writers serialize on an exclusive ``fcntl.flock`` of a sidecar ``<name>.lock`` file
(never deleted: deleting a lock file lets two writers lock two different files), so the
compare-and-replace is atomic with respect to every thread and process on this host.
``FileStore.write`` and ``FileStore.update`` (a guarded read-modify-write) share that one
compare-and-replace; ``update`` only adds the read and the call inside the lock.
``flock`` is reliable on local file systems only; do not share a store over NFS.

A ``FileStore`` opens its lock file once (lazily) and keeps the descriptor until
``close()``; a ``threading.Lock`` serializes its own threads, which share that one open
file description (``flock`` would not exclude them from each other). A forked child
must not use the inherited descriptor either (the flock is shared with the parent):
the store records the pid that opened it and reopens in any other process.

Imports the errors, log and validation modules (POSIX only: ``fcntl``).
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Union

from ._errors import StaleTokenError
from ._log import guard_log
from ._validate import check_token

#: Tokens are 64-bit signed integers everywhere (Redis ``INCR``, SQL ``BIGINT``).
MAX_TOKEN = 2**63 - 1

_MAGIC = b"FENCING\x01"
_HEAD = struct.Struct(">8sQQ")
_HEADER_SIZE = _HEAD.size + 4

PathArg = Union[str, "os.PathLike[str]"]


def check_mark_token(token: object) -> int:
    """A token for a guard: a non-negative ``int`` (never a bool) of at most 64 bits."""
    value = check_token(token)
    if value > MAX_TOKEN:
        raise ValueError(f"fence token must be at most 2**63-1, got {value}")
    return value


def rejected(token: int, current: int | None, resource: str) -> StaleTokenError:
    """Log a stale rejection on ``fencing.guard`` and return the error to raise."""
    guard_log.warning("%s: rejected stale token %d (high-water mark %s)", resource, token, current)
    return StaleTokenError(token, current, resource=resource)


def check_record_path(path: object, what: str) -> Path:
    """A path for a record file: ``str``/``PathLike``, in an existing directory, not one."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} path must be a str or os.PathLike, not {type(path).__name__}")
    resolved = Path(os.fspath(path)).resolve()  # a symlink: write where it points
    if resolved.is_dir():
        raise ValueError(f"{what} path {str(resolved)!r} is a directory, not a file")
    if not resolved.parent.is_dir():
        raise ValueError(f"{what} directory {str(resolved.parent)!r} does not exist")
    return resolved


def _encode_header(token: int, length: int) -> bytes:
    head = _HEAD.pack(_MAGIC, token, length)
    return head + struct.pack(">I", zlib.crc32(head))


def _decode_header(raw: bytes, path: Path) -> tuple[int, int]:
    """``(token, length)`` from a header; ``ValueError`` naming the file if corrupt."""
    if len(raw) < _HEADER_SIZE:
        raise ValueError(f"{str(path)!r}: corrupt fencing record (header truncated)")
    magic, token, length = _HEAD.unpack_from(raw)
    (crc,) = struct.unpack_from(">I", raw, _HEAD.size)
    if magic != _MAGIC:
        raise ValueError(f"{str(path)!r}: not a fencing record (bad magic {magic!r})")
    if crc != zlib.crc32(raw[: _HEAD.size]) or token > MAX_TOKEN:
        raise ValueError(f"{str(path)!r}: corrupt fencing record (header checksum mismatch)")
    return token, length


def read_token(path: Path) -> int | None:
    """The token in the record at ``path``; ``None`` if there is no record yet."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # no buffered file object: hot path
    except FileNotFoundError:
        return None
    try:
        raw = os.read(fd, _HEADER_SIZE)
    finally:
        os.close(fd)
    return _decode_header(raw, path)[0]


def read_record(path: Path) -> tuple[int, bytes]:
    """``(token, data)`` of one version of the record (``FileNotFoundError`` if none)."""
    with open(path, "rb") as file:
        token, length = _decode_header(file.read(_HEADER_SIZE), path)
        data = file.read(length + 1)
    if len(data) != length:
        raise ValueError(
            f"{str(path)!r}: corrupt fencing record ({len(data)} data bytes, header says {length})"
        )
    return token, data


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive ``flock`` of the record's sidecar lock file.

    A fresh descriptor per call: ``flock`` belongs to the open file description, so
    this excludes other threads of this process too, and survives ``fork``.
    """
    fd = os.open(_sidecar(path, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(f".{path.name}{suffix}")


#: Called with the temp file's path after it is written and synced, before the rename.
#: Tests set it in a child process to simulate a crash at exactly that point.
_before_replace: Callable[[Path], None] | None = None


def replace_record(path: Path, token: int, data: memoryview) -> None:
    """Durably replace the record with ``token`` + ``data``; the caller holds the lock.

    Write a temp file in the same directory, fsync it, ``os.replace`` it over the record,
    fsync the directory. A crash at any point leaves either the old record or the new
    one. The temp name is fixed (``.<name>.tmp``): only the lock holder uses it, so a
    crashed writer's leftover is simply truncated and reused by the next writer.
    """
    tmp = _sidecar(path, ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        _write_all(fd, _encode_header(token, data.nbytes))
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if _before_replace is not None:
        _before_replace(tmp)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
    "never written" is distinguishable from "written with empty data" or "token 0").
    """

    def __init__(self, path: PathArg) -> None:
        self.path = check_record_path(path, "FileStore")
        self._lock_path = _sidecar(self.path, ".lock")
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
        """The high-water mark: the token of the last accepted write, ``None`` if none."""
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
            try:
                current: bytes | None = read_record(self.path)[1]
            except FileNotFoundError:
                current = None
            result.append(_check_data(fn(current), "update's fn result"))
            return result[0]

        self._replace_if_fresh(value, produce)
        return result[0].tobytes()

    def _replace_if_fresh(self, token: int, produce: Callable[[], memoryview]) -> None:
        """The guard: under the lock, refuse ``token`` if below the mark, else replace the
        record with ``token`` and ``produce()`` (called only once the token is admitted)."""
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
                    raise rejected(token, current, f"FileStore({str(self.path)!r})")
                replace_record(self.path, token, produce())
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)


_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
#: Every live store, so a forked child can give each a fresh thread mutex.
_stores: weakref.WeakSet[FileStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_stores):
        store._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
