"""The ZooKeeper issuer's operations as flows of kazoo requests, and the one step they yield.

Every operation is written once, as a flow (see ``_flow``) of ``Request`` steps. A step
starts one asynchronous kazoo call (every kazoo call has an ``..._async`` form returning
an ``IAsyncResult``); the blocking driver waits for that result, the asyncio driver
awaits it through ``future_of`` (kazoo's completion thread hands the outcome to the
event loop with ``call_soon_threadsafe``). Nothing else differs between the two.

The operations (znodes as in ``_layout``; ``V`` is the fence znode's data version)::

    acquire  multi[setData(fence, holder), create(lease, holder, EPHEMERAL)]
             -> token = the setData's mzxid = the lease's czxid (one transaction, one
                zxid); V after it names this lease. NodeExists: ``Busy``. NoNode: the
                fence znode is missing; create it, try once more.
    slot     multi[setData(fence, holder), create(lease, holder, EPHEMERAL),
                   check(width, W) | setData(width, slot + 1, W)]
             -> a semaphore's slot (``acquire_slot``); W is the width znode's version
    renew    multi[check(fence, V), check(lease)]   (both unchanged: still ours)
    release  multi[check(fence, V), delete(lease)]

Renew and release compare the holder atomically through ``V``: every acquire of the
name changes the fence znode's version in the same transaction that creates the lease,
so ``check(fence, V)`` fails as soon as anyone else took the lease since. (A znode's
own version cannot do this: a lease znode created again starts at version 0 again.) The
issuer remembers ``V`` of the leases it granted; for any other (token, holder) it reads
the fence znode first and goes on only if its data is ``holder`` and its mzxid is
``token``, which is also how a wrong holder or token is refused.

Imports the core (errors, flows, ``Busy``), the layout and kazoo.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from .._base.errors import issuer_error
from .._base.flow import Flow, run_async, run_sync
from ..issuer import Busy, FenceStatus, SlotBusy
from ._layout import ROOT, FencePaths, decode_name, width_path

R = TypeVar("R")
log = logging.getLogger("fencing.zookeeper")

#: Replies of a failed multi that mean "the condition did not hold", not "unavailable"
#: (the operations after the failed one are reported as RuntimeInconsistency).
_REFUSALS = (BadVersionError, NoNodeError, NodeExistsError, RolledBackError, RuntimeInconsistency)
#: Replies that mean "this client's session ended": every lease it created is gone with
#: it, so renew and release can answer False at once (a closed client is one too).
_SESSION_ENDED = (SessionExpiredError,)


class KazooResult(Protocol):
    """What a kazoo ``..._async`` call returns (``kazoo.interfaces.IAsyncResult``)."""

    def get(self, block: bool = True, timeout: float | None = None) -> Any: ...

    def get_nowait(self) -> Any: ...

    def rawlink(self, callback: Callable[[Any], None]) -> None: ...


class Port(Protocol):
    """What a step is carried out on: the kazoo client and the per-request timeout."""

    client: Any
    timeout: float


def future_of(pending: KazooResult, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
    """An asyncio future settled, on ``loop``, with the outcome of a kazoo call."""
    future: asyncio.Future[Any] = loop.create_future()

    def settle() -> None:
        if future.done():  # cancelled meanwhile
            return
        try:
            future.set_result(pending.get_nowait())
        except BaseException as exc:
            future.set_exception(exc)

    def done(_: object) -> None:  # in kazoo's completion thread
        with suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle)

    pending.rawlink(done)
    return future


class Request(Generic[R]):
    """One kazoo call: ``start(client)`` sends it, ``parse(reply)`` reads the reply.

    Errors listed in ``answers`` are replies (``parse`` gets the error); other kazoo
    errors and timeouts become ``FenceUnavailable``. When the call may have taken effect
    without us learning it (a timeout, a lost connection, an interrupt, a cancellation),
    ``unsettled(client, pending)`` is called first, so that an acquire can give back a
    lease it may have taken.
    """

    __slots__ = ("answers", "parse", "result", "start", "unsettled")
    result: R

    def __init__(
        self,
        start: Callable[[Any], KazooResult],
        parse: Callable[[Any], R],
        *,
        answers: tuple[type[Exception], ...] = (),
        unsettled: Callable[[Any, KazooResult], None] | None = None,
    ) -> None:
        self.start = start
        self.parse = parse
        self.answers = answers
        self.unsettled = unsettled

    def perform(self, port: Port) -> None:
        run_sync(self._attempts(port), port)

    async def aperform(self, port: Port) -> None:
        await run_async(self._attempts(port), port)

    def _attempts(self, port: Port) -> Flow[_Reply | Sleep, None]:
        """Send the call and keep its reply (an error in ``answers`` too) in ``result``;
        sent again while the client sets up its next session (``_between_sessions``), up
        to ``port.timeout``; any other error is raised, as ``_failed`` makes it. A flow
        of its own, so ``perform`` and ``aperform`` only drive it."""
        deadline = time.monotonic() + port.timeout
        while True:
            pending = self.start(port.client)
            reply = _Reply(pending)
            try:
                yield reply
            except self.answers as exc:
                reply.result = exc
            except BaseException as exc:
                if _between_sessions(exc) and time.monotonic() < deadline:
                    yield Sleep(RECONNECT_POLL)
                    continue
                raise self._failed(port, pending, exc) from exc
            self.result = self.parse(reply.result)
            return

    def _failed(self, port: Port, pending: KazooResult, exc: BaseException) -> BaseException:
        if self.unsettled is not None:
            self.unsettled(port.client, pending)
        if isinstance(exc, (KazooException, KazooTimeoutError, asyncio.TimeoutError)):
            return issuer_error("zookeeper", exc)
        return exc  # an interrupt or a cancellation goes on as it is


class _Reply:
    """One attempt of a ``Request``: wait for the kazoo call's outcome, at most the
    port's timeout (an error is raised into the ``Request``'s attempts)."""

    __slots__ = ("pending", "result")
    result: Any

    def __init__(self, pending: KazooResult) -> None:
        self.pending = pending

    def perform(self, port: Port) -> None:
        self.result = self.pending.get(timeout=port.timeout)

    async def aperform(self, port: Port) -> None:
        future = future_of(self.pending, asyncio.get_running_loop())
        self.result = await asyncio.wait_for(future, port.timeout)


class Sleep:
    """A pause of ``seconds`` in a flow: a look at a client setting up its next session
    (``RECONNECT_POLL``), a read-write lock's waiter between two looks."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def perform(self, port: object) -> None:
        time.sleep(self.seconds)

    async def aperform(self, port: object) -> None:
        await asyncio.sleep(self.seconds)


