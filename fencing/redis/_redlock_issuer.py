"""The Redlock issuers and fences: ``RedlockIssuer`` (blocking) and
``AsyncRedlockIssuer`` (asyncio) drive ``RedlockFlows`` (``_redlock_flows``) on their
port (``_redlock_ports``); ``RedlockFence`` and ``AsyncRedlockFence`` are fences on them.
docs/redlock.md has the algorithm and its proof.

Imports the core (fences, flows, validation), the Redlock flows, ports and scripts, and
redis-py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import RedisError

from .._async_fence import AsyncFence
from .._core import DEFAULT_TTL
from .._fence import Fence
from .._flow import run_async, run_sync
from .._validate import check_ttl
from ..issuer import Busy, FenceStatus
from ._redlock_flows import DEFAULT_RELEASE_TIMEOUT, RedlockFlows
from ._redlock_ports import AsyncRedlockPort, RedlockPort
from ._redlock_scripts import name_of, names_pattern, wake_key

SyncClients = Sequence[redis.Redis]
AsyncClients = Sequence[redis.asyncio.Redis]
_CLUSTERS = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)


#: The fewest masters Redlock takes: with two, a majority is both, so it survives no
#: failure that one node alone would not; with one, it is a single server.
MIN_NODES = 3


def _address(client: Any) -> tuple[Any, ...] | None:
    """Where a client connects (host, port, db, or unix path, db), when it can be told."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return None
    where = kwargs.get("path") or (kwargs.get("host", "localhost"), kwargs.get("port", 6379))
    return (where, kwargs.get("db", 0))


def _socket_timeout(client: Any) -> object:
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    return kwargs.get("socket_timeout") if isinstance(kwargs, dict) else None


def check_clients(clients: object, kind: type, wanted: str, other: str) -> tuple[Any, ...]:
    """The clients as a tuple, or a ``TypeError``/``ValueError`` before any I/O: a
    sequence (not a str) of at least ``MIN_NODES`` clients of ``kind``, each a different
    object and, where it can be told, a different server (two clients of one server
    would fake a majority)."""
    if isinstance(clients, (str, bytes)) or not isinstance(clients, Sequence):
        raise TypeError(
            f"clients must be a sequence of {wanted} clients (one per Redis master), "
            f"not {type(clients).__name__}"
        )
    found = tuple(clients)
    seen: dict[tuple[Any, ...], int] = {}
    for index, client in enumerate(found):
        if isinstance(client, _CLUSTERS):
            raise TypeError(
                f"clients[{index}] is a Redis Cluster client: Redlock needs independent "
                f"masters, a {wanted} client for each (for a cluster use RedisFence)"
            )
        if not isinstance(client, kind):
            hint = ""
            if isinstance(client, (redis.Redis, redis.asyncio.Redis)):
                hint = f" (that kind of client goes to {other})"
            kind_of = type(client)
            raise TypeError(
                f"clients[{index}] must be a {wanted} client, not "
                f"{kind_of.__module__}.{kind_of.__qualname__}{hint}"
            )
        if any(client is earlier for earlier in found[:index]):
            raise ValueError(f"clients[{index}] is given twice: each node must be counted once")
        address = _address(client)
        if address is not None:
            if address in seen:
                raise ValueError(
                    f"clients[{seen[address]}] and clients[{index}] connect to the same "
                    f"server {address!r}: each node must be an independent master"
                )
            seen[address] = index
    if len(found) < MIN_NODES:
        raise ValueError(
            f"Redlock needs at least {MIN_NODES} independent Redis masters, got "
            f"{len(found)} client(s): with fewer, one node down stops it (for one server "
            "use RedisFence)"
        )
    return found


#: The most ``BLPOP``s a blocking issuer's waiters run at once (each on a thread of its
#: own; more waiters queue, and wait out their time if no thread frees up).
WAIT_THREADS = 32


def blpop_seconds(seconds: float, socket_timeout: object) -> float | None:
    """How long a waiter's ``BLPOP`` may block: ``seconds``, but less than the client's
    ``socket_timeout`` (a read that outlasts it fails), never below 10 ms (Redis takes
    a timeout that rounds to 0 ms as "for ever"). ``None``: too short to block at all."""
    block = seconds
    if isinstance(socket_timeout, (int, float)) and socket_timeout > 0:
        block = min(block, socket_timeout * 0.8)
    return block if block >= 0.01 else None


