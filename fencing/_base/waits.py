"""Waits: asyncio waits that a cancellation always ends, ``JITTER``, and ``Wakes``, the waiters of
one process to wake up by key.

``asyncio.wait_for`` before Python 3.12 returns the result when the task waiting in it
is cancelled at the moment the awaited thing completes, and the cancellation is lost.
A hold sets its ``settled`` event and cancels its body in one step, so a body waiting in
``wait_lost`` met exactly that and ran on after its lease was lost. ``wait_event``
waits with ``asyncio.wait``, which lets every cancellation through.

``Wakes`` is where a waiter leaves its wake-up under a key (a lease's path, a lock's
name) and where whatever learns that the key's lease ended (a watch's callback, a
release made through the same issuer) wakes every waiter of that key.

Imports nothing from the package.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: The package's own random numbers (a wait's jitter, the slot or node a try starts at),
#: never the ``random`` module's shared state: a user may seed that for their own
#: sequence, and Hypothesis fails a test whose generation it sees move (a waiter's
#: thread drawing beside a state machine made one flaky).
JITTER = random.Random()


async def wait_event(event: asyncio.Event, seconds: float | None) -> bool:
    """Wait until ``event`` is set (True) or ``seconds`` have passed (False; ``None``: no
    limit). A cancellation of the waiting task always propagates."""
    if event.is_set():
        return True
    if seconds is None:
        await event.wait()
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((waiter,), timeout=seconds)
    finally:
        waiter.cancel()
    return event.is_set()


class Wakes:
    """Waiters by key: ``waiting(key, wake)`` while one waits, ``wake(key)`` calls the
    wake-up of every waiter of ``key`` (from any thread: a wake-up must not block).

    A waiter adds its wake-up before it looks (sets a watch, sleeps), so a release after
    that still wakes it (at worst a wake-up is spurious: the waiter just tries again).
    """

    def __init__(self) -> None:
        self._waiting: dict[str, list[Callable[[], None]]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def waiting(self, key: str, wake: Callable[[], None]) -> Iterator[None]:
        with self._lock:
            self._waiting.setdefault(key, []).append(wake)
        try:
            yield
        finally:
            with self._lock:
                wakes = self._waiting[key]
                wakes.remove(wake)
                if not wakes:
                    del self._waiting[key]

    def released(self, key: str, ended: bool) -> bool:
        """A release of ``key`` came back: wake its waiters if it ``ended`` a lease;
        ``ended``."""
        if ended:
            self.wake(key)
        return ended

    def wake(self, key: str) -> None:
        """Wake every waiter of ``key``."""
        with self._lock:
            wakes = list(self._waiting.get(key, ()))
        for wake in wakes:
            wake()
