"""Translation of redis-py errors into ``fencing`` errors, in one place for sync and async.

A refusal by the server's ACL or of the client's credentials means the deployment is
not set up for fencing: ``FenceSetupError``, saying which permissions the Redis user
needs, or where the password goes. Every other redis-py error is ``FenceUnavailable``
(a Sentinel that names no primary says why that may be).
Imports the core's errors and redis-py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.asyncio.sentinel
import redis.exceptions
import redis.sentinel

from .._errors import FenceSetupError, FenceUnavailable, FencingError, issuer_error

#: The ACL rules that let a Redis user run every fencing operation (scripts, the
#: hand-off's BLPOP, ``min_replicas``'s WAIT, ``fencing list``'s SCAN) on the fencing
#: keys only.
ACL_RULES = "~fencing:* +evalsha +eval +script|load +blpop +wait +scan +time +@read +@write"

#: What Redis answers when a script calls a command the user's ACL forbids.
_SCRIPT_NOPERM = "can't run this command or subcommand"

#: What redis-py raises when no Sentinel names a primary (blocking, asyncio).
_NO_PRIMARY = (redis.sentinel.MasterNotFoundError, redis.asyncio.sentinel.MasterNotFoundError)


def redis_failure(what: str, exc: Exception) -> FencingError:
    """The ``fencing`` error for a redis-py error; raise it ``from exc``."""
    if isinstance(exc, redis.exceptions.AuthenticationError):
        return FenceSetupError(
            f"{what}: the Redis server refused to authenticate this client ({exc}); give "
            "the user and password in the URL (redis://<user>:<password>@host:port/db) "
            "or to redis.Redis(username=..., password=...)"
        )
    if isinstance(exc, redis.exceptions.NoPermissionError) or _SCRIPT_NOPERM in str(exc):
        return FenceSetupError(
            f"{what}: the Redis user is not allowed to run fencing's commands ({exc}); "
            f"grant them, for instance `ACL SETUSER <user> {ACL_RULES}`"
        )
    if isinstance(exc, _NO_PRIMARY):
        return FenceUnavailable(
            f"{what} sentinel: no primary for the service (an unknown service name, or no "
            f"Sentinel answered): {exc}"
        )
    return issuer_error(what, exc)


@contextmanager
def redis_errors(what: str = "redis") -> Iterator[None]:
    """Re-raise any redis-py error as a ``fencing`` error (``from`` the original)."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        raise redis_failure(what, exc) from exc
