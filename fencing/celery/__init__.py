"""Celery tasks that hold a fence while they run (``fencing[celery]``).

``FencedTask`` is a task base class: every run of a task (a first delivery, a retry, a
redelivery after a worker stalled or died) holds the lease of a fence named by the
task's arguments, and ``self.fence_token`` is its token, to pass with every write to a
guarded store. ``fence_once`` records a key's result so a repeated task returns it
without running; ``OnceStore`` is what such a record store does, ``FileOnceStore`` the
one shipped. docs/celery.md has the quick start and the redelivery timeline.

A backend-level package: it imports the core and Celery, never another backend (the
issuer is found by URL, through ``fencing.connect``).
"""

from __future__ import annotations

from .._base.lazy import needs_extra

with needs_extra("fencing.celery"):  # say which extra brings a missing driver
    from ._once import FileOnceStore, OnceStore, default_once_dir
    from ._options import ON_BUSY
    from ._task import FencedTask

__all__ = ["ON_BUSY", "FencedTask", "FileOnceStore", "OnceStore", "default_once_dir"]
