"""asyncio waits that a cancellation always ends.

``asyncio.wait_for`` before Python 3.12 returns the result when the task waiting in it
is cancelled at the moment the awaited thing completes, and the cancellation is lost.
A hold sets its ``settled`` event and cancels its body in one step, so a body waiting in
``wait_lost`` met exactly that and ran on after its lease was lost. ``wait_event``
waits with ``asyncio.wait``, which lets every cancellation through.

Imports nothing from the package.
"""

from __future__ import annotations

import asyncio


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
