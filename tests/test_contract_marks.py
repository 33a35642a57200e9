"""The public mark contract (``fencing.testing.contract.MarkContract``) against every mark
of the package: memory, file and Redis.

What only one mark does (a durable file, Lua's exact comparison of the stored decimal, a
key holding something else, racing processes) stays in test_guard.py and
test_guard_redis.py.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from fencing import FileMark, Mark, MemoryMark, RedisMark, StaleTokenError, guard
from fencing.testing.contract import MakeMark, MarkContract


class TestMemoryMark(MarkContract):
    @pytest.fixture
    def make_mark(self) -> MakeMark:
        return MemoryMark


class TestFileMark(MarkContract):
    @pytest.fixture
    def make_mark(self, tmp_path: Path) -> MakeMark:
        return lambda: FileMark(tmp_path / f"mark-{uuid.uuid4().hex}")


class TestRedisMark(MarkContract):
    #: Only check-and-raise is one atomic Lua step; the guarded call runs outside Redis.
    serializes_calls = False

    @pytest.fixture
    def make_mark(self, redis_client: redis.Redis) -> MakeMark:
        return lambda: RedisMark(redis_client, f"mark:{uuid.uuid4().hex}")


class OwnMark(Mark):
    """A mark of one's own: only ``current`` and ``admit``; ``claim`` comes from ``Mark``.
    It serializes calls, so it says when one waits (the record the contract waits for)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value: int | None = None

    @property
    def current(self) -> int | None:
        return self.value

    @contextmanager
    def admit(self, token: int, resource: str) -> Iterator[None]:
        if not self.lock.acquire(blocking=False):
            logging.getLogger("fencing.guard").debug("%s: waits for the mark", resource)
            self.lock.acquire()
        try:
            if self.value is not None and token < self.value:
                raise StaleTokenError(token, self.value, resource)
            self.value = token
            yield
        finally:
            self.lock.release()


class TestOwnMark(MarkContract):
    @pytest.fixture
    def make_mark(self) -> MakeMark:
        return OwnMark


def test_a_mark_without_claim_is_refused_by_guard() -> None:
    class NoClaim:
        current = None

        def admit(self, token: int, resource: str) -> Iterator[None]:
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="claim"):
        guard(print, mark=NoClaim())  # type: ignore[call-overload]
