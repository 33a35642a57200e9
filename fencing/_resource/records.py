"""The file record shared by ``FileStore`` and ``FileMark``: one file holding a token
and the data it wrote, replaced atomically and durably.

The on-disk record is one file: a fixed 28-byte header carrying the token that wrote
it, then the data. Token and data are therefore replaced together by one atomic
``os.replace`` and made durable by one ``fsync``: the high-water mark is exactly as
durable as the data it protects (invariant 4 of docs/design.md).

Header, big-endian: ``magic`` (8 bytes, ``b"FENCING\\x01"``), ``token`` (u64), ``length``
of the data (u64), CRC-32 of the preceding 24 bytes (u32). A ``length`` of ``NO_DATA``
(2**64-1) is a record with a token and no data yet: a ``FileStore`` claimed before its
first write, which reads as never written.

Writers serialize on an exclusive ``fcntl.flock`` of a sidecar ``<name>.lock`` file
(never deleted: deleting a lock file lets two writers lock two different files), so a
compare-and-replace under it is atomic with respect to every thread and process on this
host. ``flock`` is reliable on local file systems only.

Imports the validation module only (POSIX only: ``fcntl``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Union

from .._base.validate import MAX_TOKEN

_MAGIC = b"FENCING\x01"
_HEAD = struct.Struct(">8sQQ")
_HEADER_SIZE = _HEAD.size + 4

PathArg = Union[str, "os.PathLike[str]"]

#: The ``length`` of a record that holds a token and no data (a claim before any write).
NO_DATA = 2**64 - 1


def check_record_path(path: object, what: str) -> Path:
    """A path for a record file: ``str``/``PathLike``, in an existing directory, not one."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} path must be a str or os.PathLike, not {type(path).__name__}")
    resolved = Path(os.fspath(path)).resolve()  # a symlink: write where it points
    if resolved.is_dir():
        raise ValueError(f"{what} path {str(resolved)!r} is a directory, not a file")
    if not resolved.parent.is_dir():
        raise ValueError(f"{what} directory {str(resolved.parent)!r} does not exist")
    _check_sidecar_length(resolved, what)
    return resolved


#: The longest sidecar suffix (``.<name>.lock``; the temp file ``.<name>.tmp`` is shorter).
_LONGEST_SIDECAR = ".lock"


def _check_sidecar_length(path: Path, what: str) -> None:
    """Refuse a file name whose sidecar files would be too long for the file system:
    otherwise every write would fail with ``ENAMETOOLONG``."""
    try:
        limit = os.pathconf(path.parent, "PC_NAME_MAX")
    except (OSError, ValueError):  # not reported: the common POSIX limit
        limit = 255
    size = len(os.fsencode(path.name))
    extra = len(os.fsencode(sidecar(path, _LONGEST_SIDECAR).name)) - size
    if size + extra > limit:
        raise ValueError(
            f"{what} file name is {size} bytes long: its lock file .<name>{_LONGEST_SIDECAR} "
            f"would exceed this file system's limit of {limit} bytes; use at most "
            f"{limit - extra} bytes"
        )


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
    """``(token, data)`` of one version of the record (``FileNotFoundError`` if none, or
    if it holds a token and no data yet)."""
    with open(path, "rb") as file:
        token, length = _decode_header(file.read(_HEADER_SIZE), path)
        if length == NO_DATA:
            raise FileNotFoundError(errno.ENOENT, "claimed, never written", str(path))
        data = file.read(length + 1)
    if len(data) != length:
        raise ValueError(
            f"{str(path)!r}: corrupt fencing record ({len(data)} data bytes, header says {length})"
        )
    return token, data


@contextmanager
def locked(path: Path, waits: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the exclusive ``flock`` of the record's sidecar lock file; ``waits()`` is
    called first when another holder has it, before waiting for it.

    A fresh descriptor per call: ``flock`` belongs to the open file description, so
    this excludes other threads of this process too, and survives ``fork``.
    """
    fd = os.open(sidecar(path, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waits is not None:
                waits()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def read_data(path: Path) -> memoryview | None:
    """The record's data, ``None`` if it has none (no record, or a claim before any write)."""
    try:
        return memoryview(read_record(path)[1])
    except FileNotFoundError:
        return None


def sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(f".{path.name}{suffix}")


#: Called with the temp file's path after it is written and synced, before the rename.
#: Tests set it in a child process to simulate a crash at exactly that point.
_before_replace: Callable[[Path], None] | None = None


def replace_record(path: Path, token: int, data: memoryview | None) -> None:
    """Durably replace the record with ``token`` + ``data`` (``None``: a token and no data
    yet, see ``NO_DATA``); the caller holds the lock.

    Write a temp file in the same directory, fsync it, ``os.replace`` it over the record,
    fsync the directory. A crash at any point leaves either the old record or the new
    one. The temp name is fixed (``.<name>.tmp``): only the lock holder uses it, so a
    crashed writer's leftover is simply truncated and reused by the next writer.
    """
    tmp = sidecar(path, ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        _write_all(fd, _encode_header(token, NO_DATA if data is None else data.nbytes))
        if data is not None:
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