#: Seconds between two looks at a client that is setting up its next session.
RECONNECT_POLL = 0.01


def _between_sessions(exc: BaseException) -> bool:
    """The request was refused because the client's session had ended, and the client is
    setting up the next one by itself: nothing was applied, so the request may be sent
    again (until ``timeout``) once it is connected. A closed client never will be."""
    return isinstance(exc, SessionExpiredError) and not isinstance(exc, ConnectionClosedError)


class Versions:
    """``V`` of the leases an issuer granted: (fence path, token, holder) -> version.

    Only a shortcut (a lease not found here is looked up on the server), so it is
    bounded: past ``LIMIT`` leases never released the oldest entry goes.
    """

    LIMIT = 10_000

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, str], int] = {}
        self._lock = threading.Lock()

    def remember(self, path: str, token: int, holder: str, version: int) -> None:
        with self._lock:
            if len(self._known) >= self.LIMIT:
                del self._known[next(iter(self._known))]
            self._known[(path, token, holder)] = version

    def get(self, path: str, token: int, holder: str) -> int | None:
        return self._known.get((path, token, holder))

    def forget(self, path: str, token: int, holder: str) -> None:
        with self._lock:
            self._known.pop((path, token, holder), None)


@dataclass(frozen=True)
class Granted:
    """An acquire's outcome: the token, and the fence znode's version that names it."""

    token: int
    version: int


