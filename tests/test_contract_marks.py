"""The public mark contract (``fencing.testing.contract.MarkContract``) against every mark
of the package: memory, file and Redis.

What only one mark does (a durable file, Lua's exact comparison of the stored decimal, a
key holding something else, racing processes) stays in test_guard.py and
test_guard_redis.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis

from fencing import FileMark, MemoryMark, RedisMark
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
