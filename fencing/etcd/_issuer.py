"""The etcd issuer, written once as flows (``EtcdFlows``) and driven blocking
(``EtcdIssuer``, on ``Cluster``) or asyncio (``AsyncEtcdIssuer``, on ``AsyncCluster``).

Each operation, as calls of the etcd v3 API (messages in ``_messages``):

- acquire: a lease (``LeaseGrant``, the server grants the TTL; or one the issuer kept,
  see ``_leases``), then one ``Txn`` that creates the fence's key on that lease only if
  the key does not exist. The token is the revision of that creation. A kept lease is
  then kept alive (``LeaseKeepAlive``), so it runs its full TTL from the acquire. When
  the key exists the reply is ``Busy``, the lease is kept for the next attempt, and the
  key's revision is remembered for the wait.
- renew: one ``Txn`` that compares the key's create revision (the token) and value (the
  holder id) and reads the key's lease, then a ``LeaseKeepAlive`` of that lease, which
  restarts its TTL. A renew that asks for a longer TTL than the lease has moves the key
  to a new lease in a ``Txn`` with the same compares (a put keeps the create revision)
  and revokes the old one. A lease is never shortened: etcd's TTL is fixed at grant.
- release: one ``Txn`` that deletes the key under the same compares; the lease it was
  on, with no key left, is kept for the next acquire of the name (or revoked).
- wait (``WakesOnRelease``): a ``Watch`` of the key's deletions from the revision at
  which it was seen taken, so a release (or the lease's expiry, which deletes the key)
  that happened in between is replayed rather than missed (see ``WatchRelease``).
- a semaphore's slot (``TakesSlots``): the acquire's ``Txn`` also reads the keys of the
  semaphore's slots, and a take that makes more than the caller's permits is deleted
  again (see ``EtcdFlows.acquire``).
- a semaphore's waiter (``WakesSlots``): a refused take's mark is the revision of its
  ``Txn``, and the waiter watches the slots' key range for deletions after it
  (``WatchSlots``), so the release or expiry of any slot wakes it; a release is the
  plain one (the deletion is the signal, nothing more is written).

Imports the core (fences, flows, errors), the messages, the cluster ports and grpcio.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar

import grpc

from .._base.errors import FenceUnavailable
from .._base.flow import Flow, run_async, run_sync
from .._base.owned import OldClose
from .._lease.async_fence import AsyncFence
from .._lease.core import DEFAULT_TTL
from .._lease.fence import Fence
from ..issuer import READ, WRITE, Busy, FenceStatus, RWStatus, SlotBusy
from . import _messages as msg
from . import _rw_messages as rw
from ._cluster import AsyncCluster, Cluster, client_core_failed
from ._leases import Lease, LeasePool
from ._url import EtcdOptions, parse_etcd_url

R = TypeVar("R")

# -- steps: the only I/O of the etcd issuer ----------------------------------------------------


class Unary(Generic[R]):
    """One unary call: ``method`` of the member's ``service`` stub with ``request``.

    ``result`` is the reply, or ``None`` for ``NOT_FOUND`` when ``missing_ok`` (a lease
    that has already expired). The same call object serves both ports: a blocking stub
    returns the reply, an asyncio stub an awaitable of it.
    """

    __slots__ = ("method", "missing_ok", "request", "result", "service")
    result: R

    def __init__(self, service: str, method: str, request: Any, missing_ok: bool = False) -> None:
        self.service = service
        self.method = method
        self.request = request
        self.missing_ok = missing_ok

    def _attempt(self, member: Any, seconds: float, metadata: Any) -> Any:
        stub = getattr(member, self.service)
        return getattr(stub, self.method)(self.request, timeout=seconds, metadata=metadata)

    def perform(self, port: Cluster) -> None:
        self.result = port.call(self._attempt, missing_ok=self.missing_ok)  # type: ignore[assignment]

    async def aperform(self, port: AsyncCluster) -> None:
        self.result = await port.call(self._attempt, missing_ok=self.missing_ok)  # type: ignore[assignment]


class Received:
    """The next reply of a stream call (a watch, a keep-alive), ``None`` at its end: the
    steps of ``KeepAlive``'s and ``WatchRelease``'s attempts, so that each is written
    once, as a flow (the port is unused: the call is the member's)."""

    __slots__ = ("call", "result")
    result: Any

    def __init__(self, call: Any) -> None:
        self.call = call

    def perform(self, port: None) -> None:
        self.result = next(self.call, None)

    async def aperform(self, port: None) -> None:
        reply = await self.call.read()
        self.result = None if reply is grpc.aio.EOF else reply


class LocalRead:
    """A ``Range`` (a local, serializable read, ``msg.peek``) on the watch's member."""

    __slots__ = ("member", "metadata", "request", "result", "seconds")
    result: Any

    def __init__(self, member: Any, request: Any, seconds: float, metadata: Any) -> None:
        self.member, self.request, self.seconds, self.metadata = member, request, seconds, metadata

    def _read(self) -> Any:
        return self.member.kv.Range(self.request, timeout=self.seconds, metadata=self.metadata)

    def perform(self, port: None) -> None:
        self.result = self._read()

    async def aperform(self, port: None) -> None:
        self.result = await self._read()


class KeepAlive:
    """One ``LeaseKeepAlive`` round: the lease's TTL restarted; ``result`` is its TTL in
    seconds, 0 when the lease no longer exists."""

    __slots__ = ("request", "result")
    result: int

    def __init__(self, lease: int) -> None:
        self.request = msg.keepalive(lease)

    def _open(self, member: Any, seconds: float, metadata: Any) -> Any:
        return member.lease.LeaseKeepAlive(iter([self.request]), timeout=seconds, metadata=metadata)

    def _round(self, member: Any, seconds: float, metadata: Any) -> Flow[Received, int]:
        call = self._open(member, seconds, metadata)
        try:
            received = Received(call)
            yield received
            return 0 if received.result is None else int(received.result.TTL)
        finally:
            call.cancel()

    def _attempt(self, member: Any, seconds: float, metadata: Any) -> int:
        return run_sync(self._round(member, seconds, metadata), None)

    async def _aattempt(self, member: Any, seconds: float, metadata: Any) -> int:
        return await run_async(self._round(member, seconds, metadata), None)

    def perform(self, port: Cluster) -> None:
        self.result = port.call(self._attempt) or 0

    async def aperform(self, port: AsyncCluster) -> None:
        self.result = await port.call(self._aattempt) or 0


class WatchRelease:
    """Block up to ``seconds`` until the key is deleted after revision ``after``.

    etcd replays events since ``after`` to a watch created later, but only from a
    background loop that runs every 100 ms: a release that came before the watch would
    wake the waiter up to 100 ms late. So when the watch's ``created`` reply shows that
    the store has moved past ``after``, one local (serializable) read of the key decides
    at once: gone or changed, and the wait ends. Ends quietly at its deadline (that is
    the wait's end, not a failure); a member that goes away is replaced by the next one,
    like any call.
    """

    __slots__ = ("after", "checks", "request", "seconds")

    def __init__(self, key: bytes, after: int, seconds: float) -> None:
        self.request = msg.watch_release(key, after)
        self.checks = [msg.peek(key)]
        self.after = after
        self.seconds = seconds

    def _open(self, member: Any, seconds: float, metadata: Any) -> Any:
        return member.watch.Watch(iter([self.request]), timeout=seconds, metadata=metadata)

    def _moved_on(self, reply: Any) -> bool:
        """A ``created`` reply from a store past ``after``: events may be waiting."""
        return bool(reply.created) and 0 < self.after < int(reply.header.revision)

    def _ended(self, reply: Any) -> bool:
        """The reply ends the wait: deleted, or compacted past ``after``."""
        return bool(reply.events) or bool(reply.canceled)

    def _gone(self, peeks: list[Any]) -> bool:
        """What the local reads (``checks``) after ``_moved_on`` say: the wait is over."""
        return msg.changed_since(peeks[0], self.after)

    def _quiet(self, exc: grpc.RpcError) -> bool:
        """An error that only ends the wait (``_ran_out``)."""
        return _ran_out(exc)

    def _watch(
        self, member: Any, seconds: float, metadata: Any
    ) -> Flow[Received | LocalRead, None]:
        """The watch's replies until one ends the wait (or the stream, or the time,
        ends); after a ``_moved_on`` reply, the local reads of ``checks``."""
        call = self._open(member, seconds, metadata)
        try:
            while True:
                received = Received(call)
                yield received
                reply = received.result
                if reply is None or self._ended(reply):
                    return
                if self._moved_on(reply):
                    peeks = [LocalRead(member, check, seconds, metadata) for check in self.checks]
                    yield from peeks
                    if self._gone([peek.result for peek in peeks]):
                        return
        except grpc.RpcError as exc:
            if not self._quiet(exc):
                raise
        finally:
            call.cancel()

    def _attempt(self, member: Any, seconds: float, metadata: Any) -> None:
        run_sync(self._watch(member, seconds, metadata), None)

    async def _aattempt(self, member: Any, seconds: float, metadata: Any) -> None:
        await run_async(self._watch(member, seconds, metadata), None)

    def perform(self, port: Cluster) -> None:
        port.call(self._attempt, timeout=self.seconds)

    async def aperform(self, port: AsyncCluster) -> None:
        await port.call(self._aattempt, timeout=self.seconds)


class WatchChange(WatchRelease):
    """Block up to ``seconds`` until the key may no longer hold the lease of ``token``
    (``None``: until a lease may exist): a put or a delete of the key (``observe``).

    The watch starts now; once it is created, one local read of the key catches a
    change that came before it (the key's create revision is the token), so none is
    missed between the caller's read and the watch.
    """

    __slots__ = ("token",)

    def __init__(self, key: bytes, token: int | None, seconds: float) -> None:
        super().__init__(key, 0, seconds)
        self.request = msg.watch_key(key)
        self.token = token

    def _moved_on(self, reply: Any) -> bool:
        return bool(reply.created)  # the watch starts now: look once it is there

    def _gone(self, peeks: list[Any]) -> bool:
        return msg.created_revision(peeks[0]) != self.token


class WatchSlots(WatchRelease):
    """Block up to ``seconds`` until a slot of a semaphore (a key ``among<k>``) is deleted
    after revision ``after`` (``WakesSlots``): ``result`` is that slot, or ``None`` (the
    wait ran out, or etcd compacted its history past ``after``: the waiter looks again).

    One watch of the slots' key range, from ``after`` + 1, so a release between the
    refused take (read at ``after``) and the watch is replayed, not missed; when the
    store has moved past ``after`` at the watch's creation, two local reads of the slots
    (at ``after`` and now) find such a release at once, as ``WatchRelease`` does for one
    key.
    """

    __slots__ = ("among", "result")
    result: int | None

    def __init__(self, among: bytes, after: int, seconds: float) -> None:
        super().__init__(among, after, seconds)
        self.request = msg.watch_slots_released(among, after)
        self.checks = [msg.peek_slots(among, after), msg.peek_slots(among, 0)]
        self.among = among
        self.result = None

    def _ended(self, reply: Any) -> bool:
        for event in reply.events:  # deletions only (NOPUT), in revision order
            self.result = msg.slot_of(bytes(event.kv.key), self.among)
            if self.result is not None:
                return True
        return bool(reply.canceled)

    def _gone(self, peeks: list[Any]) -> bool:
        self.result = msg.released_slot(peeks[0], peeks[1], self.among)
        return self.result is not None

    def _quiet(self, exc: grpc.RpcError) -> bool:
        """Also the read at ``after`` refused as compacted (``OUT_OF_RANGE``)."""
        return _ran_out(exc) or exc.code() == grpc.StatusCode.OUT_OF_RANGE


class WatchEnds(WatchRelease):
    """Block up to ``seconds`` until a key of a read-write lock is deleted after revision
    ``after`` (a lease that ended, a marker gone: ``ReadWrites.rw_await``). When the
    store has moved past ``after`` at the watch's creation, the wait ends at once (the
    waiter reads the lock again) rather than wait for etcd's replay."""

    __slots__ = ()

    def __init__(self, keys: rw.RWKeys, after: int, seconds: float) -> None:
        super().__init__(keys.base, after, seconds)
        self.request = rw.watch_ends(keys, after)
        self.checks = []

    def _gone(self, peeks: list[Any]) -> bool:
        return True


def _ran_out(exc: grpc.RpcError) -> bool:
    """The call's deadline passed: said by the client, or by the member (etcd's gRPC
    server may end the stream first, with ``UNKNOWN: context deadline exceeded``, and
    grpc.aio may read that end as its core's ``INTERNAL`` when it came while the
    watch's request was still being written). A wait that ends early costs the waiter
    one more look, never safety."""
    code = exc.code()
    return (
        code == grpc.StatusCode.DEADLINE_EXCEEDED
        or (code == grpc.StatusCode.UNKNOWN and "deadline exceeded" in (exc.details() or ""))
        or client_core_failed(exc)
    )


Step = Unary[Any] | KeepAlive | WatchRelease | WatchChange | WatchSlots | WatchEnds

# -- flows: each operation once, for both ports ------------------------------------------------


def _revoke(lease: int) -> Unary[Any]:
    return Unary("lease", "LeaseRevoke", msg.revoke(lease), missing_ok=True)


class EtcdFlows:
    """The etcd issuer's operations as flows of steps (no I/O; see the module docstring).

    ``seen`` keeps, per fence name, the revision at which an acquire last found the key
    taken (the wait watches for a deletion after it); ``leases`` the leases this issuer
    holds or keeps for its next acquire (see ``_leases``); ``rw_marks`` the markers of
    the read-write locks' writers waiting here.
    """

    MEMORY = 1024

    def __init__(self, options: EtcdOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.keys = msg.Keys(options.prefix)
        self.clock = clock
        self.seen: dict[str, int] = {}
        self.leases = LeasePool(clock, self.MEMORY)
        #: per read-write lock (its keys' base): the holder id of a writer waiting here
        #: and the revision its marker was set at (a shortcut: its take compares it)
        self.rw_marks: dict[bytes, tuple[str, int]] = {}

    def acquire(
        self,
        name: str,
        holder: str,
        ttl_ms: int,
        group: str | None = None,
        permits: int = 0,
        wait_ms: int = 0,
    ) -> Flow[Step, int | Busy]:
        """The lease of ``name``. With ``group`` (``TakesSlots``: ``name`` is a slot of the
        semaphore whose slots are ``group<k>``), the take's ``Txn`` also reads the held
        slots at its own revision; when that makes more than ``permits``, the key is
        deleted again and the reply is ``Busy``. Sound without a lock: a holder let in
        counted, after its own take, every holder taken before it and still live, so no
        more than ``permits`` of those let in are ever live together (two that take at
        once may both give back: they try again after a back-off).

        With ``wait_ms`` as well (``WakesSlots``), a refusal is a ``SlotBusy`` whose mark
        is the revision the ``Txn`` read the slots at: every release after the refusal
        has a higher one (``WatchSlots``). A take given back keeps the mark of its own
        ``Txn``, so its own deletion wakes its waiter at once: one more round, and no
        release by another holder meanwhile is missed. The mark stays usable until etcd
        compacts its history past it, whatever ``wait_ms``."""
        key, seconds = self.keys.of(name), msg.lease_seconds(ttl_ms)
        among = None if group is None else self.keys.of(group)
        lease, reused = yield from self._kept_or_granted(name, seconds)
        try:
            txn: Unary[Any] = Unary("kv", "Txn", msg.acquire(key, holder, lease.id, among), reused)
            yield txn
            if txn.result is None:  # the kept lease expired meanwhile: a fresh one
                reused, lease = False, (yield from self._grant(seconds))
                txn = Unary("kv", "Txn", msg.acquire(key, holder, lease.id, among))
                yield txn
            outcome = msg.parse_acquire(txn.result, holder, lease.id)
            if isinstance(outcome, int) and reused:
                lease = Lease(lease.id, seconds, self.clock())
                alive = KeepAlive(lease.id)  # its full TTL from now, not from earlier
                yield alive
                if alive.result <= 0:  # it expired between the two calls, the key with it
                    return Busy(None)
        except GeneratorExit:  # closed, not driven: no more steps can run
            raise
        except BaseException:
            yield from _best_effort(_revoke(lease.id))
            raise
        if isinstance(outcome, int):
            self.leases.hold(name, outcome, lease)
            if among is not None and msg.held_slots(txn.result, among) > permits:
                yield from self.release(name, outcome, holder)  # over: give it back
                return _refused(txn.result, wait_ms)
            return outcome
        if len(self.seen) >= self.MEMORY and name not in self.seen:
            self.seen.clear()  # forgetting costs a replayed watch event, never safety
        self.seen[name] = outcome.revision
        if not self.leases.keep(name, lease):
            yield from _best_effort(_revoke(lease.id))
        return _refused(txn.result, wait_ms)

    def _kept_or_granted(self, name: str, seconds: int) -> Flow[Step, tuple[Lease, bool]]:
        """The lease kept for ``name``'s next take if young enough (``_leases``), else a
        new one of ``seconds``; and whether it was kept. A kept lease too old for the
        take is revoked, best effort."""
        lease, stale = self.leases.take(name, seconds)
        if stale is not None:
            yield from _best_effort(_revoke(stale.id))
        if lease is not None:
            return lease, True
        return (yield from self._grant(seconds)), False

    def _grant(self, seconds: int) -> Flow[Step, Lease]:
        since = self.clock()
        grant: Unary[Any] = Unary("lease", "LeaseGrant", msg.grant(seconds))
        yield grant
        return Lease(int(grant.result.ID), seconds, since)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Flow[Step, bool]:
        key, seconds = self.keys.of(name), msg.lease_seconds(ttl_ms)
        find: Unary[Any] = Unary("kv", "Txn", msg.find_lease(key, token, holder))
        yield find
        lease = msg.lease_of(find.result)
        if lease is None:
            return False
        since = self.clock()
        alive = KeepAlive(lease)
        yield alive
        if alive.result <= 0:
            return False
        self.leases.kept_alive(name, token, lease, since)
        if alive.result >= seconds:
            return True
        return (yield from self._move(name, token, holder, lease, seconds))

    def _move(self, name: str, token: int, holder: str, old: int, seconds: int) -> Flow[Step, bool]:
        """Put the key on a new lease of ``seconds`` (a renew that asks for more time)."""
        new = yield from self._grant(seconds)
        try:
            move: Unary[Any] = Unary(
                "kv", "Txn", msg.move(self.keys.of(name), token, holder, old, new.id)
            )
            yield move
        except GeneratorExit:
            raise
        except BaseException:
            yield from _best_effort(_revoke(new.id))
            raise
        moved = bool(move.result.succeeded)
        if moved:
            self.leases.hold(name, token, new)
        yield from _best_effort(_revoke(old if moved else new.id))
        return moved

    def release(self, name: str, token: int, holder: str) -> Flow[Step, bool]:
        delete: Unary[Any] = Unary("kv", "Txn", msg.release(self.keys.of(name), token, holder))
        yield delete
        lease = msg.lease_of(delete.result)
        if lease is None:
            return False
        known = self.leases.released(name, token, lease)
        if known is None or not self.leases.keep(name, known):
            yield from _best_effort(_revoke(lease))  # else kept for the next acquire
        return True

    def await_release(self, name: str, seconds: float) -> Flow[Step, None]:
        yield WatchRelease(self.keys.of(name), self.seen.get(name, 0), seconds)

    def await_change(self, name: str, token: int | None, seconds: float) -> Flow[Step, None]:
        yield WatchChange(self.keys.of(name), token, seconds)

    def await_slot_release(self, group: str, since: str, seconds: float) -> Flow[Step, int | None]:
        """``WakesSlots``: the first slot of ``group`` deleted after the mark ``since``."""
        watch = WatchSlots(self.keys.of(group), int(since), seconds)
        yield watch
        return watch.result

    # -- operations (``Inspects``, ``ForceReleases``) ------------------------------------

    def status(self, name: str) -> Flow[Step, FenceStatus]:
        """The key, and the time its lease has left. A fence is known only while held: a
        free one reports no last token (etcd keeps no record of a deleted key's
        creation once its history is compacted)."""
        read: Unary[Any] = Unary("kv", "Range", msg.read(self.keys.of(name)))
        yield read
        if not read.result.kvs:
            return FenceStatus(name, held=False)
        kv = read.result.kvs[0]
        token = int(kv.create_revision)
        left: Unary[Any] = Unary("lease", "LeaseTimeToLive", msg.time_to_live(int(kv.lease)))
        yield left
        if int(left.result.TTL) < 0:  # the lease ended since the read, and the key with it
            return FenceStatus(name, held=False, last_token=token)
        return FenceStatus(
            name,
            held=True,
            holder=bytes(kv.value).decode("utf-8", "replace"),
            token=token,
            expires_in=float(left.result.TTL),
            last_token=token,
        )

    def page(self, start: bytes, end: bytes, limit: int) -> Flow[Step, tuple[list[bytes], bool]]:
        """Keys from ``start`` up to ``end``, at most ``limit``; and whether there are more."""
        read: Unary[Any] = Unary("kv", "Range", msg.page(start, end, limit))
        yield read
        return [bytes(kv.key) for kv in read.result.kvs], bool(read.result.more)

    def force_release(self, name: str) -> Flow[Step, FenceStatus]:
        """Delete the key whoever holds it (one ``Txn``), then revoke the lease it was on,
        so its holder's keep-alives fail too. The next creation of the key has a higher
        revision, as every one does."""
        delete: Unary[Any] = Unary("kv", "Txn", msg.force_release(self.keys.of(name)))
        yield delete
        if not delete.result.succeeded:
            return FenceStatus(name, held=False)
        kv = delete.result.responses[0].response_delete_range.prev_kvs[0]
        yield from _best_effort(_revoke(int(kv.lease)))
        token = int(kv.create_revision)
        holder = bytes(kv.value).decode("utf-8", "replace")
        return FenceStatus(name, held=True, holder=holder, token=token, last_token=token)

    # -- read-write locks (``ReadWrites``, ``OperatesReadWrites``; see ``_rw_messages``) ----

    #: Readings of a read-write lock one ``rw_acquire`` acts on at most: each ``Txn`` that
    #: found the lock changed since its reading costs one (then ``Busy``: the fence waits).
    RW_TRIES = 4

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> Flow[Step, int | Busy]:
        """A read or write lease of the read-write lock ``name``: first one ``Txn`` that
        takes it if it is empty (``rw.take_empty``), else reads it; then decided on that
        reading, taken by one ``Txn`` that holds only while the reading does, read
        again if it did not."""
        keys, seconds = rw.RWKeys.of(self.keys.of(name)), msg.lease_seconds(ttl_ms)
        key = keys.reader(holder) if mode == READ else keys.writer
        mine, marked = self.rw_marks.get(keys.base, ("", 0))
        marked = marked if mode == WRITE and mine == holder else 0
        empty = rw.take_empty(keys, holder, 0, mode == WRITE, marked)
        txn = yield from self._rw_take(empty, seconds, keys, key)
        if txn is not None and txn.succeeded:
            if marked:
                self.rw_marks.pop(keys.base, None)
            return int(txn.header.revision)
        state = None if txn is None else rw.failed_state(txn, keys)
        for _ in range(self.RW_TRIES):
            if state is None:
                state = yield from self._rw_state(keys)
            if mode == READ:
                taken = yield from self._rw_read(keys, state, holder, seconds)
            else:
                taken = yield from self._rw_write(keys, state, holder, seconds, queue_ms)
            if taken is not None:
                if isinstance(taken, Busy):
                    self._saw(keys.base, state.revision)
                return taken
            state = None
        return Busy(None)

    def _saw(self, key: bytes, revision: int) -> None:
        """Remember the revision a refused acquire read ``key`` at (the wait's start)."""
        name = key.decode("utf-8", "replace")
        if len(self.seen) >= self.MEMORY and name not in self.seen:
            self.seen.clear()
        self.seen[name] = revision

    def _rw_state(self, keys: rw.RWKeys) -> Flow[Step, rw.RWState]:
        read: Unary[Any] = Unary("kv", "Range", rw.read_all(keys))
        yield read
        return rw.parse_state(read.result, keys)

    def _rw_read(
        self, keys: rw.RWKeys, state: rw.RWState, holder: str, seconds: int
    ) -> Flow[Step, int | Busy | None]:
        """A reader's take: its token, ``Busy``, or ``None`` (changed: read again)."""
        if state.writer is not None or state.marker is not None:
            return Busy(None)  # a writer holds, or waits: readers wait
        witness = state.readers[0] if state.readers else None
        take = rw.take_read(keys, holder, 0, witness)
        epoch = 0 if witness is None else rw.epoch_of(witness)
        txn = yield from self._rw_take(take, seconds, keys, keys.reader(holder), epoch)
        if txn is None or not txn.succeeded:
            return None
        return epoch or int(txn.header.revision)

    def _rw_write(
        self, keys: rw.RWKeys, state: rw.RWState, holder: str, seconds: int, queue_ms: int
    ) -> Flow[Step, int | Busy | None]:
        """A writer's take: its token, ``Busy`` (with its marker set, kept alive or
        cleared as ``queue_ms`` says), or ``None`` (changed: read again)."""
        marker = state.marker
        mine = marker is not None and rw.holder_of(marker) == holder
        if state.writer is None and not state.readers:
            take = rw.take_write(keys, holder, 0, marker)
            txn = yield from self._rw_take(take, seconds, keys, keys.writer)
            if txn is None or not txn.succeeded:
                return None
            if mine:
                self.rw_marks.pop(keys.base, None)
            return int(txn.header.revision)
        if mine and not queue_ms:  # it waits no more
            self.rw_marks.pop(keys.base, None)
            yield from _best_effort(Unary("kv", "Txn", rw.drop(marker)))
        elif queue_ms and (marker is None or mine):
            yield from self._rw_mark(keys, marker if mine else None, holder, queue_ms)
        return Busy(None)

    def _rw_take(
        self, request: Any, seconds: int, keys: rw.RWKeys, key: bytes, epoch: int = 0
    ) -> Flow[Step, Any]:
        """``request`` (a take whose put of ``key`` is on lease 0) on a lease of
        ``seconds``: the one kept for the lock's next take if young enough (kept alive
        once the take holds, so it runs its full TTL from now), else a new one, as a
        fence's acquire does (``_leases``). The ``Txn``'s reply; ``None`` when the kept
        lease ended under the key just put (read again). A take that failed keeps its
        lease for the next one; one that holds is remembered under its token (``epoch``
        joined, else the ``Txn``'s revision) for ``rw_release``."""
        spare = keys.base.decode("utf-8", "replace")
        lease, reused = yield from self._kept_or_granted(spare, seconds)
        try:
            request.success[0].request_put.lease = lease.id
            txn: Unary[Any] = Unary("kv", "Txn", request, reused)
            yield txn
            if txn.result is None:  # the kept lease expired meanwhile: a fresh one
                reused, lease = False, (yield from self._grant(seconds))
                request.success[0].request_put.lease = lease.id
                txn = Unary("kv", "Txn", request)
                yield txn
            if txn.result.succeeded and reused:
                lease = Lease(lease.id, seconds, self.clock())
                alive = KeepAlive(lease.id)
                yield alive
                if alive.result <= 0:  # it expired between the two calls, the key with it
                    return None
        except GeneratorExit:  # closed, not driven: no more steps can run
            raise
        except BaseException:
            yield from _best_effort(_revoke(lease.id))
            raise
        if txn.result.succeeded:
            token = epoch or int(txn.result.header.revision)
            self.leases.hold(key.decode("utf-8", "replace"), token, lease)
        elif not self.leases.keep(spare, lease):
            yield from _best_effort(_revoke(lease.id))
        return txn.result

    def _rw_new(self, request: Any, seconds: int) -> Flow[Step, Any]:
        """``request`` (a ``Txn`` whose put is on lease 0) on a new lease of ``seconds``:
        the reply if it succeeded, else ``None`` (the lease revoked)."""
        lease = yield from self._grant(seconds)
        request.success[0].request_put.lease = lease.id
        try:
            txn: Unary[Any] = Unary("kv", "Txn", request)
            yield txn
        except GeneratorExit:
            raise
        except BaseException:
            yield from _best_effort(_revoke(lease.id))
            raise
        if txn.result.succeeded:
            return txn.result
        yield from _best_effort(_revoke(lease.id))
        return None

    def _rw_mark(
        self, keys: rw.RWKeys, marker: Any, holder: str, queue_ms: int
    ) -> Flow[Step, None]:
        """Set the waiting writer's marker for ``queue_ms``, or keep ``marker`` (this
        writer's own) alive that long; best effort (a writer not marked only waits
        longer)."""
        if marker is not None:
            alive = KeepAlive(int(marker.lease))
            yield from _best_effort(alive)
            if getattr(alive, "result", 0) > 0:
                self._rw_marked(keys, holder, int(marker.mod_revision))
                return
        with contextlib.suppress(FenceUnavailable):
            txn = yield from self._rw_new(rw.mark(keys, holder, 0), msg.lease_seconds(queue_ms))
            if txn is not None:
                self._rw_marked(keys, holder, int(txn.header.revision))

    def _rw_marked(self, keys: rw.RWKeys, holder: str, revision: int) -> None:
        """Remember that ``holder`` waits here, its marker set at ``revision``."""
        if len(self.rw_marks) >= self.MEMORY and keys.base not in self.rw_marks:
            self.rw_marks.clear()  # forgetting costs a reading, never safety
        self.rw_marks[keys.base] = (holder, revision)

    def _rw_lease(self, name: str, mode: str, token: int, holder: str) -> Flow[Step, Any]:
        """The key of the lease ``mode``/``token``/``holder`` as read now, ``None`` if it
        is not held."""
        keys = rw.RWKeys.of(self.keys.of(name))
        read: Unary[Any] = Unary(
            "kv", "Range", msg.read(keys.reader(holder) if mode == READ else keys.writer)
        )
        yield read
        kv = read.result.kvs[0] if read.result.kvs else None
        if kv is None:
            return None
        if mode == READ:
            return kv if rw.epoch_of(kv) == token else None
        held = int(kv.create_revision) == token and rw.holder_of(kv) == holder
        return kv if held else None

    def rw_renew(
        self, name: str, mode: str, token: int, holder: str, ttl_ms: int
    ) -> Flow[Step, bool]:
        """Keep that exact lease's etcd lease alive; put its key on a longer one when the
        ttl asked is above the lease's."""
        seconds = msg.lease_seconds(ttl_ms)
        kv = yield from self._rw_lease(name, mode, token, holder)
        if kv is None:
            return False
        alive = KeepAlive(int(kv.lease))
        yield alive
        if alive.result <= 0:
            return False
        if alive.result >= seconds:
            return True
        txn = yield from self._rw_new(rw.moved(kv, 0), seconds)
        if txn is not None:
            yield from _best_effort(_revoke(int(kv.lease)))
        return txn is not None

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Flow[Step, bool]:
        """Delete that exact lease's key in one ``Txn``; its etcd lease is kept for the
        lock's next take when this issuer granted it (as a fence's release does), else
        revoked."""
        keys = rw.RWKeys.of(self.keys.of(name))
        if mode == READ:
            key, request = keys.reader(holder), rw.release_read(keys, token, holder)
        else:
            key, request = keys.writer, msg.release(keys.writer, token, holder)
        delete: Unary[Any] = Unary("kv", "Txn", request)
        yield delete
        lease = rw.released_lease(delete.result)
        if lease is None:
            return False
        known = self.leases.released(key.decode("utf-8", "replace"), token, lease)
        spare = keys.base.decode("utf-8", "replace")
        if known is None or not self.leases.keep(spare, known):
            yield from _best_effort(_revoke(lease))
        return True

    def rw_await(self, name: str, seconds: float) -> Flow[Step, None]:
        keys = rw.RWKeys.of(self.keys.of(name))
        yield WatchEnds(keys, self.seen.get(keys.base.decode("utf-8", "replace"), 0), seconds)

    def rw_status(self, name: str) -> Flow[Step, RWStatus]:
        """One reading of the lock's keys, then each lease's time left."""
        keys = rw.RWKeys.of(self.keys.of(name))
        state = yield from self._rw_state(keys)
        return (yield from self._rw_status(name, keys, state.writer, state.readers, state.marker))

    def _rw_status(
        self, name: str, keys: rw.RWKeys, writer: Any, readers: list[Any], marker: Any
    ) -> Flow[Step, RWStatus]:
        waiting = None if marker is None else rw.holder_of(marker)
        if writer is not None:
            token, leases = int(writer.create_revision), {rw.holder_of(writer): writer}
            mode = WRITE
        elif readers:
            token, mode = rw.epoch_of(readers[0]), READ
            leases = {rw.reader_holder(kv, keys): kv for kv in readers}
        else:
            return RWStatus(name, False, waiting=waiting)
        left: dict[str, float | None] = {}
        for holder, kv in leases.items():
            ttl: Unary[Any] = Unary("lease", "LeaseTimeToLive", msg.time_to_live(int(kv.lease)))
            yield ttl
            left[holder] = max(0.0, float(ttl.result.TTL))
        return RWStatus(name, True, mode, token, left, waiting, token)

    def rw_force_release(self, name: str) -> Flow[Step, RWStatus]:
        """Delete the writer's key and every reader's in one ``Txn``, then revoke their
        leases; a later take's revision, so its token, is higher, as every one is."""
        keys = rw.RWKeys.of(self.keys.of(name))
        end: Unary[Any] = Unary("kv", "Txn", rw.end_all(keys))
        yield end
        writer = end.result.responses[0].response_delete_range.prev_kvs
        readers = list(end.result.responses[1].response_delete_range.prev_kvs)
        ended = yield from self._rw_status(name, keys, writer[0] if writer else None, readers, None)
        for kv in [*writer, *readers]:
            yield from _best_effort(_revoke(int(kv.lease)))
        return ended


def _refused(reply: Any, wait_ms: int) -> Busy:
    """A slot take's refusal: with ``wait_ms``, marked with the revision of its ``Txn``."""
    return SlotBusy(None, str(int(reply.header.revision))) if wait_ms else Busy(None)


def _best_effort(step: Step) -> Flow[Step, None]:
    """Clean-up that may fail without harm (a lease that is not revoked expires)."""
    with contextlib.suppress(FenceUnavailable):
        yield step


# -- the issuers -------------------------------------------------------------------------------


def _options(cluster: str | EtcdOptions) -> EtcdOptions:
    if isinstance(cluster, EtcdOptions):
        return cluster
    return parse_etcd_url(cluster)


class _Driven:
    """What both issuers share, written once: the calls that are only a flow of
    ``EtcdFlows`` run on the issuer's cluster by its ``_drive`` (blocking: to the flow's
    value; asyncio: an awaitable of it, so the asyncio issuer's callers await them as
    its coroutines). ``try_acquire_slot`` (``TakesSlots`` and ``WakesSlots``) and the
    read-write locks' calls (``ReadWrites``; asyncio: their ``Async`` protocols)."""

    flows: EtcdFlows

    def _drive(self, flow: Flow[Any, Any]) -> Any:
        raise NotImplementedError

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int, wait_ms: int = 0
    ) -> Any:
        """The slot ``<group><slot>``: see ``EtcdFlows.acquire``; the token or ``Busy``."""
        flow = self.flows.acquire(f"{group}{slot}", holder, ttl_ms, group, permits, wait_ms)
        return self._drive(flow)

    def rw_acquire(self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int) -> Any:
        """``ReadWrites.rw_acquire``: see ``EtcdFlows.rw_acquire``; the token or ``Busy``."""
        return self._drive(self.flows.rw_acquire(name, mode, holder, ttl_ms, queue_ms))

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> Any:
        """``ReadWrites.rw_renew``: whether that exact lease was still held."""
        return self._drive(self.flows.rw_renew(name, mode, token, holder, ttl_ms))

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Any:
        """``ReadWrites.rw_release``: whether that exact lease was still held."""
        return self._drive(self.flows.rw_release(name, mode, token, holder))

    def rw_await(self, name: str, seconds: float) -> Any:
        """``ReadWrites.rw_await``: a watch of the lock's keys' deletions (``WatchEnds``)."""
        return self._drive(self.flows.rw_await(name, seconds))


class EtcdIssuer(_Driven):
    """Leases and tokens in an etcd cluster (``etcd://host:port,...`` or ``EtcdOptions``).

    Each lease is an etcd lease; the token is the revision at which the fence's key was
    created (see ``_messages``). Waiters watch the key instead of polling
    (``WakesOnRelease``), a semaphore's waiters all its slots' keys (``WakesSlots``);
    operators can inspect and force-release (``Inspects``,
    ``ForceReleases``). Thread-safe; ``close()`` closes its channels.
    """

    #: Keys read per request by ``names``.
    PAGE = 500

    def __init__(self, cluster: str | EtcdOptions) -> None:
        self.flows = EtcdFlows(_options(cluster))
        self.cluster = Cluster(self.flows.options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.flows.options.endpoints!r})"

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return run_sync(self.flows.acquire(name, holder, ttl_ms), self.cluster)

    def _drive(self, flow: Flow[Any, R]) -> R:
        return run_sync(flow, self.cluster)

    def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """``fencing.issuer.WakesSlots``: ``release``; the key's deletion is the wake-up."""
        return self.release(f"{group}{slot}", token, holder)

    def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """``fencing.issuer.WakesSlots``: a watch of the slots' keys (``WatchSlots``)."""
        return run_sync(self.flows.await_slot_release(group, since, seconds), self.cluster)

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return run_sync(self.flows.renew(name, token, holder, ttl_ms), self.cluster)

    def release(self, name: str, token: int, holder: str) -> bool:
        return run_sync(self.flows.release(name, token, holder), self.cluster)

    def await_release(self, name: str, seconds: float) -> None:
        run_sync(self.flows.await_release(name, seconds), self.cluster)

    def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.WatchesLease``: up to ``seconds``, until the key changes."""
        run_sync(self.flows.await_change(name, token, seconds), self.cluster)

    def status(self, name: str) -> FenceStatus:
        """``Inspects``: the lease of ``name`` as etcd has it now (see ``EtcdFlows.status``)."""
        return run_sync(self.flows.status(name), self.cluster)

    def names(self, prefix: str = "") -> Iterator[str]:
        """``Inspects``: the fences held now whose names start with ``prefix`` (a free
        fence has no key in etcd), in key order, read a page at a time."""
        keys = self.flows.keys
        start, skip = keys.of(prefix), len(keys.of(""))
        end = msg.prefix_end(start)
        while True:
            page, more = run_sync(self.flows.page(start, end, self.PAGE), self.cluster)
            for key in page:
                if b"\x00" in key[skip:]:  # a read-write lock's key (``_rw_messages``)
                    continue
                with contextlib.suppress(UnicodeDecodeError):
                    yield key[skip:].decode("utf-8")
            if not more or not page:
                return
            start = page[-1] + b"\x00"

    def force_release(self, name: str) -> FenceStatus:
        """``ForceReleases``: end the lease of ``name`` whoever holds it."""
        return run_sync(self.flows.force_release(name), self.cluster)

    def rw_status(self, name: str) -> RWStatus:
        """``OperatesReadWrites``: the writer or the readers of the read-write lock ``name``."""
        return run_sync(self.flows.rw_status(name), self.cluster)

    def rw_force_release(self, name: str) -> RWStatus:
        """``OperatesReadWrites``: end every lease of the read-write lock ``name``."""
        return run_sync(self.flows.rw_force_release(name), self.cluster)

    def close(self) -> None:
        self.cluster.close()


class AsyncEtcdIssuer(_Driven, OldClose):
    """``EtcdIssuer`` on ``grpc.aio``: the same flows, keys, leases and tokens."""

    def __init__(self, cluster: str | EtcdOptions) -> None:
        self.flows = EtcdFlows(_options(cluster))
        self.cluster = AsyncCluster(self.flows.options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.flows.options.endpoints!r})"

    async def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return await run_async(self.flows.acquire(name, holder, ttl_ms), self.cluster)

    def _drive(self, flow: Flow[Any, R]) -> Awaitable[R]:
        return run_async(flow, self.cluster)

    async def release_slot(self, group: str, slot: int, token: int, holder: str) -> bool:
        """See ``EtcdIssuer.release_slot``."""
        return await self.release(f"{group}{slot}", token, holder)

    async def await_slot_release(self, group: str, since: str, seconds: float) -> int | None:
        """See ``EtcdIssuer.await_slot_release``."""
        return await run_async(self.flows.await_slot_release(group, since, seconds), self.cluster)

    async def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return await run_async(self.flows.renew(name, token, holder, ttl_ms), self.cluster)

    async def release(self, name: str, token: int, holder: str) -> bool:
        return await run_async(self.flows.release(name, token, holder), self.cluster)

    async def await_release(self, name: str, seconds: float) -> None:
        await run_async(self.flows.await_release(name, seconds), self.cluster)

    async def await_change(self, name: str, token: int | None, seconds: float) -> None:
        """``fencing.issuer.AsyncWatchesLease``: see ``EtcdIssuer.await_change``."""
        await run_async(self.flows.await_change(name, token, seconds), self.cluster)

    async def status(self, name: str) -> FenceStatus:
        """``fencing.issuer.AsyncInspects``: see ``EtcdIssuer.status``."""
        return await run_async(self.flows.status(name), self.cluster)

    async def aclose(self) -> None:
        """Close the channels (used again, the issuer opens new ones)."""
        await self.cluster.close()


class EtcdFence(Fence):
    """A fence whose leases and tokens live in etcd: ``EtcdFence("etcd://h1:2379,h2:2379",
    "invoice:42", ttl=10)``, or pass an ``EtcdIssuer`` to share its channels."""

    def __init__(
        self,
        cluster: str | EtcdOptions | EtcdIssuer,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        reentrant: bool = False,
    ) -> None:
        issuer = cluster if isinstance(cluster, EtcdIssuer) else EtcdIssuer(cluster)
        super().__init__(issuer, name, ttl, reentrant=reentrant)
        msg.lease_seconds(self._ttl_ms)  # a ttl etcd cannot grant: ValueError now


class AsyncEtcdFence(AsyncFence):
    """The asyncio ``EtcdFence`` (``fencing.etcd.aio.EtcdFence``); shares keys, leases and
    tokens with blocking ``EtcdFence`` objects of the same name."""

    def __init__(
        self,
        cluster: str | EtcdOptions | AsyncEtcdIssuer,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        reentrant: bool = False,
    ) -> None:
        issuer = cluster if isinstance(cluster, AsyncEtcdIssuer) else AsyncEtcdIssuer(cluster)
        super().__init__(issuer, name, ttl, reentrant=reentrant)
        msg.lease_seconds(self._ttl_ms)
