"""Translation of redis-py errors into ``FenceUnavailable``, in one place for sync and async.

Imports the core's error helper and redis-py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.asyncio.sentinel
import redis.exceptions
import redis.sentinel

from .._errors import FenceUnavailable, issuer_error

#: What redis-py raises when no Sentinel names a primary (blocking, asyncio).
_NO_PRIMARY = (redis.sentinel.MasterNotFoundError, redis.asyncio.sentinel.MasterNotFoundError)


def unavailable(exc: Exception) -> FenceUnavailable:
    """The ``FenceUnavailable`` for a redis-py error (raise it ``from exc``); a Sentinel
    that names no primary says why that may be."""
    if isinstance(exc, _NO_PRIMARY):
        return FenceUnavailable(
            f"redis sentinel: no primary for the service (an unknown service name, or no "
            f"Sentinel answered): {exc}"
        )
    return issuer_error("redis", exc)


@contextmanager
def redis_errors(what: str = "redis") -> Iterator[None]:
    """Re-raise any redis-py error as ``FenceUnavailable`` (``from`` the original)."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        raise issuer_error(what, exc) from exc
