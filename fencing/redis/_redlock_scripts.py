"""Redlock with fence tokens: the Lua scripts run on each node, the key layout, the
quorum arithmetic and the reply parsers. Pure: no I/O, no clock (times come in).

Key layout of the fence ``<name>`` on every node (a prefix of its own, so a Redlock
fence never shares a lease or a counter with a single-server ``RedisFence``)::

    fencing:redlock:{<name>}:lease     the bare holder id after round 1, then
                                       "<token>:<holder>" once committed; PX = the ttl
    fencing:redlock:{<name>}:counter   the highest token committed on this node; no expiry

An acquisition is one round, or two when it must commit, each sent to every node at
once (docs/redlock.md has the proof):

1. ``ACQUIRE`` with a proposed token ``P``: take the lease if free (``SET NX PX``) and
   return this node's candidate, ``max(counter + 1, node clock in µs)``, and its clock;
   where the lease was granted and ``P`` >= the candidate, also take ``P``: the counter
   and the lease (``"<P>:<holder>"``) are written at once. ``P`` is the token when a
   majority took it.
2. Else ``COMMIT`` with ``T`` = the maximum of every candidate that came back (and of
   ``P`` where a node took it): raise the counter to ``T`` if it is below ("set only if
   greater"), and confirm that the lease is still this holder's (renaming it
   ``"<T>:<holder>"``).

The token counts once a majority took it (1) or confirmed it (2) within the validity
``ttl - elapsed - drift`` (``drift = ttl / 100 + 2 ms``). Every number a script handles
is an integer below 2^53 (the clock in µs is about 1.8e15), exact in Lua's doubles.

Imports the scripts' ``Script``, the core's errors and the issuer protocols.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from .._base.errors import issuer_error
from ..issuer import Busy
from ._scripts import Script

ACQUIRE = Script(
    """
-- fencing redlock round 1, on one node: take the lease if free, read the token, and
-- take the client's proposed token if it is above this node's candidate.
-- KEYS[1] lease key, KEYS[2] counter key
-- ARGV[1] holder id (unique per acquisition); ARGV[2] lease ttl in ms
-- ARGV[3] the proposed token P (digits; "0": none), below 2^53
-- Returns {granted, candidate, pttl, clock, accepted}:
--   granted   1 when the lease was free and is now this holder's with PX ARGV[2], or was
--             already ARGV[1] (an earlier attempt of this acquisition; its PX is renewed);
--             else 0
--   candidate this node's token candidate as digits: max(counter + 1, clock in µs), so a
--             node that lost its counter still answers above every token it issued
--             (unless its clock stepped back); read before P is taken
--   pttl      when busy, the lease's remaining ms (-1: no expiry); else -2
--   clock     this node's clock in µs (digits): how the client proposes the next P
--   accepted  1 when granted and P >= candidate: the counter is now P ("set only if
--             greater": P is above it) and the lease "<P>:<holder>" (committed at once);
--             else 0, and the lease is the bare holder id
local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
local candidate = clock
local last = tonumber(redis.call('GET', KEYS[2]))
if last and last >= candidate then
  candidate = last + 1
end
local digits = string.format('%d', candidate)
local clock_digits = string.format('%d', clock)
local lease = redis.call('GET', KEYS[1])
if lease and lease ~= ARGV[1] then
  return {0, digits, redis.call('PTTL', KEYS[1]), clock_digits, 0}
end
if tonumber(ARGV[3]) >= candidate then
  redis.call('SET', KEYS[2], ARGV[3])
  redis.call('SET', KEYS[1], ARGV[3] .. ':' .. ARGV[1], 'PX', ARGV[2])
  return {1, digits, -2, clock_digits, 1}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, digits, -2, clock_digits, 0}
""",
    2,
)

COMMIT = Script(
    """
