"""Translation of redis-py errors into ``FenceUnavailable``, in one place for sync and async.

Imports the core's errors and redis-py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions

from .._errors import FenceUnavailable, issuer_error

#: Only a standalone client sees these: a cluster client follows the redirection.
_REDIRECTIONS = (redis.exceptions.MovedError, redis.exceptions.AskError)


def redis_error(what: str, exc: Exception) -> FenceUnavailable:
    """The ``FenceUnavailable`` for ``exc`` (raise it ``from exc``); a redirection says
    that the server is a Redis Cluster node and which client to use instead."""
    error = issuer_error(what, exc)
    if isinstance(exc, _REDIRECTIONS):
        return FenceUnavailable(
            f"{error} (the server is a Redis Cluster node: use a redis.cluster.RedisCluster "
            "client, or a redis+cluster:// URL)"
        )
    return error


@contextmanager
def redis_errors(what: str = "redis") -> Iterator[None]:
    """Re-raise any redis-py error as ``FenceUnavailable`` (``from`` the original)."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        raise redis_error(what, exc) from exc
