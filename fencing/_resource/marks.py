"""High-water marks for ``guard``: where the highest accepted token lives, and what
serializes the check with the guarded call.

A mark's operation is ``admit(token, resource)``, a context manager: it raises
``StaleTokenError`` (nothing called) if ``token`` is below the mark, else raises the mark
to ``token`` and runs the ``with`` block (the guarded call). ``claim(token)`` is an
admission with nothing to run: it raises the mark (or refuses, the same way) so that a
holder that is about to read the resource has shut out every older token first. The
mark is raised at admission, before the call, and stays raised if the call fails:

- a retry with the same token is still accepted (equal tokens always are);
- a lower token is refused even if the newer call failed: its lease was superseded
  whether or not the newer holder's write worked;
- after a crash the mark is never behind the data it protects (raising it only after
  the call would leave a window where a write landed but its mark did not).

``MemoryMark`` (threads of one process) and ``FileMark`` (processes of one host) hold
their lock across check, raise and call, so guarded calls are fully serialized.
``RedisMark`` (``fencing.redis``) is atomic only for check-and-raise.

Every mark kind gets ``claim`` from the ``Mark`` protocol (its default method): one
admission path per mark, so a claim refuses exactly what a guarded call would.

``rejected`` is the one way a guard refuses a stale token (the marks here, ``RedisMark``,
``FileStore``): it logs the rejection, counts it and returns the ``StaleTokenError`` to
raise.

Imports the errors, log, telemetry and validation modules and the file record
(``records``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, runtime_checkable

from .._base.errors import StaleTokenError
from .._base.log import guard_log
from .._base.metrics import write_rejected
from .._base.validate import check_mark_token
from .records import PathArg, check_record_path, locked, read_token, replace_record


def rejected(
    token: int, current: int | None, resource: str, guard: str, mark: str | None = None
) -> StaleTokenError:
    """Log a stale rejection on ``fencing.guard``, count it (``fencing.writes.rejected``,
    by ``guard`` kind and ``mark`` kind) and return the error to raise."""
    guard_log.warning("%s: rejected stale token %d (high-water mark %s)", resource, token, current)
    write_rejected(guard, resource, mark)
    return StaleTokenError(token, current, resource=resource)


@runtime_checkable
class Mark(Protocol):
    """What ``guard`` needs from a high-water mark backend.

    A backend implements ``current`` and ``admit``; subclassing ``Mark`` gives it
    ``claim``, built on ``admit``.
    """

    @property
    def current(self) -> int | None:
        """The high-water mark, ``None`` if no token was ever admitted."""
        ...

    def admit(self, token: int, resource: str) -> AbstractContextManager[None]:
        """Refuse (``StaleTokenError``) or raise the mark to ``token`` and run the block."""
        ...

    def claim(self, token: int, resource: str | None = None) -> None:
        """Raise the mark to ``token`` without running anything; ``StaleTokenError`` if
        ``token`` is below the mark (the mark unchanged). The same token again is a no-op.

        A holder claims before it reads the resource, so a stale holder's write that
        would land between its read and its write is refused (the read-then-write
        window). Atomic like an admission: on a mark that serializes guarded calls
        (memory, file) it also waits for a guarded call that is running to return.
        ``resource`` names the resource in the error (default: the mark's ``repr``).
        Bad tokens (bool, float, str, negative, above 2**63-1) raise
        ``TypeError``/``ValueError`` with the mark unchanged.
        """
        value = check_mark_token(token)
        with self.admit(value, repr(self) if resource is None else resource):
            pass


def waits_for_the_mark(resource: str) -> None:
    """Say (debug, on ``fencing.guard``) that an admission or claim of ``resource`` found
    the mark held by a running guarded call and waits for it: a mark that serializes
    calls says so, and ``MarkContract`` waits for this record to prove a call waited."""
    guard_log.debug("%s: waits for the mark", resource)


class MemoryMark(Mark):
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
        if not self._lock.acquire(blocking=False):
            waits_for_the_mark(resource)
            self._lock.acquire()
        try:
            if self._mark is not None and token < self._mark:
                raise rejected(token, self._mark, resource, "callable", "memory")
            self._mark = token
            yield
        finally:
            self._lock.release()


class FileMark(Mark):
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
        with locked(self.path, lambda: waits_for_the_mark(resource)):
            current = read_token(self.path)
            if current is not None and token < current:
                raise rejected(token, current, resource, "callable", "file")
            if current != token:
                replace_record(self.path, token, memoryview(b""))
            yield
