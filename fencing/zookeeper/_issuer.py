"""The ZooKeeper issuers: ``ZooKeeperIssuer`` (blocking) and ``AsyncZooKeeperIssuer``
(asyncio) drive the same flows (``_flows``) on one kazoo client.

A lease is an ephemeral znode, so it lives as long as the session of the client that
created it: kazoo keeps the session alive by itself (heartbeats every third of the
session timeout), and the servers end it, deleting the lease, once they have heard
nothing from the client for the session timeout, by the servers' clock. ``ttl_ms`` is
therefore not a lifetime here: renew confirms, in one transaction through the quorum,
that the exact lease is still there (that is what makes ``hold()`` notice a lost
session), and changes nothing. The token is the lease znode's ``czxid``.

Waiters do not poll (``WakesOnRelease``): ``await_release`` leaves a kazoo watch on the
lease znode and sleeps until it fires (the znode was deleted: released, or its session
ended) or the wait is over. One watch callback per issuer serves all its waiters
(``Releases``), so waiting longer than a lease lasts does not pile up callbacks in kazoo.
A semaphore's waiter (``WakesSlots``) leaves that watch on the lease znode of each of
its slots, so the release of any of them (or the end of its holder's session) wakes it.

Imports the core (fences, flows, errors), the layout and flows, and kazoo.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from functools import partial
from typing import Any, TypeVar

from kazoo.client import KazooClient

from .._base.errors import issuer_error
from .._base.flow import Flow, run_async, run_sync
from .._base.validate import check_name
from .._base.waits import Wakes, wait_event
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from ..issuer import Busy, FenceStatus, RWStatus
from ._flows import Request, Versions, ZooKeeperFlows
from ._layout import DEFAULT_TIMEOUT, FencePaths
from ._rw_flows import RWFlows, WatchLock

#: What the issuers' flows yield: kazoo requests, and a waiting read-write lock's watch.
Step = Request[Any] | WatchLock

T = TypeVar("T")


class Releases(Wakes):
    """Waiters for releases, by lease path; ``fire`` is the one kazoo watch callback."""

    def fire(self, event: Any) -> None:
        """kazoo's watch callback (in its event thread): wake the waiters of the path."""
        self.wake(event.path)


class BaseZooKeeperIssuer:
    """What both issuers share: the client, the timeout, the flows and the waiters."""

    def __init__(
        self,
        client: KazooClient,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        start: Starter | None = None,
    ) -> None:
        if not isinstance(client, KazooClient):
            raise TypeError(f"client must be a kazoo KazooClient, not {type(client).__name__}")
        self.client = client
        self.timeout = timeout
        self.flows = ZooKeeperFlows(Versions())
        self.rw = RWFlows()
        self.releases = Releases()
        self._start = start

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client.hosts!r})"

    def lease_path(self, name: str) -> str:
        return FencePaths.of(name).lease

    def _run(self, flow: Flow[Step, Any]) -> Any:
        """Drive ``flow``: blocking, its value; asyncio, an awaitable of it."""
        raise NotImplementedError

    def rw_acquire(self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int) -> Any:
        """``ReadWrites.rw_acquire`` (asyncio: ``AsyncReadWrites``, awaited), as all the
        read-write locks' calls here: a flow of ``RWFlows`` run by ``_run``."""
        return self._run(self.rw.rw_acquire(name, mode, holder, ttl_ms, queue_ms))

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> Any:
        return self._run(self.rw.rw_renew(name, mode, token, holder, ttl_ms))

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Any:
        return self._run(self.rw.rw_release(name, mode, token, holder))

    def rw_await(self, name: str, seconds: float) -> Any:
        return self._run(self.rw.rw_await(name, seconds))

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> Any:
        """``fencing.issuer.TakesSlots`` and ``WakesSlots`` (``AsyncTakesSlots`` and
        ``AsyncWakesSlots``, awaited): see ``ZooKeeperFlows.acquire_slot``; the token or
        ``Busy``, as ``_run`` gives it (written once for both issuers)."""
        return self._run(self.flows.acquire_slot(group, slot, permits, holder, wait_ms))

    @contextmanager
    def _on_any_change(self, name: str, wake: Callable[[], None]) -> Iterator[None]:
        """Call ``wake`` when the lease znode's watch fires, and also on any change of
        the session's state: a watch set in a session that expires is gone with it, so
        the waiter reads again (and watches again) instead of sleeping its whole wait."""

        def listener(state: Any) -> bool:  # in kazoo's connection thread: must not block
            wake()
            return False  # stay registered until removed below

        self.client.add_listener(listener)
        try:
            with self.releases.waiting(self.lease_path(name), wake):
                yield
        finally:
            self.client.remove_listener(listener)

    @contextmanager
    def _slot_waits(self, group: str, count: int, wake: Callable[[int], None]) -> Iterator[None]:
        """Call ``wake(k)`` when the watch on the lease znode of slot ``k`` of ``group``
        fires, ``k`` below ``count``."""
        with ExitStack() as stack:
            for slot in range(count):
                path = self.lease_path(f"{group}{slot}")
                stack.enter_context(self.releases.waiting(path, partial(wake, slot)))
            yield