@dataclass(frozen=True)
class FenceNode:
    """What the fence znode says: the last acquirer, its token (mzxid), ``V``, and
    whether its lease znode exists (the fence znode's one possible child)."""

    holder: str
    token: int
    version: int
    held: bool

    def status(self, name: str) -> FenceStatus:
        """As ``fencing status`` reports it; the token is the last acquire's while the
        lease is held (nothing else changes the fence znode meanwhile)."""
        last = self.token if self.version > 0 else None  # version 0: never acquired
        if not self.held:
            return FenceStatus(name, held=False, last_token=last)
        return FenceStatus(name, True, self.holder, self.token, None, last)


#: ``parse_take``'s reply when the fence znode does not exist yet.
MISSING = object()


def parse_take(reply: list[Any]) -> Granted | Busy | object:
    """The acquire multi's reply: ``Granted``, ``Busy`` or ``MISSING``."""
    first, second = reply
    if isinstance(first, NoNodeError):
        return MISSING
    if isinstance(second, NodeExistsError):
        return Busy(None)
    if isinstance(first, Exception) or isinstance(second, Exception):
        raise issuer_error("zookeeper", unexpected(reply))
    return Granted(first.mzxid, first.version)


#: ``parse_slot_take``'s reply when the width znode changed (or is gone) since it was read.
STALE = object()


def parse_slot_take(reply: list[Any]) -> Granted | Busy | object:
    """A slot's acquire multi's reply: ``Granted``, ``Busy``, ``MISSING`` or ``STALE``."""
    first, second, third = reply
    if isinstance(first, NoNodeError):
        return MISSING
    if isinstance(second, NodeExistsError):
        return Busy(None)
    if isinstance(third, (BadVersionError, NoNodeError)):
        return STALE
    if any(isinstance(result, Exception) for result in reply):
        raise issuer_error("zookeeper", unexpected(reply))
    return Granted(first.mzxid, first.version)


def parse_width(reply: tuple[bytes, Any] | NoNodeError) -> tuple[int, int] | None:
    """A width znode's (width, version), ``None`` if it does not exist."""
    if isinstance(reply, NoNodeError):
        return None
    data, stat = reply
    try:
        return int(data or b"0"), int(stat.version)
    except ValueError:
        raise issuer_error("zookeeper", unexpected(reply)) from None


def parse_done(reply: list[Any] | SessionExpiredError) -> bool:
    """A renew or release multi's reply: True if every condition held; False if one did
    not, or if the session ended."""
    if isinstance(reply, _SESSION_ENDED):
        return False
    failed = [result for result in reply if isinstance(result, Exception)]
    if not failed:
        return True
    if all(isinstance(result, _REFUSALS) for result in failed):
        return False
    raise issuer_error("zookeeper", unexpected(reply))


def unexpected(reply: object) -> KazooException:
    return KazooException(f"unexpected reply {reply!r}")


def parse_fence_node(
    reply: tuple[bytes, Any] | NoNodeError | SessionExpiredError,
) -> FenceNode | None:
    if isinstance(reply, (NoNodeError, *_SESSION_ENDED)):
        return None
    data, stat = reply
    return FenceNode(
        data.decode("utf-8", "replace"), stat.mzxid, stat.version, stat.numChildren > 0
    )


