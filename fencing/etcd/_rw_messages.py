"""The messages of etcd read-write locks (docs/rwlock.md): requests and reply readers.

Layout of the read-write lock ``<name>`` (beside the fence's key ``<prefix><name>``; a
fence name holds no NUL, so no fence's key is one of these)::

    <prefix><name>\\0w            the writer: value <holder id>, on its etcd lease;
                                  create_revision: its token
    <prefix><name>\\0m            the waiting writer's marker: value <holder id>, on an
                                  etcd lease of the writer's queue time
    <prefix><name>\\0r/<holder>   one per reader, on its etcd lease: value the epoch, or
                                  empty for the epoch's first reader, whose key's
                                  create_revision is the epoch

Tokens are revisions, as a fence's: global to the cluster, only growing, so a writer's
token (the revision of the ``Txn`` that created its key) is above every token before it,
and so is an epoch (the revision of the ``Txn`` of its first reader). Each decision is
one ``Txn`` whose compares hold only while the state read before it is unchanged (an
empty key range compared with version 0 is a range with no key), so two clients never
both act on one reading. The first ``Txn`` of an acquire reads nothing before: it takes
the lock if it is empty (``take_empty``: no writer, no marker, no reader; a reader then
begins an epoch), else its failure branch is the reading the next decision acts on. So
an uncontended acquire is one ``Txn``, as a fence's is; so is a release (``release``).

Imports ``aetcd.rpc`` (protobufs) and the key helpers of ``_messages``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aetcd import rpc

from ._messages import lease_of, prefix_end, release

_EQUAL = rpc.Compare.EQUAL


class RWKeys(NamedTuple):
    """The keys of one read-write lock (see the module docstring)."""

    base: bytes
    writer: bytes
    marker: bytes
    readers: bytes

    @classmethod
    def of(cls, key: bytes) -> RWKeys:
        """The keys of the lock whose fence key is ``key``."""
        base = key + b"\x00"
        return cls(base, base + b"w", base + b"m", base + b"r/")

    def reader(self, holder: str) -> bytes:
        return self.readers + holder.encode()


@dataclass(frozen=True)
class RWState:
    """A read of every key of a lock at ``revision``: the writer's, the marker's and the
    readers' (live only: a key exists only while its lease does)."""

    revision: int
    writer: Any = None
    marker: Any = None
    readers: list[Any] = field(default_factory=list)


def read_all(keys: RWKeys) -> rpc.RangeRequest:
    """A linearizable read of every key of the lock."""
    return rpc.RangeRequest(key=keys.base, range_end=prefix_end(keys.base))


def parse_state(reply: rpc.RangeResponse, keys: RWKeys, revision: int = 0) -> RWState:
    """The state in ``reply``, read at ``revision`` (0: the reply's own)."""
    writer = marker = None
    readers = []
    for kv in reply.kvs:
        key = bytes(kv.key)
        if key == keys.writer:
            writer = kv
        elif key == keys.marker:
            marker = kv
        elif key.startswith(keys.readers):
            readers.append(kv)
    return RWState(revision or int(reply.header.revision), writer, marker, readers)


def epoch_of(kv: Any) -> int:
    """A reader key's epoch: its value, or (the epoch's first reader) its create revision."""
    return int(kv.value) if kv.value else int(kv.create_revision)


def holder_of(kv: Any) -> str:
    return bytes(kv.value).decode("utf-8", "replace")


def reader_holder(kv: Any, keys: RWKeys) -> str:
    return bytes(kv.key)[len(keys.readers) :].decode("utf-8", "replace")


def _none(key: bytes, range_end: bytes = b"") -> rpc.Compare:
    """No key ``key`` (with ``range_end``: no key in the range)."""
    return rpc.Compare(
        result=_EQUAL, target=rpc.Compare.VERSION, key=key, range_end=range_end, version=0
    )


def _modified_at(key: bytes, revision: int) -> rpc.Compare:
    """The key was last written at ``revision`` (0: it does not exist)."""
    return rpc.Compare(result=_EQUAL, target=rpc.Compare.MOD, key=key, mod_revision=revision)


def _put(key: bytes, value: bytes, lease: int) -> rpc.RequestOp:
    return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, lease=lease))


def _delete(key: bytes, range_end: bytes = b"") -> rpc.RequestOp:
    request = rpc.DeleteRangeRequest(key=key, range_end=range_end, prev_kv=True)
    return rpc.RequestOp(request_delete_range=request)


def take_empty(
    keys: RWKeys, holder: str, lease: int, write: bool, marked: int = 0
) -> rpc.TxnRequest:
    """The writer's key, or (``write`` false) a reader's beginning an epoch, on ``lease``,
    if no writer holds or waits and no reader holds; else read every key of the lock (the
    failure's one response: ``failed_state``). ``marked``: the revision this writer set
    its marker at; the marker may then be that one still, and is deleted with the take."""
    key, value = (keys.writer, holder.encode()) if write else (keys.reader(holder), b"")
    marker, clear = _none(keys.marker), []
    if write and marked:
        marker, clear = _modified_at(keys.marker, marked), [_delete(keys.marker)]
    return rpc.TxnRequest(
        compare=[_none(keys.writer), marker, _none(keys.readers, prefix_end(keys.readers))],
        success=[_put(key, value, lease), *clear],
        failure=[rpc.RequestOp(request_range=read_all(keys))],
    )