#: How much longer than the ``BLPOP``'s own timeout a waiter waits for its reply, so that
#: a ``BLPOP`` that times out on the server is not also cut off by the client (which, in
#: asyncio, would close its connection); a node that hangs costs the wait this much more.
WAIT_GRACE = 0.05

#: A woken waiter starts its attempt after a random part of this (seconds): waiters
#: woken together (several nodes' wake-ups, or the give-backs of a split vote, which
#: wake the others too) do not all ask again at the same instant.
WAKE_JITTER = 0.005


def wake_jitter(left: float) -> float:
    """How long a woken waiter waits before its attempt (within the ``left`` of its wait)."""
    return max(0.0, min(left, random.random() * WAKE_JITTER))


def check_release_timeout(seconds: object) -> float:
    return check_ttl(seconds, "release_timeout")


class RedlockIssuer:
    """Leases and tokens on N independent Redis masters (``redis.Redis`` clients), by
    Redlock with a quorum token (see the module docstring and docs/redlock.md).

    ``release_timeout`` (seconds, default 5): how long a release waits for a majority of
    the nodes (then ``RELEASE_GRACE`` for the others).
    Give every client a ``socket_timeout``: a node that hangs is left behind at each
    step's deadline, but its threads stay busy until the socket times out.
    """

    def __init__(
        self, clients: SyncClients, *, release_timeout: float = DEFAULT_RELEASE_TIMEOUT
    ) -> None:
        found = check_clients(clients, redis.Redis, "redis.Redis", "fencing.redis.aio.RedlockFence")
        self.clients: tuple[redis.Redis, ...] = found
        self.flows = RedlockFlows(len(found), check_release_timeout(release_timeout))
        self.port = RedlockPort(found)
        # the waiters' BLPOPs (threads start on demand): apart from the nodes' threads
        self._waits = self._new_waits()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.clients)} nodes)"

    @staticmethod
    def _new_waits() -> concurrent.futures.ThreadPoolExecutor:
        return concurrent.futures.ThreadPoolExecutor(
            WAIT_THREADS, thread_name_prefix="fencing-redlock-wait"
        )

    def close(self) -> None:
        """Stop the issuer's threads once their calls are done (the clients stay open:
        they are the caller's). Closing twice is fine; used again, the issuer starts new
        threads."""
        self.port.close()
        waits, self._waits = self._waits, self._new_waits()
        waits.shutdown(wait=False)

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return run_sync(self.flows.try_acquire(name, holder, ttl_ms), self.port)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return run_sync(self.flows.renew(name, token, holder, ttl_ms), self.port)

    def release(self, name: str, token: int, holder: str) -> bool:
        return run_sync(self.flows.release(name, token, holder), self.port)

    def await_release(self, name: str, seconds: float) -> None:
        """``WakesOnRelease``: block up to ``seconds`` on one node's wake list (``BLPOP``),
        a node taken at random at each wait; return early once a release (or a give-back)
        pushed to it. The ``BLPOP`` runs on a thread of its own (``WAIT_THREADS`` at most),
        so a node that hangs delays no node's calls and no waiter past ``seconds`` (and
        ``WAIT_GRACE``); a node that fails makes the waiter sleep out the ``seconds``
        (see docs/redlock.md)."""
        if seconds <= 0:
            return
        start = time.monotonic()
        node = random.randrange(len(self.clients))
        client = self.clients[node]
        block = blpop_seconds(seconds, _socket_timeout(client))
        try:
            if block is not None:
                future = self._waits.submit(client.blpop, [wake_key(name)], block)
                if future.result(timeout=seconds + WAIT_GRACE) is not None:  # woken
                    time.sleep(wake_jitter(seconds - (time.monotonic() - start)))
                return
        except concurrent.futures.TimeoutError:
            return  # waited the whole time (the node hangs)
        except RedisError:
            pass
        time.sleep(max(0.0, seconds - (time.monotonic() - start)))

    def status(self, name: str) -> FenceStatus:
        """``fencing status`` (``Inspects``): the lease a majority holds, the last token."""
        return run_sync(self.flows.status(name), self.port)

    def force_release(self, name: str) -> FenceStatus:
        """``fencing release --force`` (``ForceReleases``): see ``RedlockFlows``."""
        return run_sync(self.flows.force_release(name), self.port)

    def names(self, prefix: str = "") -> Iterator[str]:
        """The fences with a lease or a counter on any node that answers, by ``SCAN``
        (never ``KEYS``), each once; ``FenceUnavailable`` when fewer than a majority
        of the nodes could be scanned."""
        seen: set[str] = set()
        scanned, failures = 0, []
        for client in self.clients:
            try:
                found = [name_of(key) for key in client.scan_iter(match=names_pattern(prefix))]
            except RedisError as exc:
                failures.append(exc)
                continue
            scanned += 1
            for name in found:
                if name is not None and name.startswith(prefix) and name not in seen:
                    seen.add(name)
                    yield name
        if scanned < self.flows.quorum:
            raise self.flows._errors(f"{prefix}*", list(failures), "scan")