class ZooKeeperFlows:
    """The issuer's operations for one client, as flows; no I/O of their own.

    ``versions`` is the issuer's memory of the leases it granted: (fence path, token,
    holder) -> the fence znode's version ``V`` (see the module docstring).
    """

    #: Attempts of a slot's acquire: a missing fence or width znode, or a width raised by
    #: another client meanwhile, each cost one (widths only grow, to at most 1024).
    SLOT_TRIES = 8
    #: How many semaphores' widths are kept (past it, all are forgotten and read again).
    MEMORY = 1024

    def __init__(self, versions: Versions) -> None:
        self.versions = versions
        #: group -> (width, version) of the semaphores' width znodes as last seen
        self.widths: dict[str, tuple[int, int]] = {}

    def acquire(self, name: str, holder: str) -> Flow[Request[Any], int | Busy]:
        paths = FencePaths.of(name)
        value = holder.encode()
        for attempt in range(2):
            take = Request(
                lambda client: _take(client, paths, value),
                parse_take,
                unsettled=lambda client, pending: pending.rawlink(
                    lambda _: reclaim(client, paths, holder)
                ),
            )
            yield take
            reply = take.result
            if isinstance(reply, Granted):
                self.versions.remember(paths.fence, reply.token, holder, reply.version)
                return reply.token
            if isinstance(reply, Busy):
                return reply
            if attempt == 0:  # MISSING: the first acquire of this name
                yield Request(lambda client: client.ensure_path_async(paths.fence), bool)
        raise issuer_error("zookeeper", KazooException(f"{paths.fence} vanished twice"))

    def acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, wait_ms: int = 0
    ) -> Flow[Request[Any], int | Busy]:
        """``acquire`` of the slot ``<group><slot>``, only while fewer than ``permits``
        other slots are held (``TakesSlots``). The take's multi also checks the version
        of the semaphore's width znode (see ``_layout``), or raises the width when the
        slot is at or above it; so when the width is at most ``permits``, no slot above
        ours can be held, and the take is all there is (one round trip). Else the
        slots' lease znodes are read after the take (this session's requests are served
        in order, by a server that has applied the take and every earlier one), and a
        take that makes more than ``permits`` is released again: sound as on etcd (see
        ``fencing.etcd``), since a holder let in counted every earlier live one.

        With ``wait_ms`` (``WakesSlots``), a refusal is a ``SlotBusy`` whose mark is only
        how many slots to watch (see ``first_released``): ZooKeeper keeps no trace of a
        deleted znode to mark a release by, and a waiter needs none (``_refused``)."""
        name = f"{group}{slot}"
        paths, width_at, value = FencePaths.of(name), width_path(group), holder.encode()
        for _ in range(self.SLOT_TRIES):
            known = self.widths.get(group)
            if known is None:
                read = Request(partial(_get, path=width_at), parse_width, answers=(NoNodeError,))
                yield read
                if read.result is None:
                    yield Request(partial(_create, path=width_at), bool, answers=(NodeExistsError,))
                    continue
                if len(self.widths) >= self.MEMORY:
                    self.widths.clear()  # forgetting costs a read, never safety
                known = self.widths[group] = read.result
            width, version = known
            grown = slot + 1 if slot >= width else None
            take = Request(
                partial(_take, paths=paths, value=value, width=(width_at, version, grown)),
                parse_slot_take,
                unsettled=lambda client, pending: pending.rawlink(
                    lambda _: reclaim(client, paths, holder)
                ),
            )
            yield take
            reply = take.result
            if reply is MISSING:
                yield Request(partial(_ensure, path=paths.fence), bool)
            elif reply is STALE:
                self.widths.pop(group, None)
            elif isinstance(reply, Busy):
                return _refused(permits, wait_ms, width)
            elif isinstance(reply, Granted):
                self.versions.remember(paths.fence, reply.token, holder, reply.version)
                if grown is not None:
                    self.widths[group] = (grown, version + 1)
                if max(width, slot + 1) <= permits:
                    return reply.token
                held = 0
                for other in range(max(width, slot + 1)):
                    if other != slot:
                        lease = FencePaths.of(f"{group}{other}").lease
                        probe = Request(partial(_exists, path=lease), _is_not_none)
                        yield probe
                        held += probe.result
                if held < permits:
                    return reply.token
                yield from self.release(name, reply.token, holder)  # over: give it back
                return _refused(permits, wait_ms, max(width, slot + 1))
        raise issuer_error("zookeeper", KazooException(f"{width_at} kept changing"))

    def renew(self, name: str, token: int, holder: str) -> Flow[Request[Any], bool]:
        paths = FencePaths.of(name)
        version = yield from self._version_of(paths, token, holder)
        if version is None:
            return False
        held = yield from _on_version(paths, version, delete=False, answers=_SESSION_ENDED)
        if not held:
            self.versions.forget(paths.fence, token, holder)
        return held

    def release(self, name: str, token: int, holder: str) -> Flow[Request[Any], bool]:
        paths = FencePaths.of(name)
        version = yield from self._version_of(paths, token, holder)
        self.versions.forget(paths.fence, token, holder)
        if version is None:
            return False
        return (yield from _on_version(paths, version, delete=True, answers=_SESSION_ENDED))

    def _version_of(
        self, paths: FencePaths, token: int, holder: str
    ) -> Flow[Request[Any], int | None]:
        """``V`` of the lease ``token``/``holder``; ``None`` if it is not the last one."""
        known = self.versions.get(paths.fence, token, holder)
        if known is not None:
            return known
        owner = yield from _owner(paths, answers=(NoNodeError, *_SESSION_ENDED))
        if owner is None or owner.holder != holder or owner.token != token:
            return None
        return owner.version

    # -- operations (fencing.issuer.Inspects, ForceReleases) ------------------------------

    def status(self, name: str) -> Flow[Request[Any], FenceStatus]:
        """One read of the fence znode: its data, version and number of children."""
        owner = yield from _owner(FencePaths.of(name))
        return FenceStatus(name, held=False) if owner is None else owner.status(name)

    def names(self, prefix: str) -> Flow[Request[Any], list[str]]:
        listing = Request(
            lambda client: client.get_children_async(ROOT), _children, answers=(NoNodeError,)
        )
        yield listing
        names = (decode_name(segment) for segment in listing.result)
        return sorted(name for name in names if name.startswith(prefix))

    def force_release(self, name: str) -> Flow[Request[Any], FenceStatus]:
        """Delete the lease znode if the fence znode still has the version read with it:
        the lease ended is exactly the one reported. The next acquire's zxid, so its
        token, is higher, as always."""
        paths = FencePaths.of(name)
        while True:
            owner = yield from _owner(paths)
            if owner is None or not owner.held:
                return FenceStatus(name, held=False) if owner is None else owner.status(name)
            if (yield from _on_version(paths, owner.version, delete=True)):
                return owner.status(name)  # else it changed meanwhile: look again

    @staticmethod
    def lease_exists(name: str, watch: Callable[[Any], None]) -> Request[bool]:
        """Whether the lease znode of ``name`` exists, leaving ``watch`` on it."""
        path = FencePaths.of(name).lease
        return Request(lambda client: client.exists_async(path, watch=watch), _is_not_none)

    def first_released(
        self, group: str, count: int, watch: Callable[[Any], None]
    ) -> Flow[Request[Any], int | None]:
        """Leave ``watch`` on the lease znode of each of the slots ``<group><k>``, ``k`` below
        ``count`` (``WakesSlots``): the first slot whose znode is already gone, else
        ``None`` (every watch is set, and fires at the znode's deletion). Each look and
        its watch are one atomic step of the server, so a slot released after the
        waiter's refused take is either found gone here or wakes it: none is missed."""
        for slot in range(count):
            exists = self.lease_exists(f"{group}{slot}", watch)
            yield exists
            if not exists.result:
                return slot
        return None

    @staticmethod
    def lease_token(name: str, watch: Callable[[Any], None]) -> Request[int | None]:
        """The token (``czxid``) of the lease znode of ``name``, ``None`` if there is none,
        leaving ``watch`` on it (it fires on its creation and on its deletion)."""
        path = FencePaths.of(name).lease
        return Request(lambda client: client.exists_async(path, watch=watch), _czxid)


