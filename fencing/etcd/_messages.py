"""The etcd issuer's messages: requests and reply parsers for keys, lease lifetimes, transactions.

Everything here is pure (no I/O): protobuf messages of the etcd v3 API (as generated in
``aetcd.rpc``) built from a fence's name, holder id and token, and their replies read
back. The sync and asyncio issuers send the same messages.

Layout: the fence ``<name>`` is the key ``<prefix><name>`` (UTF-8; etcd keys are
arbitrary bytes, so every valid fence name is a valid key). While a lease is held the
key exists, attached to the holder's etcd lease, with the holder id as its value::

    fencing/<name>   value: <holder id>   lease: <etcd lease id>   create_revision: token

The token is the key's ``create_revision``: etcd revisions are global to the cluster,
linearizable and only grow, so each creation of the key has a larger one than every
earlier creation. Nothing but a restore from a snapshot (or a new, empty cluster) moves
revisions back.

Imports the core's errors, the issuer protocol's ``Busy`` and ``aetcd.rpc`` (protobufs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aetcd import rpc

from .._base.errors import FenceUnavailable

_EQUAL = rpc.Compare.EQUAL


#: The longest lease etcd grants (its ``MaxLeaseTTL``), in seconds: about 285 years.
MAX_LEASE_SECONDS = 9_000_000_000


def lease_seconds(ttl_ms: int) -> int:
    """An etcd lease TTL for ``ttl_ms``: whole seconds, rounded up (never shorter).

    etcd grants leases in whole seconds and raises a TTL below its own floor (1.5
    election timeouts, 2 s with the default settings) to that floor. A TTL above
    ``MAX_LEASE_SECONDS`` is a ``ValueError`` here, before any request.
    """
    seconds = max(1, math.ceil(ttl_ms / 1000))
    if seconds > MAX_LEASE_SECONDS:
        raise ValueError(f"ttl must be at most {MAX_LEASE_SECONDS} seconds on etcd")
    return seconds


@dataclass(frozen=True)
class Keys:
    """Where the fences of one issuer live: ``prefix`` + name, as bytes."""

    prefix: str

    def of(self, name: str) -> bytes:
        return (self.prefix + name).encode("utf-8")


def _created_at(key: bytes, revision: int) -> rpc.Compare:
    """The key was created at ``revision`` (0: the key does not exist)."""
    return rpc.Compare(result=_EQUAL, target=rpc.Compare.CREATE, key=key, create_revision=revision)


def _is_lease(key: bytes, token: int, holder: str) -> list[rpc.Compare]:
    """Compares that hold only while the lease ``token``/``holder`` is the key's."""
    return [
        _created_at(key, token),
        rpc.Compare(result=_EQUAL, target=rpc.Compare.VALUE, key=key, value=holder.encode()),
    ]


def _put(key: bytes, holder: str, lease: int) -> rpc.RequestOp:
    return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=holder.encode(), lease=lease))


def grant(seconds: int) -> rpc.LeaseGrantRequest:
    return rpc.LeaseGrantRequest(TTL=seconds)


def revoke(lease: int) -> rpc.LeaseRevokeRequest:
    return rpc.LeaseRevokeRequest(ID=lease)


def acquire(key: bytes, holder: str, lease: int, among: bytes | None = None) -> rpc.TxnRequest:
    """Create the key on ``lease`` only if it does not exist; else read who has it. With
    ``among``, either way also read the keys (names only) that start with it, at the
    same revision: the held slots of a semaphore (``held_slots``)."""
    count = []
    if among is not None:
        keys = rpc.RangeRequest(key=among, range_end=prefix_end(among), keys_only=True)
        count = [rpc.RequestOp(request_range=keys)]
    return rpc.TxnRequest(
        compare=[_created_at(key, 0)],
        success=[_put(key, holder, lease), *count],
        failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=key)), *count],
    )


def slot_of(key: bytes, among: bytes) -> int | None:
    """The slot number of ``key`` when it is ``among`` followed by digits, else ``None``
    (another fence whose name starts like the semaphore's slots)."""
    suffix = key[len(among) :]
    return int(suffix) if key.startswith(among) and suffix.isdigit() else None


def held_slots(reply: rpc.TxnResponse, among: bytes) -> int:
    """How many keys ``among`` followed by a slot number an ``acquire`` with ``among``
    found (a key exists only while its lease is held)."""
    kvs = reply.responses[-1].response_range.kvs
    return sum(slot_of(bytes(kv.key), among) is not None for kv in kvs)


@dataclass(frozen=True)
class Taken:
    """``acquire`` found the key held by someone else, last changed at ``revision``."""

    revision: int


def parse_acquire(reply: rpc.TxnResponse, holder: str, lease: int) -> int | Taken:
    """The token (the key's create revision), or ``Taken``.

    A key that already holds this very holder id on this lease was created by an earlier
    attempt of the same request whose reply was lost (retried on another member): it is
    ours, and its create revision is the token.
    """
    if reply.succeeded:
        return int(reply.header.revision)
    kvs = reply.responses[0].response_range.kvs if reply.responses else []
    if not kvs:  # deleted between the compare and the read: cannot happen in one txn
        raise FenceUnavailable(f"etcd acquire: unexpected reply {reply!r}")
    kv = kvs[0]
    if kv.value == holder.encode() and kv.lease == lease:
        return int(kv.create_revision)
    return Taken(int(kv.mod_revision))


