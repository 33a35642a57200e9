"""Translation of redis-py errors into ``fencing`` errors, in one place for sync and async.

A refusal by the server's ACL or of the client's credentials means the deployment is
not set up for fencing: ``FenceSetupError``, saying which permissions the Redis user
needs, or where the password goes. Every other redis-py error is ``FenceUnavailable``
(a Sentinel that names no primary says why that may be; a Redis Cluster redirection,
``MOVED``/``ASK``, which only a standalone client sees, says to use a cluster client).
A call stopped by something else (an interrupt) may leave a reply unread: see
``drop_unread_replies``.

Imports the core's errors and redis-py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis.asyncio.sentinel
import redis.cluster
import redis.exceptions
import redis.sentinel

from .._base.errors import FenceSetupError, FenceUnavailable, FencingError, issuer_error

#: The ACL rules that let a Redis user run every fencing operation (scripts, the
#: hand-off's BLPOP, ``min_replicas``'s WAIT, ``fencing list``'s SCAN) on the fencing
#: keys only.
ACL_RULES = "~fencing:* +evalsha +eval +script|load +blpop +wait +scan +time +@read +@write"

#: What Redis answers when a script calls a command the user's ACL forbids.
_SCRIPT_NOPERM = "can't run this command or subcommand"

#: What redis-py raises when no Sentinel names a primary (blocking, asyncio).
_NO_PRIMARY = (redis.sentinel.MasterNotFoundError, redis.asyncio.sentinel.MasterNotFoundError)

#: Only a standalone client sees these: a cluster client follows the redirection.
_REDIRECTIONS = (redis.exceptions.MovedError, redis.exceptions.AskError)


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
    if isinstance(exc, _REDIRECTIONS):
        return FenceUnavailable(
            f"{issuer_error(what, exc)} (the server is a Redis Cluster node: use a "
            "redis.cluster.RedisCluster client, or a redis+cluster:// URL)"
        )
    return issuer_error(what, exc)


@contextmanager
def redis_errors(what: str = "redis") -> Iterator[None]:
    """Re-raise any redis-py error as a ``fencing`` error (``from`` the original)."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        raise redis_failure(what, exc) from exc


def drop_unread_replies(client: Any, stop: BaseException) -> None:
    """After a blocking call that ``stop`` ended, unless redis-py raised it: close the
    client's idle connections.

    redis-py gives a connection back to its pool even when a ``KeyboardInterrupt`` (or
    an exception raised by a signal handler) lands between sending a command and reading
    its reply; the next command on that connection would read the old reply as its own
    (redis-py closes the connection only when the stop lands inside the read). Closed,
    such a connection reconnects when next used. Connections other threads are using
    are left alone.
    """
    if isinstance(stop, redis.exceptions.RedisError):
        return
    if isinstance(client, redis.cluster.RedisCluster):
        nodes = [node.redis_connection for node in client.get_nodes()]  # type: ignore[no-untyped-call]
        pools = [node.connection_pool for node in nodes if node is not None]
    elif client.connection is not None:  # a single-connection client
        client.connection.disconnect()
        return
    else:
        pools = [client.connection_pool]
    for pool in pools:
        pool.disconnect(inuse_connections=False)
