"""ZooKeeper read-write locks (docs/rwlock.md) as flows of kazoo requests (``Request``).

Znodes of the read-write lock ``<name>``, outside ``/fencing`` so that no fence listing
shows them::

    /fencing-rw/<encoded name>             persistent; its data version grows with each
                                           writer's take and each waiting writer's mark
    /fencing-rw/<encoded name>/w           ephemeral: the writer; data its holder id;
                                           czxid its token
    /fencing-rw/<encoded name>/m           ephemeral: the waiting writer's marker; data
                                           its holder id
    /fencing-rw/<encoded name>/r           persistent; its data version grows with each
                                           reader's take
    /fencing-rw/<encoded name>/r/<holder>  ephemeral: a reader; data the epoch, or empty
                                           for the epoch's first reader, whose czxid is it

Tokens are zxids, as a fence's: each take is one multi, whose zxid is above every
earlier one. A decision is taken on one reading and applied by a multi that holds only
while that reading does: a writer's checks the version of ``r`` read with its empty
children (a reader's take raises it) and the lock znode's (every take that makes ``r``
again raises it, so ``r``'s version is never read across two makings) and creates ``w``
(so no writer holds); a reader's
checks the version of the lock znode read while neither ``w`` nor ``m`` existed (a
writer's take and a mark raise it) and raises ``r``'s (so two first readers never both
begin an epoch). Leaving only ends a lease, which no decision relies on being there.

A writer waiting here (its marker set) takes without a reading as well, on what its
mark knew (``_take_marked``): one multi, ``setData(lock, V)`` (no writer took and no
other writer marked since, so ``m`` is its own), ``delete(r)`` and ``create(r)`` (a znode with
children cannot be deleted: no reader holds; every multi that checks ``r``'s version also
checks the lock znode's, which this one raises), then the writer's take and
``delete(m)``: so the hand-off from the last reader is one request.

A reader whose client took a read lease of the lock before acts on what that take knew
instead of reading (``Known``): one multi, ``check(lock, V)`` (no writer took and no
writer waits since), ``setData(r, Rv)`` (no reader joined since, so every reader inside
is of the epoch it joined) and ``create(r/<holder>)`` with that epoch: the fence's one
round trip. Should a check fail, the reader reads and decides as above. So an epoch can
go on across a moment with no reader inside, when no writer came between: harmless, as
nothing was written between, and the token rules hold (docs/rwlock.md). A lease this
client granted is released by one multi as well (``Versions``: the writer's checks the
lock's version of its take, so it ends only its own ``w``; a reader's znode is its
own, its holder id being fresh per grant).

Leases live as long as their holder's session, as a fence's do on ZooKeeper; so does a
waiting writer's marker (a writer that stops waiting deletes it). A waiter is woken by
watches on ``w``, ``m`` and ``r``'s children (``WatchLock``), set with one look that
ends the wait at once if the lock changed since the acquire that refused it.

Imports the flows' step and helpers (``_flows``), the layout and kazoo.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any

from kazoo.exceptions import NoNodeError, NotEmptyError

from .._base.flow import Flow
from .._base.waits import wait_event
from ..issuer import READ, WRITE, Busy, RWStatus
from ._flows import _REFUSALS, _SESSION_ENDED, Granted, Request, Versions, parse_done, unexpected
from ._layout import encode_name

#: Where the read-write locks live (see the module docstring).
RW_ROOT = "/fencing-rw"
#: ``read_state``'s ``readers`` for every reader's znode.
ALL = 1 << 20
#: Readings one acquire acts on at most (each multi that found the lock changed costs
#: one), then ``Busy``: the fence waits and tries again.
TRIES = 4


@dataclass(frozen=True)
class RWPaths:
    lock: str
    writer: str
    marker: str
    readers: str

    @classmethod
    def of(cls, name: str) -> RWPaths:
        lock = f"{RW_ROOT}/{encode_name(name)}"
        return cls(lock, f"{lock}/w", f"{lock}/m", f"{lock}/r")


@dataclass(frozen=True)
class Node:
    """A znode as read: its data, version and czxid (``None`` when absent)."""

    data: bytes
    version: int
    czxid: int

    @property
    def holder(self) -> str:
        return self.data.decode("utf-8", "replace")

    def epoch(self) -> int:
        """A reader's epoch: its data, or (the epoch's first reader) its czxid."""
        return int(self.data) if self.data else self.czxid


def _node(reply: Any) -> Node | None:
    if isinstance(reply, NoNodeError):
        return None
    data, stat = reply
    return Node(bytes(data), int(stat.version), int(stat.czxid))


def _get(path: str) -> Request[Node | None]:
    return Request(lambda client: client.get_async(path), _node, answers=(NoNodeError,))


def _listing(path: str) -> Request[tuple[list[str], int] | None]:
    """The children of ``path`` (sorted) and its data version, in one request."""
    return Request(
        lambda client: client.get_children_async(path, include_data=True),
        lambda reply: (
            None if isinstance(reply, NoNodeError) else (sorted(reply[0]), int(reply[1].version))
        ),
        answers=(NoNodeError,),
    )


#: A writer's or a marker's znode that a reading found but did not read (``read_state``).
UNREAD = Node(b"", -1, 0)


@dataclass(frozen=True)
class State:
    """One reading of a lock: its znode's version, ``r``'s, the writer and the marker
    (``None`` when absent, ``UNREAD`` when present but not read), the readers' holder
    ids, and the reader nodes read (holder id -> node)."""

    version: int
    readers_version: int
    writer: Node | None
    marker: Node | None
    names: tuple[str, ...]
    readers: dict[str, Node]


def read_state(
    paths: RWPaths, *, writer: bool = False, marker: bool = False, readers: int = 0
) -> Flow[Request[Any], State | None]:
    """The lock as read now (``None``: its znodes do not exist yet): two listings (the
    lock's children with its version, the readers' with theirs), then only what the
    caller needs: the writer's and the marker's znodes, and up to ``readers`` readers'."""
    lock, listed = _listing(paths.lock), _listing(paths.readers)
    yield lock
    yield listed
    if lock.result is None or listed.result is None:
        return None
    (children, version), (names, readers_version) = lock.result, listed.result
    found: dict[str, Node | None] = {}
    for kind, path, wanted in (("w", paths.writer, writer), ("m", paths.marker, marker)):
        found[kind] = UNREAD if kind in children else None
        if wanted and kind in children:
            node = _get(path)
            yield node
            found[kind] = node.result  # None: it ended since the listing
    nodes: dict[str, Node] = {}
    for holder in names:
        if len(nodes) >= readers:
            break
        read = _get(f"{paths.readers}/{holder}")
        yield read
        if read.result is not None:  # else it ended since the listing
            nodes[holder] = read.result
    return State(version, readers_version, found["w"], found["m"], tuple(names), nodes)


