"""The resources of the chaos run, each holding a JSON list of operations.

Every operation is ``[worker, seq, token]``; a read-modify-write appends one to the list
it read. Fenced, each write goes through the SDK's guard; unfenced, it does not.

A fenced read-modify-write must not let another write land between its read and its
write. The SQL row *claims* the row first (a guarded UPDATE that only raises the row's
token), the guarded callable runs the whole read-modify-write inside the guard, and the
FileStore uses ``FileStore.update`` (check, read, modify and write under its lock).
Unfenced, each does a plain read, then a plain write, so updates get lost.

Imports the public package, ``fencing.sql`` and SQLAlchemy.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa

import fencing
from fencing.sql import UNFENCED_OPTION, guarded_update

Ops = list[list[int]]
#: What a read-modify-write does between its read and its write: sleep the window, or
#: (the staged pause of ``worker``) freeze its own process.
Between = Callable[[], None]


class Resource(Protocol):
    name: str

    def rmw(self, op: list[int], token: int, between: Between) -> float:
        """Read the ops, call ``between()`` (the read-modify-write window), write them
        back with ``op`` appended.

        Returns ``time.monotonic()`` taken just before the write (after the read)."""

    def final(self) -> dict[str, Any]:
        """``{"ops": [...], "token": <stored mark or None>}`` after the run."""


class FileResource:
    """A ``FileStore`` changed by ``update`` (fenced) or a plain JSON file (unfenced)."""

    def __init__(self, path: Path, fenced: bool) -> None:
        self.name = "file-store"
        self.path, self.fenced = path, fenced
        self.store = fencing.FileStore(path)

    def _read(self) -> Ops:
        try:
            data = self.store.read() if self.fenced else self.path.read_bytes()
        except FileNotFoundError:
            return []
        ops: Ops = json.loads(data)
        return ops

    def rmw(self, op: list[int], token: int, between: Between) -> float:
        written = 0.0

        def append(current: bytes | None) -> bytes:
            nonlocal written
            ops: Ops = json.loads(current) if current is not None else []
            between()
            written = time.monotonic()
            return json.dumps([*ops, op]).encode()

        if self.fenced:
            self.store.update(append, token)
        else:
            try:
                current: bytes | None = self.path.read_bytes()
            except FileNotFoundError:
                current = None
            data = append(current)
            temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_bytes(data)
            temporary.replace(self.path)
        return written

    def final(self) -> dict[str, Any]:
        return {"ops": self._read(), "token": self.store.token if self.fenced else None}


_metadata = sa.MetaData()
ROWS = sa.Table(
    "chaos_rows",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("ops", sa.Text, nullable=False),
    sa.Column("fence_token", sa.BigInteger, nullable=False, server_default=sa.text("0")),
)


class SqlRowResource:
    """One row of ``chaos_rows``: guarded UPDATEs (fenced) or plain ones (unfenced)."""

    def __init__(self, name: str, url: str, row: int, fenced: bool) -> None:
        self.name, self.url, self.row, self.fenced = name, url, row, fenced
        connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
        self.engine = sa.create_engine(url, connect_args=connect_args, poolclass=sa.NullPool)

    @staticmethod
    def setup(url: str, rows: list[int]) -> None:
        engine = sa.create_engine(url, poolclass=sa.NullPool)
        _metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(ROWS.delete().where(ROWS.c.id.in_(rows)))
            conn.execute(ROWS.insert(), [{"id": row, "ops": "[]"} for row in rows])
        engine.dispose()

    def _update(self, token: int) -> Any:
        if self.fenced:
            return guarded_update(ROWS, token, ROWS.c.id == self.row)
        statement = sa.update(ROWS).where(ROWS.c.id == self.row)
        return statement.values(fence_token=token).execution_options(**{UNFENCED_OPTION: True})

    def rmw(self, op: list[int], token: int, between: Between) -> float:
        if self.fenced:
            with self.engine.begin() as conn:  # claim: raise the row's token first
                conn.execute(self._update(token))
        with self.engine.connect() as conn:
            ops = json.loads(
                conn.execute(sa.select(ROWS.c.ops).where(ROWS.c.id == self.row)).scalar_one()
            )
        between()
        written = time.monotonic()
        with self.engine.begin() as conn:
            conn.execute(self._update(token).values(ops=json.dumps([*ops, op])))
        return written

    def final(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(ROWS.c.ops, ROWS.c.fence_token).where(ROWS.c.id == self.row)
            ).one()
        return {"ops": json.loads(row.ops), "token": row.fence_token if self.fenced else None}


class GuardResource:
    """A plain JSON file changed by a function; fenced, the function is wrapped by
    ``guard(..., mark=FileMark(...))`` and the read-modify-write runs inside it."""

    def __init__(self, path: Path, fenced: bool) -> None:
        self.name = "callable-guard"
        self.path, self.fenced = path, fenced
        self.mark = fencing.FileMark(path.with_suffix(".mark"))
        self.guarded = fencing.guard(self._rmw, mark=self.mark, name="chaos guard")

    def _read(self) -> Ops:
        try:
            ops: Ops = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return []
        return ops

    def _rmw(self, op: list[int], between: Between) -> float:
        ops = self._read()
        between()
        written = time.monotonic()
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(json.dumps([*ops, op]).encode())
        temporary.replace(self.path)
        return written

    def rmw(self, op: list[int], token: int, between: Between) -> float:
        if self.fenced:
            return self.guarded(token, op, between)
        return self._rmw(op, between)

    def final(self) -> dict[str, Any]:
        return {"ops": self._read(), "token": self.mark.current if self.fenced else None}