-- fencing redlock round 2, on one node: make the token durable, confirm the lease.
-- KEYS[1] lease key, KEYS[2] counter key
-- ARGV[1] holder id; ARGV[2] the token T (digits, the maximum of round 1's candidates);
-- ARGV[3] "<P>:<holder>", the lease as round 1 left it where it took the proposal
-- Raises the counter to T if it is below T or missing ("set only if greater": never
-- lowers it), whoever holds the lease. Then, if the lease is still this acquisition's
-- (ARGV[1] or ARGV[3]: held without a break since round 1, holder ids are never reused),
-- renames it "<T>:<holder>" keeping its expiry and returns 1; else returns 0.
local token = tonumber(ARGV[2])
local last = tonumber(redis.call('GET', KEYS[2]))
if not last or last < token then
  redis.call('SET', KEYS[2], ARGV[2])
end
local lease = redis.call('GET', KEYS[1])
if lease and (lease == ARGV[1] or lease == ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[2] .. ':' .. ARGV[1], 'KEEPTTL')
  return 1
end
return 0
""",
    2,
)

RENEW = Script(
    """
-- fencing redlock renew, on one node.
-- KEYS[1] lease key; ARGV[1] "<token>:<holder>"; ARGV[2] new ttl in ms
-- Returns 1 when the lease is exactly ARGV[1] and now expires ARGV[2] ms from now, else 0
-- (another holder's lease, or none, is never touched).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
""",
    1,
)

RELEASE = Script(
    """
-- fencing redlock release (and the give-back of a grant that did not count), on one node.
-- KEYS[1] lease key, KEYS[2] wake list (a waiter blocks on it with BLPOP)
-- ARGV[1], ARGV[2], ARGV[3] the values that are this acquisition's lease: "<token>:<holder>",
--                  and for a give-back the bare holder id and the "<P>:<holder>" that
--                  round 1 wrote
-- ARGV[4] how long (ms) the wake-up waits in the list for a waiter that is not blocked yet
-- Returns 1 when the lease was one of them and is deleted (and one wake-up is left in the
-- list: never more than one), else 0 (nothing touched).
local lease = redis.call('GET', KEYS[1])
if lease and (lease == ARGV[1] or lease == ARGV[2] or lease == ARGV[3]) then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('RPUSH', KEYS[2], 1)
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 1
end
return 0
""",
    2,
)

STATUS = Script(
    """
-- fencing redlock status, on one node (``fencing status``).
-- KEYS[1] lease key, KEYS[2] counter key
-- Returns {lease or false, pttl, counter or false}: the lease's value and remaining ms
-- (-2: none, -1: no expiry), and the highest token committed on this node.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
""",
    2,
)


FORCE_RELEASE = Script(
    """
-- fencing redlock force release, on one node (``fencing release --force``).
-- KEYS[1] lease key, KEYS[2] counter key
-- Deletes the lease whoever holds it; a committed lease "<T>:<holder>" also raises the
-- counter to T if it is below (it is not, unless the node lost it since the commit).
-- Returns {lease or false, pttl}: the lease as it was.
local lease = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
if lease then
  redis.call('DEL', KEYS[1])
  local digits = string.match(lease, '^(%d+):')
  if digits then
    local last = tonumber(redis.call('GET', KEYS[2]))
    if not last or last < tonumber(digits) then
      redis.call('SET', KEYS[2], digits)
    end
  end
end
return {lease, pttl}
""",
    2,
)


class RedlockKeys(NamedTuple):
    lease: bytes
    counter: bytes


@lru_cache(maxsize=4096)
def redlock_keys(name: str) -> RedlockKeys:
    """The keys of the fence ``name`` on every node, as bytes (built once per name)."""
    prefix = b"fencing:redlock:{" + name.encode() + b"}:"
    return RedlockKeys(prefix + b"lease", prefix + b"counter")


#: How long a release's wake-up stays in a node's wake list for a waiter that found the
#: lease busy but is not blocked on the list yet (ms); a stale one costs a waiter one more
#: attempt, never a lease.
WAKE_MS = 2000


@lru_cache(maxsize=4096)
def wake_key(name: str) -> bytes:
    """The wake list of the fence ``name`` on every node: a release pushes one element on
    each node where it deleted the lease; a waiter blocks on one node's list (``BLPOP``)."""
    return b"fencing:redlock:{" + name.encode() + b"}:released"


def quorum_of(nodes: int) -> int:
    """A majority of ``nodes``: any two majorities share a node."""
    return nodes // 2 + 1


def drift_ms(ttl_ms: int) -> int:
    """Redlock's allowance for the nodes' clocks running faster than the client's: 1 % of
    the ttl plus 2 ms (Redis expires keys with a millisecond resolution)."""
    return ttl_ms // 100 + 2


def validity_ms(ttl_ms: int, elapsed_ms: float) -> float:
    """How long a lease granted by a majority is surely still held: ``ttl - elapsed -
    drift``, ``elapsed`` counted from before round 1 was sent. Not positive: it does not
    count."""
    return ttl_ms - elapsed_ms - drift_ms(ttl_ms)


@dataclass(frozen=True)
class Grant:
    """One node's reply to ``ACQUIRE``."""

    granted: bool
    candidate: int
    pttl: int | None  # the busy lease's remaining ms; None when granted or no expiry
    clock: int = 0  # the node's clock in µs
    accepted: bool = False  # granted with the proposed token as its counter and lease
    held: int | None = None  # a read-write lock's: the token this node holds for the lease


def parse_grant(reply: Any) -> Grant:
    """``ACQUIRE``'s reply; anything else is an error (never ignored)."""
    try:
        granted, digits, pttl, clock_digits, accepted = reply
        candidate, clock = int(digits), int(clock_digits)
    except (TypeError, ValueError) as exc:
        raise issuer_error(
            "redis redlock", ValueError(f"unexpected ACQUIRE reply {reply!r}")
        ) from exc
    if (
        granted not in (0, 1)
        or accepted not in (0, granted)
        or candidate <= 0
        or clock <= 0
        or type(pttl) is not int
    ):
        raise issuer_error("redis redlock", ValueError(f"unexpected ACQUIRE reply {reply!r}"))
    busy_ms = pttl if pttl >= 0 and granted == 0 else None
    return Grant(granted == 1, candidate, busy_ms, clock, accepted == 1)


def parse_flag(reply: Any, script: str) -> bool:
    """The 1-or-0 reply of ``COMMIT``, ``RENEW`` or ``RELEASE``."""
    if reply in (0, 1) and type(reply) is int:
        return reply == 1
    raise issuer_error("redis redlock", ValueError(f"unexpected {script} reply {reply!r}"))


def busy_for(grants: list[Grant], quorum: int) -> Busy:
    """``Busy`` after a round 1 without a majority: when a majority may be free again.

    ``free`` nodes granted (and are given back); the others' leases end after their
    ``pttl``: the majority is free once ``quorum - free`` of them have ended. Unknown
    (no expiry, or too few answers): ``None``, and the fence backs off with jitter.
    """
    free = sum(grant.granted for grant in grants)
    ends = sorted(grant.pttl for grant in grants if grant.pttl is not None)
    needed = quorum - free
    if needed <= 0 or needed > len(ends):
        return Busy(None)
    return Busy(ends[needed - 1] / 1000)


def lease_value(token: int, holder: bytes) -> bytes:
    """The committed lease's value on every node: ``"<token>:<holder>"``."""
    return b"%d:%s" % (token, holder)


NAME_PREFIX = b"fencing:redlock:{"
_SUFFIXES = (b"}:lease", b"}:counter")


def names_pattern(prefix: str) -> bytes:
    """The ``SCAN MATCH`` pattern of the keys of fences whose names start with ``prefix``
    (glob characters in it escaped: a prefix is literal)."""
    escaped = bytearray()
    for byte in prefix.encode():
        if byte in b"*?[]\\":
            escaped += b"\\"
        escaped.append(byte)
    return NAME_PREFIX + bytes(escaped) + b"*"


def name_of(key: bytes) -> str | None:
    """The fence name of a Redlock key, or ``None`` for another key."""
    if not key.startswith(NAME_PREFIX):
        return None
    for suffix in _SUFFIXES:
        if key.endswith(suffix) and len(key) > len(NAME_PREFIX) + len(suffix):
            return key[len(NAME_PREFIX) : -len(suffix)].decode(errors="replace")
    return None


class NodeLease(NamedTuple):
    """One node's view of a fence (``STATUS``, ``FORCE_RELEASE``)."""

    value: bytes | None  # the lease's value, None when there is none
    pttl: int  # remaining ms; -1 no expiry, -2 none
    counter: int | None  # the highest token committed there (``STATUS`` only)


def parse_node_lease(reply: Any) -> NodeLease:
    try:
        value, pttl, *rest = reply
        counter = int(rest[0]) if rest and rest[0] is not None else None
    except (TypeError, ValueError) as exc:
        raise issuer_error("redis redlock", ValueError(f"unexpected reply {reply!r}")) from exc
    if (value is not None and not isinstance(value, bytes)) or type(pttl) is not int:
        raise issuer_error("redis redlock", ValueError(f"unexpected reply {reply!r}"))
    return NodeLease(value, pttl, counter)


def committed_lease(leases: list[NodeLease], quorum: int) -> tuple[int, str, float | None] | None:
    """The lease a majority holds, committed (``"<token>:<holder>"``): its token, holder
    id and the time (seconds) a majority still holds it (``None``: no expiry); else
    ``None`` (free, an acquisition still in its first round, or a minority's leftover)."""
    counts: dict[bytes, list[int]] = {}
    for lease in leases:
        if lease.value is not None:
            counts.setdefault(lease.value, []).append(lease.pttl)
    for value, pttls in counts.items():
        digits, colon, holder = value.partition(b":")
        if len(pttls) >= quorum and colon and digits.isdigit():
            ends = sorted((math.inf if ms == -1 else ms for ms in pttls), reverse=True)
            left = ends[quorum - 1]
            return int(digits), holder.decode(), None if left == math.inf else left / 1000
    return None