def _refused(permits: int, wait_ms: int, width: int) -> Busy:
    """A slot take's refusal: with ``wait_ms``, marked with how many slots to watch.

    While no slot at or above ``permits`` was ever taken (``width``), a slot below it
    that is free when its watch is set was released after the refusal: all ``permits``
    are watched. Past it (clients of one name with different permits), a free slot may
    be one the count refused, whose absence would end every wait at once, the waiter
    trying again without pause for as long as the others hold their slots: none is
    watched, and the waiter tries again after its longest block (a second)."""
    if not wait_ms:
        return Busy(None)
    return SlotBusy(None, str(permits if width <= permits else 0))


def _owner(
    paths: FencePaths, answers: tuple[type[Exception], ...] = (NoNodeError,)
) -> Flow[Request[Any], FenceNode | None]:
    """Read the fence znode; ``None`` if it does not exist (or, per ``answers``, if the
    session ended)."""
    read = Request(lambda client: client.get_async(paths.fence), parse_fence_node, answers=answers)
    yield read
    return read.result


def _children(reply: list[str] | NoNodeError) -> list[str]:
    return [] if isinstance(reply, NoNodeError) else list(reply)


def _czxid(reply: Any) -> int | None:
    return None if reply is None else int(reply.czxid)


def _is_not_none(reply: object) -> bool:
    return reply is not None


