"""The Redlock issuers and fences: ``RedlockIssuer`` (blocking) and
``AsyncRedlockIssuer`` (asyncio) drive ``RedlockRWFlows`` (``_redlock_rw_flows``: the
fence's flows, and the read-write lock's on them) on their port (``_redlock_ports``);
``RedlockFence`` and ``AsyncRedlockFence`` are fences on them, and ``RWLock`` takes
either issuer (``ReadWrites``).
docs/redlock.md has the algorithm and its proof.

Imports the core (fences, flows, validation), the Redlock flows, ports and scripts, and
redis-py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import RedisError

from .._base.flow import run_async, run_sync
from .._base.validate import check_ttl
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from ..issuer import Busy, FenceStatus, RWStatus
from ._redlock_flows import DEFAULT_RELEASE_TIMEOUT
from ._redlock_ports import AsyncRedlockPort, RedlockPort
from ._redlock_rw_flows import RedlockRWFlows
from ._redlock_scripts import name_of, names_pattern

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


def check_release_timeout(seconds: object) -> float:
    return check_ttl(seconds, "release_timeout")


class BaseRedlockIssuer:
    """What the blocking and the asyncio issuer share: the clients, the flows and the port."""

    def __init__(self, clients: tuple[Any, ...], release_timeout: float, port: Any) -> None:
        self.clients = clients
        self.flows = RedlockRWFlows(len(clients), check_release_timeout(release_timeout))
        self.port = port

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.clients)} nodes)"


class RedlockIssuer(BaseRedlockIssuer):
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
        super().__init__(found, release_timeout, RedlockPort(found))
        self.clients: tuple[redis.Redis, ...]
        self.port: RedlockPort

    def close(self) -> None:
        """Stop the issuer's threads once their calls are done (the clients stay open:
        they are the caller's). Closing twice is fine; used again, the issuer starts new
        threads."""
        self.port.close()

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return run_sync(self.flows.try_acquire(name, holder, ttl_ms), self.port)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return run_sync(self.flows.renew(name, token, holder, ttl_ms), self.port)

    def release(self, name: str, token: int, holder: str) -> bool:
        return run_sync(self.flows.release(name, token, holder), self.port)

    def await_release(self, name: str, seconds: float) -> None:
        """``WakesOnRelease``: see ``RedlockFlows.await_release``."""
        run_sync(self.flows.await_release(name, seconds), self.port)

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        """``ReadWrites``: the fence's flows on the read-write lock's scripts."""
        return run_sync(self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms), self.port)

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        return run_sync(self.flows.rw_renew(name, mode, token, holder, ttl_ms), self.port)

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        return run_sync(self.flows.rw_release(name, mode, token, holder), self.port)

    def rw_await(self, name: str, seconds: float) -> None:
        run_sync(self.flows.rw_await(name, seconds), self.port)

    def rw_status(self, name: str) -> RWStatus:
        """``fencing status --rwlock`` (``OperatesReadWrites``): see ``RedlockRWFlows``."""
        return run_sync(self.flows.rw_status(name), self.port)

    def rw_force_release(self, name: str) -> RWStatus:
        """``fencing release --rwlock --force``: see ``RedlockRWFlows``."""
        return run_sync(self.flows.rw_force_release(name), self.port)

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


class AsyncRedlockIssuer(BaseRedlockIssuer):
    """``RedlockIssuer`` on ``redis.asyncio.Redis`` clients: the same flows, keys and
    scripts (sync and asyncio fences of one name exclude each other)."""

    def __init__(
        self, clients: AsyncClients, *, release_timeout: float = DEFAULT_RELEASE_TIMEOUT
    ) -> None:
        found = check_clients(
            clients, redis.asyncio.Redis, "redis.asyncio.Redis", "fencing.redis.RedlockFence"
        )
        super().__init__(found, release_timeout, AsyncRedlockPort(found))
        self.clients: tuple[redis.asyncio.Redis, ...]
        self.port: AsyncRedlockPort

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await run_async(self.flows.try_acquire(name, holder, ttl_ms), self.port)

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await run_async(self.flows.renew(name, token, holder, ttl_ms), self.port)

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await run_async(self.flows.release(name, token, holder), self.port)

    async def await_release(self, name: str, seconds: float) -> None:
        await run_async(self.flows.await_release(name, seconds), self.port)

    async def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        flow = self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        return await run_async(flow, self.port)

    async def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await run_async(self.flows.rw_renew(name, mode, token, holder, ttl_ms), self.port)

    async def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        return await run_async(self.flows.rw_release(name, mode, token, holder), self.port)

    async def rw_await(self, name: str, seconds: float) -> None:
        await run_async(self.flows.rw_await(name, seconds), self.port)

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
