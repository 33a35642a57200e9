"""What ``Election.observe`` waits on with Redis: keyspace notifications of a lease key.

Redis publishes an event on ``__keyspace@<db>__:<key>`` whenever a command changes
``<key>`` (commands run by a Lua script included), when its ``notify-keyspace-events``
setting enables them: ``K`` (the keyspace channel) with ``$`` (``SET``: a lease taken or
handed over), ``g`` (``DEL``: released; also ``expire``, a renewal), ``x`` (expired)
and ``e`` (evicted); ``KEA`` enables them all. ``await_change`` subscribes to the lease
key's channel, reads the lease once the subscription is live (a change between the
observer's read and the subscription is caught there), then waits for an event that
may change the leader; a renewal's ``expire`` does not. A server that publishes no
such events leaves each wait to its full length: ``observe`` then polls, every
``poll`` seconds. Nothing is added to any acquire, renewal or release.

On Redis Cluster the channel's name carries the lease key's hash tag, so redis-py
subscribes on the node that serves the key's slot, where its events are published.

Imports redis-py and the issuer protocols.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..issuer import FenceStatus
from ._scripts import fence_keys

#: The events of a lease key after which another term may lead (or none).
CHANGES = frozenset({b"set", b"del", b"expired", b"evicted"})

#: A lost connection ends a wait at once: the observer reads again, and that read says
#: whether the server is gone (``FenceUnavailable``).
_LOST = (RedisConnectionError, RedisTimeoutError)


def keyspace_channel(client: Any, name: str) -> bytes:
    """The channel of the lease key of ``name`` in the client's database (0 on a
    cluster, which has no other)."""
    pool = getattr(client, "connection_pool", None)
    db = pool.connection_kwargs.get("db", 0) if pool is not None else 0
    return b"__keyspace@%d__:%s" % (int(db), fence_keys(name).lease)


def lease_token(status: FenceStatus) -> int | None:
    """The token of the live lease ``status`` shows, or ``None``."""
    return status.token if status.held else None


def _seen(message: Any) -> bool | None:
    """What ``message`` means to a waiter: True, stop waiting (a change); False, go on;
    ``None``, the subscription is live now: read the lease once."""
    if not message:
        return False
    kind = message.get("type")
    if kind in ("subscribe", b"subscribe"):
        return None
    data = message.get("data")
    return (
        kind in ("message", b"message")
        and (data.encode() if isinstance(data, str) else data) in CHANGES
    )


def await_change(
    client: Any, status: Callable[[str], FenceStatus], name: str, token: int | None, seconds: float
) -> None:
    """Block up to ``seconds``, returning early once the lease of ``name`` may no longer
    be the one of ``token`` (``fencing.issuer.WatchesLease``)."""
    deadline = time.monotonic() + seconds
    pubsub = client.pubsub()
    try:
        pubsub.subscribe(keyspace_channel(client, name))
        while (left := deadline - time.monotonic()) > 0:
            seen = _seen(pubsub.get_message(timeout=left))
            if seen is None:
                seen = lease_token(status(name)) != token
            if seen:
                return
    except _LOST:
        return
    except RedisError:  # refused (an ACL without SUBSCRIBE, say): the wait is a poll
        time.sleep(max(0.0, deadline - time.monotonic()))
    finally:
        pubsub.close()


async def aawait_change(
    client: Any,
    status: Callable[[str], Awaitable[FenceStatus]],
    name: str,
    token: int | None,
    seconds: float,
) -> None:
    """The asyncio ``await_change``. A client without pub/sub (redis-py before 6 has
    none on an asyncio cluster) waits the whole ``seconds``."""
    deadline = time.monotonic() + seconds
    if getattr(client, "pubsub", None) is None:
        await asyncio.sleep(seconds)
        return
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(keyspace_channel(client, name))
        while (left := deadline - time.monotonic()) > 0:
            seen = _seen(await pubsub.get_message(timeout=left))
            if seen is None:
                seen = lease_token(await status(name)) != token
            if seen:
                return
    except _LOST:
        return
    except RedisError:
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    finally:  # aclose from redis-py 5.0.1 on, which deprecates reset
        await getattr(pubsub, "aclose", pubsub.reset)()