def _multi(client: Any, build: Callable[[Any], None]) -> Any:
    txn = client.transaction()
    build(txn)
    return txn.commit_async()


def _committed(reply: list[Any], refusals: tuple[type[Exception], ...] = _REFUSALS) -> Any:
    """A take's multi: the replies of its operations, or ``None`` when a condition did
    not hold (an error of ``refusals``)."""
    failed = [result for result in reply if isinstance(result, Exception)]
    if not failed:
        return reply
    if all(isinstance(result, refusals) for result in failed):
        return None
    raise unexpected(reply)


def _take(build: Callable[[Any], None]) -> Request[Any]:
    return Request(partial(_multi, build=build), _committed)


#: A marked writer's take also fails when ``r`` has a reader's znode (``_take_marked``).
_MARKED_REFUSALS = (*_REFUSALS, NotEmptyError)


def _shape(state: State) -> tuple[bool, bool, tuple[str, ...]]:
    """What a waiter watches of a reading: whether a writer holds, whether a marker is
    set, the readers' holder ids."""
    return state.writer is not None, state.marker is not None, state.names


class WatchLock:
    """Wait up to ``seconds`` until a lease of the lock may have ended: watches on the
    writer's and the marker's znodes and on the readers' children, set now; their look
    ends the wait at once when the lock is no longer as the refused acquire read it
    (``seen``, a ``_shape``), so a release in between is not missed."""

    __slots__ = ("paths", "seconds", "seen")

    def __init__(self, paths: RWPaths, seen: tuple[Any, ...] | None, seconds: float) -> None:
        self.paths, self.seen, self.seconds = paths, seen, seconds

    def _changed(self, client: Any, fire: Callable[[Any], None]) -> bool:
        """Set the watches; whether the lock changed since ``seen``."""
        paths, timeout = self.paths, self.seconds
        writer = client.exists_async(paths.writer, watch=fire)
        marker = client.exists_async(paths.marker, watch=fire)
        readers = client.get_children_async(paths.readers, watch=fire)
        try:
            stat, mark, names = (
                pending.get(timeout=timeout) for pending in (writer, marker, readers)
            )
        except Exception:  # a look that failed only ends the wait: the waiter reads again
            return True
        now = (stat is not None, mark is not None, tuple(sorted(names)))
        return self.seen is None or now != self.seen

    def perform(self, port: Any) -> None:
        woken = threading.Event()
        if not self._changed(port.client, lambda _: woken.set()):
            woken.wait(self.seconds)

    async def aperform(self, port: Any) -> None:
        loop, woken = asyncio.get_running_loop(), asyncio.Event()

        def fire(_: object) -> None:  # in kazoo's event thread
            with suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(woken.set)

        if not await asyncio.to_thread(self._changed, port.client, fire):
            await wait_event(woken, self.seconds)