class AsyncRedlockIssuer:
    """``RedlockIssuer`` on ``redis.asyncio.Redis`` clients: the same flows, keys and
    scripts (sync and asyncio fences of one name exclude each other)."""

    def __init__(
        self, clients: AsyncClients, *, release_timeout: float = DEFAULT_RELEASE_TIMEOUT
    ) -> None:
        found = check_clients(
            clients, redis.asyncio.Redis, "redis.asyncio.Redis", "fencing.redis.RedlockFence"
        )
        self.clients: tuple[redis.asyncio.Redis, ...] = found
        self.flows = RedlockFlows(len(found), check_release_timeout(release_timeout))
        self.port = AsyncRedlockPort(found)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.clients)} nodes)"

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await run_async(self.flows.try_acquire(name, holder, ttl_ms), self.port)

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await run_async(self.flows.renew(name, token, holder, ttl_ms), self.port)

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await run_async(self.flows.release(name, token, holder), self.port)

    async def await_release(self, name: str, seconds: float) -> None:
        """See ``RedlockIssuer.await_release``: ``BLPOP`` on one node taken at random, as
        a task cancelled at ``seconds``."""
        if seconds <= 0:
            return
        start = time.monotonic()
        client = self.clients[random.randrange(len(self.clients))]
        block = blpop_seconds(seconds, _socket_timeout(client))
        try:
            if block is not None:
                wake = client.blpop([wake_key(name)], block)
                if await asyncio.wait_for(wake, seconds + WAIT_GRACE):
                    await asyncio.sleep(wake_jitter(seconds - (time.monotonic() - start)))
                return
        except asyncio.TimeoutError:
            return
        except RedisError:
            pass
        await asyncio.sleep(max(0.0, seconds - (time.monotonic() - start)))

    async def status(self, name: str) -> FenceStatus:
        """``AsyncInspects``: see ``RedlockIssuer.status`` (the same flow)."""
        return await run_async(self.flows.status(name), self.port)

    async def aclose(self) -> None:
        """Close every node's client's connections (each reconnects if used again): for
        the clients a backend made for one asyncio fence, which its ``aclose`` calls."""
        await asyncio.gather(*(client.aclose() for client in self.clients))


class RedlockFence(Fence):
    """A fence on N independent Redis masters: Redlock's lease, and a token that a
    majority holds before ``acquire`` returns (docs/redlock.md).

    ``RedlockFence([redis.Redis(host=h, socket_timeout=1) for h in hosts], "invoice:42",
    ttl=10)``. Pass ``issuer=`` to share one issuer (and its threads) among fences.
    ``close()`` stops the threads of the issuer the fence made, if it made one.
    """

    def __init__(
        self,
        clients: SyncClients,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: RedlockIssuer | None = None,
        release_timeout: float = DEFAULT_RELEASE_TIMEOUT,
        reentrant: bool = False,
    ) -> None:
        #: The issuer this fence made (and ``close`` closes), if none was passed in.
        self._made: RedlockIssuer | None = None
        if issuer is None:
            issuer = self._made = RedlockIssuer(clients, release_timeout=release_timeout)
        super().__init__(issuer, name, ttl, reentrant=reentrant)

    def close(self) -> None:
        """Stop the threads of the issuer this fence made (the clients are the caller's,
        and an issuer passed in is its owner's to close). Closing twice is fine; used
        again, the fence starts new threads."""
        if self._made is not None:
            self._made.close()


class AsyncRedlockFence(AsyncFence):
    """The asyncio ``RedlockFence`` (``fencing.redis.aio.RedlockFence``)."""

    def __init__(
        self,
        clients: AsyncClients,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: AsyncRedlockIssuer | None = None,
        release_timeout: float = DEFAULT_RELEASE_TIMEOUT,
        reentrant: bool = False,
    ) -> None:
        if issuer is None:
            issuer = AsyncRedlockIssuer(clients, release_timeout=release_timeout)
        super().__init__(issuer, name, ttl, reentrant=reentrant)