class ZooKeeperIssuer(BaseZooKeeperIssuer):
    """Leases and tokens in ZooKeeper, on a ``kazoo.client.KazooClient`` (see the module
    docstring). It can be inspected and force-released (``fencing.issuer.Inspects``,
    ``ForceReleases``: ``fencing status``, ``list``, ``release --force``).

    ``timeout`` (seconds) bounds every request: past it the call raises
    ``FenceUnavailable``. Start the client yourself (``client.start()``); a client made
    by ``fencing.connect`` is started on first use.
    """

    def _run(self, flow: Flow[Step, T]) -> T:
        if self._start is not None:
            self._start()
        return run_sync(flow, self)

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self._run(self.flows.acquire(name, holder))

    def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """``fencing.issuer.WakesSlots``: ``release``; the znode's deletion is the wake-up."""
        return self.release(f"{group}{slot}", token, holder)

    def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """``fencing.issuer.WakesSlots``: a watch on each slot's lease znode (``since`` is
        how many; see ``ZooKeeperFlows.first_released``)."""
        woken: list[int] = []
        released = threading.Event()

        def wake(slot: int) -> None:  # in kazoo's event thread
            woken.append(slot)
            released.set()

        count = int(since)
        with self._slot_waits(group, count, wake):
            gone = self._run(self.flows.first_released(group, count, self.releases.fire))
            if gone is None:
                released.wait(seconds)
        return gone if gone is not None else next(iter(woken), None)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self._run(self.flows.renew(name, token, holder))

    def release(self, name: str, token: int, holder: str) -> bool:
        return self._run(self.flows.release(name, token, holder))

    def status(self, name: str) -> FenceStatus:
        """``fencing.issuer.Inspects``: the fence znode, read once (leases have no expiry
        here: ``expires_in`` is ``None``). A bad name is refused before the session starts."""
        check_name(name)
        return self._run(self.flows.status(name))

    def names(self, prefix: str = "") -> Iterator[str]:
        """``fencing.issuer.Inspects``: the fences under ``/fencing`` (below the chroot)."""
        return iter(self._run(self.flows.names(prefix)))

    def rw_status(self, name: str) -> RWStatus:
        """``OperatesReadWrites``: the writer or the readers of the read-write lock."""
        return self._run(self.rw.rw_status(name))

    def rw_force_release(self, name: str) -> RWStatus:
        """``OperatesReadWrites``: end every lease of the read-write lock ``name``."""
        return self._run(self.rw.rw_force_release(name))

    def force_release(self, name: str) -> FenceStatus:
        """``fencing.issuer.ForceReleases``: delete the lease znode, whoever holds it."""
        check_name(name)
        return self._run(self.flows.force_release(name))

    def await_release(self, name: str, seconds: float) -> None:
        released = threading.Event()
        with self.releases.waiting(self.lease_path(name), released.set):
            if self._run(_one(self.flows.lease_exists(name, self.releases.fire))):
                released.wait(seconds)

    def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.WatchesLease``: up to ``seconds``, until the lease znode is
        created or deleted, or is already not the one of ``token``."""
        changed = threading.Event()
        with self._on_any_change(name, changed.set):
            if self._run(_one(self.flows.lease_token(name, self.releases.fire))) == token:
                changed.wait(seconds)


class AsyncZooKeeperIssuer(BaseZooKeeperIssuer):
    """``ZooKeeperIssuer`` for asyncio: the same flows, each kazoo call awaited.

    kazoo does its I/O in its own threads; their results reach the event loop through
    ``call_soon_threadsafe``, so the loop never blocks on ZooKeeper.
    """

    async def _run(self, flow: Flow[Step, T]) -> T:
        if self._start is not None and not self._start.started:
            await asyncio.to_thread(self._start)
        return await run_async(flow, self)

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await self._run(self.flows.acquire(name, holder))

    async def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """See ``ZooKeeperIssuer.release_slot``."""
        return await self.release(f"{group}{slot}", token, holder)

    async def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """See ``ZooKeeperIssuer.await_slot_release``."""
        loop = asyncio.get_running_loop()
        woken: list[int] = []
        released = asyncio.Event()

        def wake(slot: int) -> None:  # in kazoo's event thread
            woken.append(slot)
            with suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(released.set)

        count = int(since)
        with self._slot_waits(group, count, wake):
            gone = await self._run(self.flows.first_released(group, count, self.releases.fire))
            if gone is None:
                await wait_event(released, seconds)
        return gone if gone is not None else next(iter(woken), None)

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await self._run(self.flows.renew(name, token, holder))

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await self._run(self.flows.release(name, token, holder))

    async def status(self, name: str) -> FenceStatus:
        """``fencing.issuer.AsyncInspects``: see ``ZooKeeperIssuer.status``."""
        check_name(name)
        return await self._run(self.flows.status(name))

    async def await_release(self, name: str, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        released = asyncio.Event()

        def wake() -> None:  # in kazoo's event thread
            with suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(released.set)

        with self.releases.waiting(self.lease_path(name), wake):
            if await self._run(_one(self.flows.lease_exists(name, self.releases.fire))):
                await wait_event(released, seconds)

    async def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.AsyncWatchesLease``: see ``ZooKeeperIssuer.await_change``."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def wake() -> None:  # in kazoo's event thread
            with suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(changed.set)

        with self._on_any_change(name, wake):
            if await self._run(_one(self.flows.lease_token(name, self.releases.fire))) == token:
                await wait_event(changed, seconds)


def _one(request: Request[T]) -> Flow[Request[T], T]:
    yield request
    return request.result


class Starter:
    """Starts a kazoo client made by ``fencing.connect`` on first use, once.

    A failed start (no server answered within ``timeout``) raises ``FenceUnavailable``;
    the next call tries again.
    """

    def __init__(self, client: KazooClient, timeout: float) -> None:
        self._client = client
        self._timeout = timeout
        self.started = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        if self.started:
            return
        with self._lock:
            if self.started:
                return
            try:
                self._client.start(timeout=self._timeout)
            except Exception as exc:
                raise issuer_error("zookeeper", exc) from exc
            self.started = True

    def stop(self) -> None:
        """Stop and close the client (its session ends: its leases are released)."""
        with self._lock:
            if self.started:
                self._client.stop()
                self._client.close()
                self.started = False


class ZooKeeperFence(Fence):
    """A fence whose leases are ephemeral znodes and whose tokens are their ``czxid``.

    ``ZooKeeperFence(client, "invoice:42")`` on a started ``KazooClient``. The lease
    lasts as long as the client's session (see the module docstring); ``ttl`` sets how
    often ``hold()`` confirms it (every ttl/3).
    """

    def __init__(
        self,
        client: KazooClient,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        issuer: ZooKeeperIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        super().__init__(
            issuer or ZooKeeperIssuer(client, timeout=timeout), name, ttl, reentrant=reentrant
        )


class AsyncZooKeeperFence(AsyncFence):
    """The asyncio ``ZooKeeperFence`` (``fencing.zookeeper.aio.ZooKeeperFence``).

    Shares leases and tokens with blocking fences of the same name, on any client.
    """

    def __init__(
        self,
        client: KazooClient,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        issuer: AsyncZooKeeperIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        super().__init__(
            issuer or AsyncZooKeeperIssuer(client, timeout=timeout),
            name,
            ttl,
            reentrant=reentrant,
        )