def find_lease(key: bytes, token: int, holder: str) -> rpc.TxnRequest:
    """Read the key only if ``token``/``holder`` still hold it (for renew)."""
    return rpc.TxnRequest(
        compare=_is_lease(key, token, holder),
        success=[rpc.RequestOp(request_range=rpc.RangeRequest(key=key))],
    )


def move(key: bytes, token: int, holder: str, old: int, new: int) -> rpc.TxnRequest:
    """Re-attach the key from lease ``old`` to ``new`` if ``token``/``holder`` still hold
    it on ``old`` (a renew with a longer TTL). A put keeps the key's create revision."""
    return rpc.TxnRequest(
        compare=[
            *_is_lease(key, token, holder),
            rpc.Compare(result=_EQUAL, target=rpc.Compare.LEASE, key=key, lease=old),
        ],
        success=[_put(key, holder, new)],
    )


def release(key: bytes, token: int, holder: str) -> rpc.TxnRequest:
    """Delete the key only if ``token``/``holder`` still hold it; the deleted pair says
    which lease to revoke."""
    return rpc.TxnRequest(
        compare=_is_lease(key, token, holder),
        success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key, prev_kv=True))],
    )


def lease_of(reply: rpc.TxnResponse) -> int | None:
    """The lease of the key a ``find_lease``/``release`` transaction found, or ``None``
    when the compare failed (the lease is not held by that token and holder)."""
    if not reply.succeeded:
        return None
    response = reply.responses[0]
    if response.HasField("response_range"):
        kvs = response.response_range.kvs
    else:
        kvs = response.response_delete_range.prev_kvs
    return int(kvs[0].lease) if kvs else None


def read(key: bytes) -> rpc.RangeRequest:
    """A linearizable read of the key (``status``)."""
    return rpc.RangeRequest(key=key)


def time_to_live(lease: int) -> rpc.LeaseTimeToLiveRequest:
    return rpc.LeaseTimeToLiveRequest(ID=lease)


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (etcd's range end)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\x00"  # every key
    return stripped[:-1] + bytes([stripped[-1] + 1])


def page(start: bytes, end: bytes, limit: int) -> rpc.RangeRequest:
    """Up to ``limit`` keys (no values) from ``start`` up to ``end``, in key order."""
    return rpc.RangeRequest(key=start, range_end=end, keys_only=True, limit=limit)


def force_release(key: bytes) -> rpc.TxnRequest:
    """Delete the key whoever holds it, if it exists; the deleted pair says who held it."""
    return rpc.TxnRequest(
        compare=[
            rpc.Compare(
                result=rpc.Compare.GREATER, target=rpc.Compare.CREATE, key=key, create_revision=0
            )
        ],
        success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key, prev_kv=True))],
    )


def keepalive(lease: int) -> rpc.LeaseKeepAliveRequest:
    return rpc.LeaseKeepAliveRequest(ID=lease)


def peek(key: bytes) -> rpc.RangeRequest:
    """A local read of the key on the member asked (serializable: no consensus round)."""
    return rpc.RangeRequest(key=key, serializable=True, keys_only=True)


def changed_since(reply: rpc.RangeResponse, revision: int) -> bool:
    """The key is gone, or was written after ``revision`` (a new holder, a moved lease)."""
    return not reply.kvs or int(reply.kvs[0].mod_revision) > revision


def watch_key(key: bytes) -> rpc.WatchRequest:
    """Watch every change of ``key`` (put or delete) from now on (``observe``)."""
    return rpc.WatchRequest(create_request=rpc.WatchCreateRequest(key=key))


def created_revision(reply: rpc.RangeResponse) -> int | None:
    """The key's create revision (the token of its lease), or ``None`` if it is gone."""
    return int(reply.kvs[0].create_revision) if reply.kvs else None


def watch_release(key: bytes, after: int) -> rpc.WatchRequest:
    """Watch ``key`` for its deletion (release, revoke or expiry) after revision ``after``
    (events since then are replayed, so a release that came first is not missed)."""
    return rpc.WatchRequest(
        create_request=rpc.WatchCreateRequest(
            key=key,
            start_revision=after + 1 if after else 0,
            filters=[rpc.WatchCreateRequest.NOPUT],
        )
    )


def watch_slots_released(among: bytes, after: int) -> rpc.WatchRequest:
    """Watch the keys that start with ``among`` (a semaphore's slots) for deletions
    (release, revoke or expiry) after revision ``after``, replayed as ``watch_release``."""
    return rpc.WatchRequest(
        create_request=rpc.WatchCreateRequest(
            key=among,
            range_end=prefix_end(among),
            start_revision=after + 1,
            filters=[rpc.WatchCreateRequest.NOPUT],
        )
    )


def peek_slots(among: bytes, revision: int) -> rpc.RangeRequest:
    """A local read of the keys that start with ``among`` (names and revisions) as they
    were at ``revision`` (0: now)."""
    return rpc.RangeRequest(
        key=among,
        range_end=prefix_end(among),
        revision=revision,
        serializable=True,
        keys_only=True,
    )


def released_slot(then: rpc.RangeResponse, now: rpc.RangeResponse, among: bytes) -> int | None:
    """A slot whose key ``then`` had and ``now`` has not (the same creation, by its create
    revision): released in between; ``None`` when every slot held then is held still."""
    held = {(bytes(kv.key), int(kv.create_revision)) for kv in now.kvs}
    for kv in then.kvs:
        slot = slot_of(bytes(kv.key), among)
        if slot is not None and (bytes(kv.key), int(kv.create_revision)) not in held:
            return slot
    return None