@dataclass(frozen=True)
class Known:
    """What a reader's take of a lock knew as it committed: the lock znode's version
    (no writer nor marker then), ``r``'s version after it, and the epoch inside."""

    version: int
    readers_version: int
    epoch: int


class RWFlows:
    """The read-write locks' operations (``ReadWrites``, ``OperatesReadWrites``) as flows
    of kazoo requests; no I/O of their own. ``refused`` keeps, per lock name, what the
    last refused acquire read (a ``_shape``), where its waiter's watch starts; ``known``
    what the last reader's take of it knew (``Known``); ``granted`` the leases granted
    here, with the lock znode's version of a writer's take (0 for a reader's). All three
    are shortcuts, checked by the server: a stale one costs a reading, never safety."""

    MEMORY = 1024

    def __init__(self) -> None:
        self.refused: dict[str, tuple[Any, ...]] = {}
        self.known: dict[str, Known] = {}
        self.granted = Versions()
        #: lock name -> (holder id, the lock znode's version its mark set) of a writer
        #: waiting here
        self.marks: dict[str, tuple[str, int]] = {}

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> Flow[Request[Any], int | Busy]:
        """A read or write lease of ``name`` (``ttl_ms`` unused: a lease lives with its
        session)."""
        paths = RWPaths.of(name)
        known = self.known.pop(name, None) if mode == READ else None
        if known is not None:
            joined = yield from self._join(name, paths, known, holder)
            if joined is not None:
                return joined
        mark = self.marks.get(name) if mode == WRITE else None
        if mark is not None and mark[0] == holder:
            marked = yield from self._take_marked(paths, mark[1], holder)
            if marked is not None:
                self.marks.pop(name, None)
                self.granted.remember(paths.writer, marked.token, holder, marked.version)
                return marked.token
        for _ in range(TRIES):
            state = yield from read_state(
                paths, marker=mode == WRITE, readers=1 if mode == READ else 0
            )
            if state is None:
                yield Request(lambda client: client.ensure_path_async(paths.readers), bool)
                continue
            taken: int | Busy | Granted | None
            if mode == READ:
                taken = yield from self._read(name, paths, state, holder)
            else:
                taken = yield from self._write(name, paths, state, holder, queue_ms)
                if isinstance(taken, Granted):
                    self.granted.remember(paths.writer, taken.token, holder, taken.version)
                    return taken.token
            if taken is not None:
                if isinstance(taken, Busy):
                    if len(self.refused) >= self.MEMORY and name not in self.refused:
                        self.refused.clear()  # forgetting costs one early look, never safety
                    self.refused[name] = _shape(state)
                return taken
        return Busy(None)

    def _read(
        self, name: str, paths: RWPaths, state: State, holder: str
    ) -> Flow[Request[Any], int | Busy | None]:
        if state.writer is not None or state.marker is not None:
            return Busy(None)  # a writer holds, or waits: readers wait
        witness = next(iter(state.readers.values()), None)
        if state.names and witness is None:  # the one read ended meanwhile: read again
            return None
        known = Known(
            state.version, state.readers_version, 0 if witness is None else witness.epoch()
        )
        return (yield from self._join(name, paths, known, holder))

    def _join(
        self, name: str, paths: RWPaths, known: Known, holder: str
    ) -> Flow[Request[Any], int | None]:
        """A reader's take on what ``known`` says (epoch 0: none, begin one): its token,
        or ``None`` if the lock changed since (read again). ``known`` is then what this
        take knew, for the next one."""
        path = f"{paths.readers}/{holder}"

        def build(txn: Any) -> None:
            txn.check(paths.lock, known.version)
            txn.set_data(paths.readers, b"", version=known.readers_version)
            txn.create(path, b"%d" % known.epoch if known.epoch else b"", ephemeral=True)

        take = _take(build)
        yield take
        if take.result is None:
            return None
        stat = take.result[1]
        # a new epoch: the multi's zxid, the mzxid of r's setData as the czxid of the node
        epoch = known.epoch or int(stat.mzxid)
        if len(self.known) >= self.MEMORY and name not in self.known:
            self.known.clear()  # forgetting costs a reading, never safety
        self.known[name] = Known(known.version, int(stat.version), epoch)
        self.granted.remember(path, epoch, holder, 0)
        return epoch

    @staticmethod
    def _take_marked(
        paths: RWPaths, version: int, holder: str
    ) -> Flow[Request[Any], Granted | None]:
        """A waiting writer's take without a reading, on what its mark knew: one multi
        whose ``setData`` holds only while the lock znode is at ``version`` (the one its
        mark set: no writer took and no other writer marked since, so ``m`` is its own),
        and ``r`` has no child (deleted and created again: a delete fails on a znode with
        children); ``None`` if one did not hold."""

        def build(txn: Any) -> None:
            txn.set_data(paths.lock, b"", version=version)
            txn.delete(paths.readers)
            txn.create(paths.readers, b"")
            txn.create(paths.writer, holder.encode(), ephemeral=True)
            txn.delete(paths.marker)

        take = Request(partial(_multi, build=build), partial(_committed, refusals=_MARKED_REFUSALS))
        yield take
        if take.result is None:
            return None
        stat = take.result[0]  # the lock's setData: the multi's zxid, the writer's czxid
        return Granted(int(stat.mzxid), int(stat.version))

    def _write(
        self, name: str, paths: RWPaths, state: State, holder: str, queue_ms: int
    ) -> Flow[Request[Any], Granted | Busy | None]:
        marker = state.marker
        mine = marker is not None and marker.holder == holder
        if state.writer is None and not state.names:

            def build(txn: Any) -> None:
                txn.check(paths.readers, state.readers_version)
                txn.set_data(paths.lock, b"", version=state.version)
                txn.create(paths.writer, holder.encode(), ephemeral=True)
                if mine:
                    txn.delete(paths.marker)

            take = _take(build)
            yield take
            if take.result is None:
                return None
            if mine:
                self.marks.pop(name, None)
            # the multi's zxid: the mzxid of the lock's setData, the czxid of the writer
            stat = take.result[1]
            return Granted(int(stat.mzxid), int(stat.version))
        if mine and queue_ms:  # its marker as read: its own while the lock's version holds
            self.marks[name] = (holder, state.version)
        elif mine:  # it waits no more
            self.marks.pop(name, None)
            yield Request(
                lambda client: client.delete_async(paths.marker), bool, answers=(NoNodeError,)
            )
        elif queue_ms and marker is None:

            def mark(txn: Any) -> None:
                txn.set_data(paths.lock, b"")
                txn.create(paths.marker, holder.encode(), ephemeral=True)

            marking = _take(mark)
            yield marking
            if marking.result is not None:
                if len(self.marks) >= self.MEMORY and name not in self.marks:
                    self.marks.clear()  # forgetting costs a reading, never safety
                self.marks[name] = (holder, int(marking.result[0].version))
        return Busy(None)

    @staticmethod
    def _lease(
        name: str, mode: str, token: int, holder: str
    ) -> Flow[Request[Any], tuple[str, Node] | None]:
        """The path and node of that exact lease, ``None`` if it is not held."""
        paths = RWPaths.of(name)
        path = f"{paths.readers}/{holder}" if mode == READ else paths.writer
        read = _get(path)
        yield read
        node = read.result
        if node is None:
            return None
        if mode == READ:
            return (path, node) if node.epoch() == token else None
        return (path, node) if node.czxid == token and node.holder == holder else None

    def rw_renew(
        self, name: str, mode: str, token: int, holder: str, ttl_ms: int
    ) -> Flow[Request[Any], bool]:
        """Whether that exact lease is still held (it lives with its session)."""
        return (yield from self._lease(name, mode, token, holder)) is not None

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Flow[Request[Any], bool]:
        paths = RWPaths.of(name)
        path = f"{paths.readers}/{holder}" if mode == READ else paths.writer
        version = self.granted.get(path, token, holder)
        self.granted.forget(path, token, holder)
        if version is not None:  # granted here: one multi (a writer's: if still its own)

            def end(txn: Any) -> None:
                if mode == WRITE:
                    txn.check(paths.lock, version)
                txn.delete(path)

            ended = Request(partial(_multi, build=end), parse_done, answers=_SESSION_ENDED)
            yield ended
            if ended.result or mode == READ:
                return ended.result
            # else a writer marked since the take (or the lease ended): look
        lease = yield from self._lease(name, mode, token, holder)
        if lease is None:
            return False
        path, node = lease

        def build(txn: Any) -> None:
            txn.delete(path, version=node.version)

        delete = Request(partial(_multi, build=build), parse_done)
        yield delete
        return delete.result

    def rw_await(self, name: str, seconds: float) -> Flow[WatchLock, None]:
        yield WatchLock(RWPaths.of(name), self.refused.get(name), seconds)

    def rw_status(self, name: str) -> Flow[Request[Any], RWStatus]:
        state = yield from read_state(RWPaths.of(name), writer=True, marker=True, readers=ALL)
        return _status(name, state)

    def rw_force_release(self, name: str) -> Flow[Request[Any], RWStatus]:
        """Delete the writer's znode or every reader's, as read, in one multi (read again
        if one changed meanwhile); the next take's zxid, so its token, is higher."""
        paths = RWPaths.of(name)
        while True:
            state = yield from read_state(paths, writer=True, marker=True, readers=ALL)
            ended = _status(name, state)
            if state is None or not ended.held:
                return ended

            def build(txn: Any, state: State = state) -> None:
                if state.writer is not None:
                    txn.delete(paths.writer, version=state.writer.version)
                for holder, node in state.readers.items():
                    txn.delete(f"{paths.readers}/{holder}", version=node.version)

            delete = Request(partial(_multi, build=build), parse_done)
            yield delete
            if delete.result:
                return ended


def _status(name: str, state: State | None) -> RWStatus:
    if state is None:
        return RWStatus(name, False)
    waiting = None if state.marker is None else state.marker.holder
    if state.writer is not None:
        token = state.writer.czxid
        return RWStatus(name, True, WRITE, token, {state.writer.holder: None}, waiting, token)
    if state.readers:
        token = next(iter(state.readers.values())).epoch()
        holders: dict[str, float | None] = dict.fromkeys(state.readers)
        return RWStatus(name, True, READ, token, holders, waiting, token)
    return RWStatus(name, False, waiting=waiting)
