"""Completion records for ``fence_once``: "the work under this key is done, here is its
result", written with the fence token of the attempt that did it.

A record store has two operations (``OnceStore``): ``get(key)`` returns the recorded
result's JSON text if an unexpired record exists, and ``put(key, token, result, ttl)``
records one, refusing (``StaleTokenError``, nothing written) a token below the one that
wrote the key's record before. The tokens come from the fence named by the same key,
so a frozen attempt that resumes after a newer attempt recorded the work cannot
overwrite that record.

``FileOnceStore`` keeps one ``fencing.FileStore`` per key in a directory: it works with
every issuer (the record does not live in the issuer), for the workers of one host or
of hosts sharing a local-semantics file system. Expiry is judged on the reading
worker's wall clock; it decides only how long "done" is remembered, never whether a
stale write is refused (the token does that).

Imports the core (``FileStore``, the validation module) and the standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import quote

from .._base.validate import check_ttl
from .._resource.file_store import FileStore

#: Keys longer than this (once quoted) are stored under their SHA-256 digest.
_LONGEST_FILE_NAME = 200


@runtime_checkable
class OnceStore(Protocol):
    """Where ``fence_once`` records that a key's work is done."""

    def get(self, key: str) -> str | None:
        """The recorded result (JSON text) if an unexpired record exists, else ``None``."""
        ...

    def put(self, key: str, token: int, result: str, ttl: float) -> None:
        """Record ``result`` (JSON text) for ``ttl`` seconds, written with ``token``:
        ``StaleTokenError`` (nothing written) if a higher token recorded the key before."""
        ...


def default_once_dir() -> Path:
    """``$XDG_STATE_HOME/fencing/celery-once`` (by default under ``~/.local/state``),
    beside the embedded default issuer's file."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fencing" / "celery-once"


class FileOnceStore(OnceStore):
    """Completion records as files in ``directory`` (created on first use), one
    token-guarded ``FileStore`` per key."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a str or a path, not {type(directory).__name__}")
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"FileOnceStore({str(self.directory)!r})"

    def path_of(self, key: str) -> Path:
        """The record file of ``key``: the key percent-quoted, or its digest if long."""
        if not isinstance(key, str) or not key:
            raise ValueError("a once key must be a non-empty str")
        name = quote(key, safe="")
        if len(name) > _LONGEST_FILE_NAME:
            name = "sha256-" + hashlib.sha256(key.encode()).hexdigest()
        return self.directory / f"{name}.json"

    def get(self, key: str) -> str | None:
        path = self.path_of(key)
        if not self.directory.is_dir():  # nothing recorded yet
            return None
        with FileStore(path) as store:
            try:
                data = store.read()
            except FileNotFoundError:
                return None
        record = json.loads(data)
        if not isinstance(record, dict) or not isinstance(record.get("result"), str):
            raise ValueError(f"{path}: not a fence_once record")
        if time.time() >= float(record["expires_at"]):
            return None
        return str(record["result"])

    def put(self, key: str, token: int, result: str, ttl: float) -> None:
        lifetime = check_ttl(ttl, "once ttl")
        if not isinstance(result, str):
            raise TypeError(f"result must be JSON text (str), not {type(result).__name__}")
        record_text = json.dumps({"expires_at": time.time() + lifetime, "result": result})
        self.directory.mkdir(parents=True, exist_ok=True)
        with FileStore(self.path_of(key)) as store:
            store.write(record_text.encode(), token)
