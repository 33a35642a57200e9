"""Redlock read-write locks: the Lua scripts run on each node, their keys and arguments,
and the parser of round 1's reply. Pure: no I/O, no clock.

Keys of the read-write lock ``<name>`` on every node (docs/redlock.md, "Read-write
locks")::

    fencing:redlock:{<name>}:counter      the Redlock fence's counter: one token
                                          sequence per name
    fencing:redlock:{<name>}:rw           hash: writer (the bare holder id, or
                                          "<token>:<holder>" once committed),
                                          writer_until (ms), epoch (this node's read
                                          epoch, set only while readers are in),
                                          waiting (a writer's holder id), waiting_until
    fencing:redlock:{<name>}:rw:readers   sorted set: holder id -> its read lease's end
    fencing:redlock:{<name>}:rw:released  wake list (as the fence's: at most one element)

Times are the node's (``TIME``); ended leases count as absent and are dropped at the
start of every script, and a node whose readers are all gone forgets its epoch, so a
node's epoch was always set after its readers' group began. A node sets an epoch ``E``
only above its counter (raised to ``E`` in the same step), or keeps the one it has:
that, and the counter, are what the quorum argument of docs/redlock.md needs.

Imports the Redlock scripts (the fence's Lua is not reused: its lease is one key).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Any

from .._base.errors import issuer_error
from ..issuer import READ, WRITE, RWStatus
from ._redlock_scripts import WAKE_MS, Grant, lease_value, parse_grant
from ._rwlock_scripts import RWKeys, rw_keys_under
from ._scripts import Script

#: One script call on one node (``_redlock_flows.NodeCall``).
NodeCall = tuple[Script, tuple[Any, ...]]

#: Lua shared by the scripts: the node's time, its ended leases dropped.
_LUA_NODE = """
local now_t = redis.call('TIME')
local clock = tonumber(now_t[1]) * 1000000 + tonumber(now_t[2])
local now = math.floor(clock / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('HDEL', KEYS[1], 'epoch')
end
local state = redis.call('HMGET', KEYS[1], 'writer', 'writer_until', 'epoch')
local writer, writer_until = state[1], tonumber(state[2] or 0)
if writer and writer_until <= now then
  redis.call('HDEL', KEYS[1], 'writer', 'writer_until')
  writer = false
end
local epoch = state[3]

-- Make the hash and the readers live at least ms from now.
local function keep(ms)
  for i = 1, 2 do
    if redis.call('PTTL', KEYS[i]) < ms then
      redis.call('PEXPIRE', KEYS[i], ms)
    end
  end
end

-- The counter (false when missing).
local function counter()
  return tonumber(redis.call('GET', KEYS[3]))
end

-- Raise the counter to the digits t if it is below (never lowers it).
local function raise(t)
  local last = counter()
  if not last or last < tonumber(t) then
    redis.call('SET', KEYS[3], t)
  end
end
"""

RW_ACQUIRE = Script(
    """
-- fencing redlock rw round 1, on one node: a read or write lease, the token candidate,
-- and the client's proposed token taken where it is above the candidate.
-- KEYS[1] the lock's hash, KEYS[2] its readers, KEYS[3] the fence's counter
-- ARGV[1] "read" or "write"; ARGV[2] holder id (unique per acquisition);
-- ARGV[3] ttl in ms; ARGV[4] the proposal P (digits; "0": none);
-- ARGV[5] write only: ms to mark this writer waiting when refused ("0": not waiting)
-- Returns {granted, candidate, pttl, clock, accepted, epoch} as the fence's ACQUIRE
-- (candidate = max(counter + 1, clock in µs)), and epoch: the token this node now holds
-- for the lease (digits: a reader's group epoch, or P where taken), else false.
-- A reader is refused while a writer holds or waits; a writer while anyone holds.
"""
    + _LUA_NODE
    + """
local holder, ttl, proposal = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local candidate = clock
local last = counter()
if last and last >= candidate then
  candidate = last + 1
end
local digits, clock_digits = string.format('%d', candidate), string.format('%d', clock)
local marker = redis.call('HMGET', KEYS[1], 'waiting', 'waiting_until')
local waiting = marker[1]
if waiting and tonumber(marker[2]) <= now then
  waiting = false
end
if ARGV[1] == 'read' then
  if writer then
    return {0, digits, writer_until - now, clock_digits, 0, false}
  end
  if waiting then
    return {0, digits, tonumber(marker[2]) - now, clock_digits, 0, false}
  end
  redis.call('ZADD', KEYS[2], now + ttl, holder)
  keep(ttl)
  if epoch then
    return {1, digits, -2, clock_digits, 0, epoch}
  end
  if proposal >= candidate then
    redis.call('SET', KEYS[3], ARGV[4])
    redis.call('HSET', KEYS[1], 'epoch', ARGV[4])
    return {1, digits, -2, clock_digits, 1, ARGV[4]}
  end
  return {1, digits, -2, clock_digits, 0, false}
end
local last_reader = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if (writer and writer ~= holder) or #last_reader > 0 then
  local queue = tonumber(ARGV[5])
  if queue > 0 and (not waiting or waiting == holder) then
    redis.call('HSET', KEYS[1], 'waiting', holder, 'waiting_until', now + queue)
    keep(queue)
  end
  local ends = writer and writer_until or 0
  if #last_reader > 0 and tonumber(last_reader[2]) > ends then
    ends = tonumber(last_reader[2])
  end
  return {0, digits, ends - now, clock_digits, 0, false}
end
if waiting == holder then
  redis.call('HDEL', KEYS[1], 'waiting', 'waiting_until')
end
local value, accepted = holder, 0
if proposal >= candidate then
  redis.call('SET', KEYS[3], ARGV[4])
  value, accepted = ARGV[4] .. ':' .. holder, 1
end
redis.call('HSET', KEYS[1], 'writer', value, 'writer_until', now + ttl)
keep(ttl)
return {1, digits, -2, clock_digits, accepted, accepted == 1 and ARGV[4] or false}
""",
    3,
)

RW_COMMIT = Script(
    """
-- fencing redlock rw round 2, on one node: make the token T this lease's here.
-- KEYS as RW_ACQUIRE; ARGV[1] "read" or "write"; ARGV[2] holder id; ARGV[3] T (digits);
-- ARGV[4] "<P>:<holder>" (the writer's lease where round 1 took the proposal)
-- A writer: the counter is raised to T whoever holds; if the writer's lease is still
-- this acquisition's (ARGV[2] or ARGV[4]) it becomes "<T>:<holder>": 1, else 0.
-- A reader: if its lease is live and this node's epoch is T already, or it has none and
-- T is above the counter (the epoch, and the counter, become T): 1; else 0, and the
-- reader's lease here, which did not count, is dropped (an epoch is never replaced
-- while its readers are in: their token stays). So a reader is live only on nodes
-- whose epoch is its token, and its release can compare the two.
"""
    + _LUA_NODE
    + """
local holder, token = ARGV[2], ARGV[3]
if ARGV[1] == 'read' then
  local ends = redis.call('ZSCORE', KEYS[2], holder)
  if not ends then
    return 0
  end
  if epoch == token then
    return 1
  end
  local last = counter()
  if epoch or (last and last >= tonumber(token)) then
    redis.call('ZREM', KEYS[2], holder)
    if redis.call('ZCARD', KEYS[2]) == 0 then
      redis.call('HDEL', KEYS[1], 'epoch')
    end
    return 0
  end
  redis.call('SET', KEYS[3], token)
  redis.call('HSET', KEYS[1], 'epoch', token)
  return 1
end
raise(token)
if writer and (writer == holder or writer == ARGV[4]) then
  redis.call('HSET', KEYS[1], 'writer', token .. ':' .. holder)
  return 1
end
return 0
""",
    3,
)

RW_RENEW = Script(
    """
-- fencing redlock rw renew, on one node.
-- KEYS as RW_ACQUIRE; ARGV[1] "read" or "write"; ARGV[2] the token; ARGV[3] holder id;
-- ARGV[4] the new ttl in ms
-- Returns 1 when that exact lease is live here (a reader's: in this node's epoch) and now
-- lasts ARGV[4] ms, else 0 (no other lease is touched).
"""
    + _LUA_NODE
    + """
local holder, ttl = ARGV[3], tonumber(ARGV[4])
if ARGV[1] == 'read' then
  if not redis.call('ZSCORE', KEYS[2], holder) or epoch ~= ARGV[2] then
    return 0
  end
  redis.call('ZADD', KEYS[2], now + ttl, holder)
elseif writer == ARGV[2] .. ':' .. holder then
  redis.call('HSET', KEYS[1], 'writer_until', now + ttl)
else
  return 0
end
keep(ttl)
return 1
""",
    3,
)

RW_RELEASE = Script(
    """
-- fencing redlock rw release (and the give-back of a grant that did not count).
-- KEYS as RW_ACQUIRE, KEYS[4] the wake list; ARGV[1] "read" or "write";
-- ARGV[2] holder id; ARGV[3] the token ("0" for a give-back: whatever the lease's);
-- ARGV[4] "<P>:<holder>" (a writer's lease with the proposal); ARGV[5] wake-up ms
-- Ends this acquisition's lease here if it is live: a give-back (ARGV[4] with a proposal)
-- a reader's whatever its epoch, a release ("0:<holder>") a reader's only in the epoch
-- ARGV[3] (the only one it is live in, RW_COMMIT); a writer's if it is the bare holder
-- id, "<P>:<holder>" or "<token>:<holder>". Leaves one wake-up in the wake list when it
-- ended one. Returns 1 when it ended the lease with that token (ARGV[3]), else 0.
"""
    + _LUA_NODE
    + """
local holder, token = ARGV[2], ARGV[3]
local held = 0
if ARGV[1] == 'read' then
  if epoch ~= token and ARGV[4] == '0:' .. holder then
    return 0
  end
  if redis.call('ZREM', KEYS[2], holder) == 0 then
    return 0
  end
  if epoch == token then
    held = 1
  end
  if redis.call('ZCARD', KEYS[2]) == 0 then
    redis.call('HDEL', KEYS[1], 'epoch')
  end
else
  local committed = token .. ':' .. holder
  if not writer or (writer ~= holder and writer ~= ARGV[4] and writer ~= committed) then
    return 0
  end
  if writer == committed then
    held = 1
  end
  redis.call('HDEL', KEYS[1], 'writer', 'writer_until')
end
redis.call('DEL', KEYS[4])
redis.call('RPUSH', KEYS[4], 1)
redis.call('PEXPIRE', KEYS[4], ARGV[5])
return held
""",
    4,
)


@lru_cache(maxsize=4096)
def redlock_rw_keys(name: str) -> RWKeys:
    """The keys of the read-write lock ``name`` on every node, built once: the single
    server's layout under Redlock's prefix."""
    return rw_keys_under(b"fencing:redlock:{" + name.encode() + b"}:")


def parse_rw_grant(reply: Any) -> Grant:
    """``RW_ACQUIRE``'s reply, as a ``Grant`` whose ``held`` is the node's token for the
    lease (an epoch joined, or the proposal taken); anything else is an error."""
    grant = parse_grant(reply[:5] if isinstance(reply, list) else reply)
    epoch = reply[5]
    held = int(epoch) if isinstance(epoch, bytes) and epoch.isdigit() else None
    if grant.granted and held is not None:
        return Grant(grant.granted, grant.candidate, grant.pttl, grant.clock, grant.accepted, held)
    return grant


class RWScripts:
    """One side (``mode``: ``"read"`` or ``"write"``) of the read-write lock ``name`` as
    the per-node scripts ``RedlockFlows`` sends (``_redlock_flows.NodeScripts``): the
    fence's acquire, commit, renew and release flows run on them unchanged.
    ``queue_ms``: how long a refused writer marks itself waiting (0: not waiting)."""

    __slots__ = ("keys", "mode", "queue")

    def __init__(self, name: str, mode: str, queue_ms: int = 0) -> None:
        self.keys = redlock_rw_keys(name)
        self.mode = mode.encode()
        self.queue = b"%d" % queue_ms

    def acquire(self, who: bytes, ttl_ms: int, proposal: int) -> NodeCall:
        keys = self.keys[:3]
        return RW_ACQUIRE, (*keys, self.mode, who, ttl_ms, b"%d" % proposal, self.queue)

    grant = staticmethod(parse_rw_grant)

    def commit(self, who: bytes, token: int, proposal: int) -> NodeCall:
        keys = self.keys[:3]
        return RW_COMMIT, (*keys, self.mode, who, b"%d" % token, lease_value(proposal, who))

    def give_back(self, who: bytes, token: int | None, proposal: int) -> NodeCall:
        digits = b"0" if token is None else b"%d" % token
        return RW_RELEASE, (*self.keys, self.mode, who, digits, lease_value(proposal, who), WAKE_MS)

    def renew(self, token: int, who: bytes, ttl_ms: int) -> NodeCall:
        return RW_RENEW, (*self.keys[:3], self.mode, b"%d" % token, who, ttl_ms)

    def release(self, token: int, who: bytes) -> NodeCall:
        return self.give_back(who, token, 0)


def rw_operate_keys(name: str) -> tuple[bytes, ...]:
    """KEYS of the single server's operator scripts (``_rwlock_operate``: ``RW_STATUS``,
    and ``RW_FORCE_RELEASE`` with a stream of its own as KEYS[4]: the wake list is a
    list), run on each node: their hash and sorted set are laid out as these."""
    keys = redlock_rw_keys(name)
    return keys.lock, keys.readers, keys.counter, keys.released + b":forced"


def _majority_left(lefts: list[float], quorum: int) -> float | None:
    """How long a majority still holds a lease, from each holding node's ms left."""
    if len(lefts) < quorum:
        return None
    return sorted(lefts, reverse=True)[quorum - 1] / 1000


def quorum_rw_status(name: str, replies: list[Any], quorum: int) -> RWStatus:
    """The read-write lock as a majority holds it, from the nodes' ``inspect()``
    replies (``_rwlock_operate``, at least ``quorum`` of them): the writer whose
    committed lease ``"<token>:<holder>"`` a majority has, or the epoch a majority's
    readers are in and the readers a majority has in it; else free. ``waiting``: a
    writer a majority marks waiting; ``last_token``: the highest counter."""
    writers: dict[bytes, list[float]] = {}
    epochs: dict[bytes, dict[bytes, list[float]]] = {}
    waiting: Counter[bytes] = Counter()
    counters = [0]
    try:
        for writer, writer_left, epoch, readers, waiter, counter in replies:
            counters.append(int(counter or 0))
            if waiter is not None:
                waiting[waiter] += 1
            if writer is not None:
                writers.setdefault(writer, []).append(writer_left)
            if readers and epoch is not None:
                members = epochs.setdefault(epoch, {})
                for holder, left in zip(readers[::2], readers[1::2], strict=True):
                    members.setdefault(holder, []).append(left)
    except (TypeError, ValueError) as exc:
        raise issuer_error("redis redlock", ValueError(f"unexpected reply {replies!r}")) from exc
    waiter = next((w.decode("latin-1") for w, n in waiting.items() if n >= quorum), None)
    last = max(counters) or None
    for value, lefts in writers.items():
        digits, colon, holder = value.partition(b":")
        left = _majority_left(lefts, quorum)
        if colon and digits.isdigit() and left is not None:
            token = int(digits)
            return RWStatus(
                name, True, WRITE, token, {holder.decode("latin-1"): left}, waiter, last
            )
    for epoch, members in epochs.items():
        held = {h.decode("latin-1"): _majority_left(lefts, quorum) for h, lefts in members.items()}
        holders = {holder: left for holder, left in held.items() if left is not None}
        if holders and sum(1 for reply in replies if reply[2] == epoch) >= quorum:
            return RWStatus(name, True, READ, int(epoch), holders, waiter, last)
    return RWStatus(name, False, waiting=waiter, last_token=last)
