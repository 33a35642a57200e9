"""The public ``RWLockContract`` on every backend that has read-write locks, each made
through what a user calls (``MemoryIssuer.rwlock`` / ``aio_rwlock``)."""

from __future__ import annotations

import pytest

from fencing import MemoryIssuer
from fencing.testing.contract import MakeAsyncRWLock, MakeRWLock, RWLockContract


class TestMemoryRWLock(RWLockContract):
    @pytest.fixture
    def issuer(self) -> MemoryIssuer:
        return MemoryIssuer()

    @pytest.fixture
    def make_rwlock(self, issuer: MemoryIssuer) -> MakeRWLock:
        return issuer.rwlock

    @pytest.fixture
    def make_async_rwlock(self, issuer: MemoryIssuer) -> MakeAsyncRWLock:
        return issuer.aio_rwlock