def failed_state(reply: rpc.TxnResponse, keys: RWKeys) -> RWState:
    """The reading a failed ``take_empty`` made, at its ``Txn``'s revision."""
    return parse_state(reply.responses[0].response_range, keys, int(reply.header.revision))


def take_read(keys: RWKeys, holder: str, lease: int, witness: Any) -> rpc.TxnRequest:
    """A reader's key on ``lease``, if no writer holds or waits and the readers are as
    read: ``witness`` (a reader key then) still there, its epoch joined; or (``None``)
    still none, and the ``Txn``'s revision begins a new epoch."""
    if witness is None:
        readers, epoch = _none(keys.readers, prefix_end(keys.readers)), b""
    else:
        created = int(witness.create_revision)
        readers = rpc.Compare(
            result=_EQUAL,
            target=rpc.Compare.CREATE,
            key=bytes(witness.key),
            create_revision=created,
        )
        epoch = b"%d" % epoch_of(witness)
    return rpc.TxnRequest(
        compare=[_none(keys.writer), _none(keys.marker), readers],
        success=[_put(keys.reader(holder), epoch, lease)],
    )


def take_write(keys: RWKeys, holder: str, lease: int, marker: Any) -> rpc.TxnRequest:
    """The writer's key on ``lease`` if no writer or reader holds and the marker is as
    read (``marker``, or none); a marker of ``holder``'s own is deleted with it."""
    seen = 0 if marker is None else int(marker.mod_revision)
    clear = [] if marker is None or holder_of(marker) != holder else [_delete(keys.marker)]
    return rpc.TxnRequest(
        compare=[
            _none(keys.writer),
            _none(keys.readers, prefix_end(keys.readers)),
            _modified_at(keys.marker, seen),
        ],
        success=[_put(keys.writer, holder.encode(), lease), *clear],
    )


def mark(keys: RWKeys, holder: str, lease: int) -> rpc.TxnRequest:
    """The waiting writer's marker on ``lease``, if no marker is there."""
    return rpc.TxnRequest(
        compare=[_none(keys.marker)], success=[_put(keys.marker, holder.encode(), lease)]
    )


def if_unchanged(kv: Any, then: rpc.RequestOp) -> rpc.TxnRequest:
    """``then``, if the key of ``kv`` was not written since ``kv`` was read."""
    return rpc.TxnRequest(
        compare=[_modified_at(bytes(kv.key), int(kv.mod_revision))], success=[then]
    )


def drop(kv: Any) -> rpc.TxnRequest:
    """Delete the key of ``kv`` if unchanged since it was read (release, unmark)."""
    return if_unchanged(kv, _delete(bytes(kv.key)))


def moved(kv: Any, lease: int) -> rpc.TxnRequest:
    """Put the key of ``kv`` on ``lease``, its value kept, if unchanged since it was read
    (a renew that asks for a longer TTL; a put keeps the create revision)."""
    return if_unchanged(kv, _put(bytes(kv.key), bytes(kv.value), lease))


def release_read(keys: RWKeys, token: int, holder: str) -> rpc.TxnRequest:
    """Delete the reader key of ``holder`` if it is of the epoch ``token``: created at it
    with an empty value (the epoch's first reader), or (the failure's nested ``Txn``) its
    value ``token``. The deleted pair (``released_lease``) says which lease it was on."""
    key = keys.reader(holder)
    joined = rpc.TxnRequest(
        compare=[
            rpc.Compare(result=_EQUAL, target=rpc.Compare.VALUE, key=key, value=b"%d" % token)
        ],
        success=[_delete(key)],
    )
    first = release(key, token, "")
    first.failure.append(rpc.RequestOp(request_txn=joined))
    return first


def released_lease(reply: rpc.TxnResponse) -> int | None:
    """The lease of the key a ``release_read`` (or the fence's ``release``, a writer's)
    deleted; ``None`` when that lease was not held."""
    if reply.succeeded or not reply.responses:
        return lease_of(reply)
    return lease_of(reply.responses[0].response_txn)


def end_all(keys: RWKeys) -> rpc.TxnRequest:
    """Delete the writer's key and every reader's (``rw_force_release``), in one step;
    the deleted pairs say which leases were ended."""
    return rpc.TxnRequest(
        success=[_delete(keys.writer), _delete(keys.readers, prefix_end(keys.readers))]
    )


def watch_ends(keys: RWKeys, after: int) -> rpc.WatchRequest:
    """Watch every key of the lock for deletions after revision ``after`` (a lease that
    ended, or a marker), replayed from ``after`` + 1 so none after the refusal is missed."""
    return rpc.WatchRequest(
        create_request=rpc.WatchCreateRequest(
            key=keys.base,
            range_end=prefix_end(keys.base),
            start_revision=after + 1 if after else 0,
            filters=[rpc.WatchCreateRequest.NOPUT],
        )
    )
