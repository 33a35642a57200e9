"""Waiting in tests on a condition, never on the clock (issue 19, "green every run").

A test that sleeps a fixed time and then asserts that something happened fails on a
busy machine, where a thread may be stalled for a second or more. These helpers wait
for the condition itself, with a deadline so generous (``PATIENCE``) that only a real
failure reaches it; the deadline is never what a test proves.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fencing._lease.protocol import Waiting
from fencing._primitives.semaphore import BaseSemaphore

#: How long a test waits for something that should happen at once: only a bug makes
#: it take this long, a loaded machine does not.
PATIENCE = 60.0


def wait_until(
    condition: Callable[[], object], what: str, timeout: float = PATIENCE, poll: float = 0.01
) -> None:
    """Return once ``condition()`` is true; fail the test (naming ``what``) at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(poll)


async def await_until(
    condition: Callable[[], Awaitable[object]],
    what: str,
    timeout: float = PATIENCE,
    poll: float = 0.01,
) -> None:
    """``wait_until`` for asyncio: ``condition`` is awaited."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(poll)


def joined(*threads: threading.Thread, timeout: float = PATIENCE) -> None:
    """Join every thread within one shared deadline and assert each has finished."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        assert not thread.is_alive(), f"thread {thread.name} still runs after {timeout}s"


#: Longer than any test waits: a waiter that blocks this long between attempts can only
#: be served within ``PATIENCE`` by the wake-up (hand-off, watch) it is waiting for.
NEVER = 10 * PATIENCE


def woken_only(fence: Any) -> None:
    """Make ``fence``'s (or a semaphore's) blocked acquires wait ``NEVER`` between
    attempts (instead of at most 1 s), so a waiter served within ``PATIENCE`` was served
    by the wake-up."""
    if isinstance(fence, BaseSemaphore):
        fence._max_block = NEVER
        return
    waiting = fence._waiting
    fence._waiting = Waiting(waiting.hands_off, waiting.wakes, waiting.clock, max_block=NEVER)
