"""A pytest plugin that runs redis-py's own lock tests against ``fencing``'s locks.

Loaded by ``scripts/peer-suite.sh`` (``-p redis_py_peer``) into a run of redis-py's
test suite, taken from the source distribution of the installed redis-py release: it
replaces the ``get_lock`` hook of their ``TestLock`` classes (``tests/test_lock.py``
and ``tests/test_asyncio/test_lock.py``), through which every one of their lock tests
makes its lock, so that it passes ``lock_class=fencing.FencedLock`` (blocking) or
``fencing.aio.FencedLock`` (asyncio). Nothing of theirs is copied here. A run where no
class was patched, or where a lock of another class was made, fails.

Not a test module of ours (pytest never collects it from ``tests/``).
"""

from __future__ import annotations

from typing import Any

import pytest

import fencing
import fencing.aio

#: redis-py's test module -> the lock class its ``TestLock`` must use.
LOCK_CLASSES: dict[str, type] = {
    "tests.test_lock": fencing.FencedLock,
    "tests.test_asyncio.test_lock": fencing.aio.FencedLock,
}
_patched: set[str] = set()


def _get_lock(lock_class: type) -> Any:
    def get_lock(self: object, redis: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["lock_class"] = lock_class
        lock = redis.lock(*args, **kwargs)
        assert type(lock) is lock_class, f"the peer suite made a {type(lock).__name__}"
        return lock

    return get_lock


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        cls = getattr(item, "cls", None)
        module = getattr(cls, "__module__", "")
        if cls is None or cls.__name__ != "TestLock" or module not in LOCK_CLASSES:
            continue
        if module not in _patched:
            cls.get_lock = _get_lock(LOCK_CLASSES[module])
            _patched.add(module)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not _patched:
        raise pytest.UsageError(
            "redis_py_peer: no TestLock class of redis-py's suite was found to patch"
        )


def pytest_report_header() -> str:
    classes = ", ".join(f"{m}: {c.__module__}.{c.__qualname__}" for m, c in LOCK_CLASSES.items())
    return f"redis_py_peer: get_lock patched to {classes}"
