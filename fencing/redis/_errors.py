"""Translation of redis-py errors into ``FenceUnavailable``, in one place for sync and async.

Imports the core's error helper and redis-py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions

from .._errors import issuer_error


@contextmanager
def redis_errors(what: str = "redis") -> Iterator[None]:
    """Re-raise any redis-py error as ``FenceUnavailable`` (``from`` the original)."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        raise issuer_error(what, exc) from exc
