"""The port of the Redis flows: redis-py's clients, blocking and asyncio.

The steps of ``_flows`` are carried out on a client itself, so the port needs no class
of its own: this module says which clients are taken (``check_client``), what is read
from them (``client_encoder``, ``socket_timeout_of``), and holds the one call that
differs between the two kinds, ``run_script`` and ``arun_script``: EVALSHA, and after
NOSCRIPT (SCRIPT FLUSH, a restart, a failover) SCRIPT LOAD and EVALSHA again.

Imports the scripts' ``Script`` and redis-py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import NoScriptError

from ._scripts import Script

SyncClient = Union[redis.Redis, "redis.cluster.RedisCluster"]
AsyncClient = Union[redis.asyncio.Redis, "redis.asyncio.cluster.RedisCluster"]
SYNC_CLIENTS = (redis.Redis, redis.cluster.RedisCluster)
ASYNC_CLIENTS = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
SYNC_KINDS = "redis.Redis or redis.cluster.RedisCluster"
ASYNC_KINDS = "redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster"


def check_client(client: object, kinds: tuple[type, ...], wanted: str) -> None:
    """A ``TypeError`` at construction, rather than a confusing failure at the first
    call; a client of the other kind (blocking or asyncio) is told which class takes it."""
    if isinstance(client, kinds):
        return
    kind = type(client)
    message = f"client must be a {wanted} client, not {kind.__module__}.{kind.__qualname__}"
    if isinstance(client, ASYNC_CLIENTS):
        message += " (an asyncio client: use fencing.aio.RedisFence)"
    elif isinstance(client, SYNC_CLIENTS):
        message += " (a blocking client: use fencing.RedisFence)"
    raise TypeError(message)


def check_replicated_client(client: object, min_replicas: int) -> None:
    """``min_replicas`` needs one primary to WAIT on: a standalone or Sentinel client."""
    cluster = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)
    if min_replicas and isinstance(client, cluster):
        raise TypeError(
            "min_replicas needs a redis.Redis client (standalone or from Sentinel), "
            "not a Redis Cluster client"
        )


def client_encoder(client: Any) -> Any:
    """The client's encoder (a cluster client has it itself, a plain one in its pool):
    redis-py writes a lock's name with it, so the lock's keys are built with it too."""
    get = getattr(client, "get_encoder", None)
    return get() if get is not None else client.connection_pool.get_encoder()


def socket_timeout_of(client: Any) -> float | None:
    """The client's ``socket_timeout``: a BLPOP must not block longer than that."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:  # a cluster client keeps them elsewhere (asyncio: on itself)
        kwargs = getattr(client, "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})
    timeout = kwargs.get("socket_timeout")
    return None if timeout is None else float(timeout)


def run_script(client: SyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """EVALSHA ``script``; after NOSCRIPT load it and retry. The raw reply; redis-py
    errors pass through unchanged.

    ``execute_command`` is what redis-py's ``evalsha`` calls; the arguments here are
    bytes (``Script.sha_arg``, ``numkeys_arg``), which ``evalsha``'s types do not admit.
    """
    execute: Callable[..., Any] = client.execute_command  # untyped in redis-py
    try:
        return execute("EVALSHA", script.sha_arg, script.numkeys_arg, *args)
    except NoScriptError:
        return rerun_script(client, script, args)


def rerun_script(client: SyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """``run_script`` after its EVALSHA met NOSCRIPT: load ``script``, EVALSHA again."""
    client.script_load(script.text)
    execute: Callable[..., Any] = client.execute_command
    return execute("EVALSHA", script.sha_arg, script.numkeys_arg, *args)


async def arun_script(client: AsyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """The asyncio ``run_script``."""
    try:
        return await client.execute_command("EVALSHA", script.sha_arg, script.numkeys_arg, *args)
    except NoScriptError:
        return await arerun_script(client, script, args)


async def arerun_script(client: AsyncClient, script: Script, args: tuple[Any, ...]) -> Any:
    """The asyncio ``rerun_script``."""
    await client.script_load(script.text)
    return await client.execute_command("EVALSHA", script.sha_arg, script.numkeys_arg, *args)