def _take(
    client: Any,
    paths: FencePaths,
    value: bytes,
    width: tuple[str, int, int | None] | None = None,
) -> KazooResult:
    """Send acquire's multi[setData(fence), create(lease)]; with ``width`` (path,
    version, grown), a slot's: also check(path, version), or setData(path, grown,
    version) when ``grown`` is not ``None``."""
    txn = client.transaction()
    txn.set_data(paths.fence, value)
    txn.create(paths.lease, value, ephemeral=True)
    if width is not None:
        path, version, grown = width
        if grown is None:
            txn.check(path, version)
        else:
            txn.set_data(path, b"%d" % grown, version=version)
    pending: KazooResult = txn.commit_async()
    return pending


def _get(client: Any, path: str) -> KazooResult:
    pending: KazooResult = client.get_async(path)
    return pending


def _exists(client: Any, path: str) -> KazooResult:
    pending: KazooResult = client.exists_async(path)
    return pending


def _create(client: Any, path: str) -> KazooResult:
    """Create a width znode (``0``), and its parent if missing."""
    pending: KazooResult = client.create_async(path, b"0", makepath=True)
    return pending


def _ensure(client: Any, path: str) -> KazooResult:
    pending: KazooResult = client.ensure_path_async(path)
    return pending


def _versioned(client: Any, paths: FencePaths, version: int, *, delete: bool) -> KazooResult:
    """Send renew's multi[check(fence, V), check(lease)] or, with ``delete``, release's
    multi[check(fence, V), delete(lease)], ``version`` as V: it acts on the lease only if
    the lease is the one granted with V."""
    txn = client.transaction()
    txn.check(paths.fence, version)
    if delete:
        txn.delete(paths.lease)
    else:
        txn.check(paths.lease, -1)
    pending: KazooResult = txn.commit_async()
    return pending


def _on_version(
    paths: FencePaths, version: int, *, delete: bool, answers: tuple[type[Exception], ...] = ()
) -> Flow[Request[Any], bool]:
    """``_versioned`` as a step: True when both conditions held, False when one did not
    (or, per ``answers``, the session ended)."""
    multi = Request(
        partial(_versioned, paths=paths, version=version, delete=delete),
        parse_done,
        answers=answers,
    )
    yield multi
    return multi.result


def reclaim(client: Any, paths: FencePaths, holder: str) -> None:
    """Give back a lease an acquire may have taken without learning it (its reply was
    lost, or came after we gave up): read the fence znode and, if ``holder`` was its
    last acquirer, end that lease. Best effort and never blocking (kazoo's callbacks
    chain the two calls); a lease left over still ends with this client's session.
    """

    def read(done: KazooResult) -> None:
        try:
            data, stat = done.get_nowait()
            if data == holder.encode():
                log.info(
                    "%s: giving back the lease of %s, whose acquire was unsettled",
                    paths.fence,
                    holder,
                )
                _versioned(client, paths, stat.version, delete=True)
        except Exception as exc:
            log.debug("%s: lease of %s not reclaimed: %r", paths.fence, holder, exc)

    try:
        client.get_async(paths.fence).rawlink(read)
    except Exception as exc:
        log.debug("%s: lease of %s not reclaimed: %r", paths.fence, holder, exc)
