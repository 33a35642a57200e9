"""The Redis issuer's Lua scripts, key layout, argument builders and reply parsers.

Everything here is pure (no I/O) and shared by the sync and asyncio issuers and locks,
so a ``RedisFence`` and an ``AsyncRedisFence`` on the same name use the same keys and
exclude each other, and a ``FencedLock`` of that name shares their token counter (its
lease is the lock's own key, see ``LOCK_ACQUIRE`` and ``LockKeys``).

Key layout of the fence ``<name>`` (one hash tag, so all keys of a fence live in one
Redis Cluster slot, the slot of ``<name>``; names with a ``}`` differ: see
``key_prefix``)::

    fencing:{<name>}:lease         "<token>:<holder>" while held, with the lease's PX expiry;
                                   "+<token>:<holder>" while waiters are queued
    fencing:{<name>}:counter       the last token issued; expires after a long idle period
    fencing:{<name>}:queue         holder ids of the waiters, first come first served
    fencing:{<name>}:waiting       hash: holder id -> "<deadline ms>:<ttl ms>:<idle ms>"
    fencing:{<name>}:wake:<holder> a one-element list: the token a release handed over

Direct hand-off: an acquire attempt that finds the lease busy queues its holder id in
the same atomic step (until a deadline on the server's clock, a little past the
waiter's next wait) and the waiter BLPOPs its own wake key. The release pops the first
waiter whose deadline has not passed, gives it the lease and a fresh token in the same
script, and pushes the token to its wake key: the waiter holds the lease the moment
BLPOP returns, with no further round trip. Queueing marks the lease (a "+" in front of
its value), and only a marked lease's release looks at the queue, so an uncontended
release is a bare compare-and-delete. A waiter that missed its wake-up (its
BLPOP had just ended) finds the lease under its own holder id at its next attempt; one
that gives up leaves the queue in an attempt with ``queue_ms`` 0 (see
``_protocol.wait_flow``). The scripts are passed only the lease key and derive the
counter, queue and wake keys from it, so all share its hash tag and slot (``STATUS``,
which also reads a ``FencedLock``'s keys, is passed all three it reads).

Keys and fixed arguments go to redis-py as bytes, built once (``fence_keys`` is an LRU
cache), so it does not encode them again on every call.

Imports the core's millis, the errors and the issuer protocols only (no redis-py).
"""

from __future__ import annotations

import binascii
import hashlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from .._base.errors import FenceUnavailable, issuer_error
from .._lease.core import millis
from ..issuer import Busy, FenceStatus, SlotBusy

#: Default idle lifetime of a counter key: a week. A lost counter is harmless (tokens
#: restart from the server clock), so one-off names need not stay in Redis for ever.
DEFAULT_COUNTER_IDLE = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Script:
    """A Lua script with its SHA1, which is what we send (EVALSHA) on the hot path.

    ``sha_arg`` and ``numkeys_arg`` are the EVALSHA's first two arguments as bytes:
    redis-py sends bytes as they are, where a ``str`` or an ``int`` costs it an encoding
    at every call, on the path every acquire and release takes (docs/performance.md has
    the instruction counts).
    """

    text: str
    numkeys: int
    sha: str = field(init=False)
    sha_arg: bytes = field(init=False, repr=False)
    numkeys_arg: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sha = hashlib.sha1(self.text.encode()).hexdigest()
        object.__setattr__(self, "sha", sha)
        object.__setattr__(self, "sha_arg", sha.encode())
        object.__setattr__(self, "numkeys_arg", b"%d" % self.numkeys)


R = TypeVar("R")

#: One operation of a Redis issuer: a script, its KEYS and ARGV, and the parser of its
#: reply. Its one representation: an issuer runs it directly (``run``), a flow yields it
#: wrapped in a step (``_flows.Eval``).
Call = tuple[Script, tuple[Any, ...], Callable[[Any], R]]


#: Lua shared by the scripts that issue tokens (and by those that queue waiters). A
#: script is its header comment, then the helpers it calls, then its code; a script's
#: fast path may come before the helpers it does not need on it, since each helper is a
#: closure made at every call (``RELEASE``'s compare-and-delete makes none).
_LUA_TOKENS = """
-- A command on a key other than KEYS[1] (every such key of a fence is in its slot).
-- On Redis Cluster, while that slot migrates, the source master refuses a command on a
-- key it does not hold ("non local key"); here() then returns false: the key counts as
-- absent and a write to it is skipped. Every caller can do without: a missing counter
-- gives way to the clock, a waiter left out of the queue or not woken finds the lease
-- at its next attempt. Any other error is raised.
local function here(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    if string.find(reply.err, 'non local key', 1, true) then
      return false
    end
    error(reply)
  end
  return reply
end

-- The next token of a fence, as digits: max(counter + 1, server clock in
-- microseconds), so a lost or stale counter restarts above every earlier token unless
-- the server clock stepped back further than the time that passed. Also returns the
-- TIME reply (see millis). The clock's digits are joined as text and compared with the
-- counter's by length, then byte by byte (both are plain digits), so the usual case
-- converts no number (tonumber is a strtod); counter + 1 stays below 2^53.
local function next_token(counter)
  local now = redis.call('TIME')
  local token = now[1] .. string.sub('00000' .. now[2], -6)
  local last = here('GET', counter)
  if last and (#last > #token or (#last == #token and last >= token)) then
    local number = tonumber(last)
    if number then
      token = string.format('%d', number + 1)
    end
  end
  return token, now
end

-- A TIME reply in whole milliseconds.
local function millis(now)
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- SET key value, with PX ms unless ms is '0' (no expiry), and NX when nx is true
-- (through here(): the same for KEYS[1], which is always local).
local function set(key, value, ms, nx)
  if ms == '0' then
    if nx then return here('SET', key, value, 'NX') end
    return here('SET', key, value)
  end
  if nx then return here('SET', key, value, 'NX', 'PX', ms) end
  return here('SET', key, value, 'PX', ms)
end

-- Take the lease KEYS[1] with value if it is free, for ms ('0': no expiry); true if
-- taken. KEYS[1] is always local: no here().
local function take(value, ms)
  if ms == '0' then
    return redis.call('SET', KEYS[1], value, 'NX')
  end
  return redis.call('SET', KEYS[1], value, 'NX', 'PX', ms)
end
"""

#: Lua shared by the scripts that queue waiters and hand leases over (after
#: ``_LUA_TOKENS``, whose helpers it calls). The queue of a fence (or of a lock) is the
#: list '<prefix>queue' of holder ids, the hash '<prefix>waiting' of their places
#: ("<deadline ms>:<ttl ms>:<idle ms>") and a wake key '<prefix>wake:<holder>' each.
_LUA_QUEUE = """
-- Take holder out of the queue of the fence whose keys start with prefix.
local function leave(prefix, holder)
  if here('HDEL', prefix .. 'waiting', holder) == 1 then
    here('LREM', prefix .. 'queue', 1, holder)
  end
end

-- Where a busy attempt of holder leaves it in the queue under prefix. ms '0': out of
-- it (it leaves, if an earlier attempt queued it: queued). Else it joins the end of
-- the queue, or keeps its place, until ms ms past now (a TIME reply), asking for a
-- lease of ttl ms and a counter idle lifetime of idle ms when it is handed the lease;
-- the queue lives as long as its latest deadline. Returns true when its place was
-- written, false when not (left, or a migrating slot kept it out).
local function queue_up(prefix, holder, ms, queued, now, ttl, idle)
  if ms == '0' then
    if queued then
      leave(prefix, holder)
    end
    return false
  end
  local queue, waiting = prefix .. 'queue', prefix .. 'waiting'
  local wait = tonumber(ms)
  local place = string.format('%d', millis(now) + wait) .. ':' .. ttl .. ':' .. idle
  local added = here('HSET', waiting, holder, place)
  if added == 1 then
    here('RPUSH', queue, holder)
  end
  if added and (here('PTTL', queue) or -2) < wait then
    here('PEXPIRE', queue, wait)
    here('PEXPIRE', waiting, wait)
  end
  return added ~= false
end

-- The hand-off of a release: give the lease KEYS[1] to the first waiter queued under
-- prefix whose deadline has not passed, dropping those whose deadline passed on the
-- way. The lease gets the waiter's ttl and, as its value, the waiter's id when lock is
-- true (a lock keeps its lock token only), else "<token>:<waiter>", marked with "+" if
-- others still wait; counter gets the fresh token with the waiter's idle lifetime, and
-- the token is pushed to the waiter's wake key. Returns true when handed over, false
-- when no waiter was left (the lease is then untouched).
local function hand_off(prefix, counter, lock)
  local queue, waiting = prefix .. 'queue', prefix .. 'waiting'
  local waiter = here('LPOP', queue)
  while waiter do
    local place = here('HGET', waiting, waiter)
    here('HDEL', waiting, waiter)
    if place then
      local deadline, ttl, idle = string.match(place, '^(%d+):(%d+):(%d+)$')
      local digits, now = next_token(counter)
      local left = tonumber(deadline) - millis(now)
      if left > 0 then
        local value = waiter
        if not lock then
          value = digits .. ':' .. waiter
          if here('EXISTS', queue) == 1 then
            value = '+' .. value
          end
        end
        set(KEYS[1], value, ttl, false)
        set(counter, digits, idle, false)
        local wake = prefix .. 'wake:' .. waiter
        if here('RPUSH', wake, digits) then
          here('PEXPIRE', wake, left)
        end
        return true
      end
    end
    waiter = here('LPOP', queue)
  end
  return false
end
"""


ACQUIRE = Script(
    """
-- fencing acquire: take a fence's lease and issue its next token, in one step.
-- KEYS[1] lease key (the counter and queue keys are derived from it)
-- ARGV[1] holder id (unique per acquisition)
-- ARGV[2] lease ttl in ms; "0" = the lease never expires
-- ARGV[3] counter idle lifetime in ms; "0" = the counter never expires
-- ARGV[4] ms to queue the holder for a hand-off when the lease is busy; "0" = do not
--         queue it (and take it out of the queue if it is in)
-- ARGV[5] present ("1") when an earlier attempt of this holder queued it
-- Returns the new token (an integer > 0) when the lease was free or had been handed to
-- this holder, else {pttl}: the lease's remaining ms, or -1 when it has no expiry.
-- Queueing marks the lease: its value gets a "+" in front, so that only the release of
-- a marked lease looks at the queue.
"""
    + _LUA_TOKENS
    + """
local holder = ARGV[1]
local prefix = string.sub(KEYS[1], 1, -6)
local counter = prefix .. 'counter'
local digits, now = next_token(counter)
local taken = take(digits .. ':' .. holder, ARGV[2])
if taken then
  set(counter, digits, ARGV[3], false)
  if not ARGV[5] then
    return tonumber(digits)
  end
end
"""
    + _LUA_QUEUE
    + """
if taken then  -- a waiter that took an expired lease: serve the others at release
  leave(prefix, holder)
  if here('EXISTS', prefix .. 'queue') == 1 then
    redis.call('SET', KEYS[1], '+' .. digits .. ':' .. holder, 'KEEPTTL')
  end
  return tonumber(digits)
end
local held = redis.call('GET', KEYS[1])
if ARGV[5] then
  local token, owner = string.match(held, '^%+?(%d+):(.*)$')
  if owner == holder then  -- a release handed it over; the wake-up was not heard
    here('DEL', prefix .. 'wake:' .. holder)
    return tonumber(token)
  end
end
if queue_up(prefix, holder, ARGV[4], ARGV[5], now, ARGV[2], ARGV[3])
    and string.sub(held, 1, 1) ~= '+' then  -- mark the lease: its release serves the queue
  redis.call('SET', KEYS[1], '+' .. held, 'KEEPTTL')
end
return {redis.call('PTTL', KEYS[1])}
""",
    numkeys=1,
)

SLOT_ACQUIRE = Script(
    """
-- fencing slot acquire: take a slot of a semaphore and issue the slot's next token,
-- only while fewer than the caller's permits of the semaphore's slots are held.
-- KEYS[1] lease key of the slot (its counter key is derived from it)
-- KEYS[2] the semaphore's width key, "<width>:<renew at ms>": one past the highest slot
--         ever taken, and when a take next refreshes its lifetime (half of ARGV[3]
--         after the last write), so the usual take writes nothing more than ACQUIRE
-- ARGV[1] holder id (unique per acquisition)
-- ARGV[2] lease ttl in ms
-- ARGV[3] counter idle lifetime in ms, also the width key's; "0" = never expires
-- ARGV[4] the slot, k
-- ARGV[5] the caller's permits, N
-- ARGV[6] the slots' lease keys without their number: slot j's is ARGV[6] .. j .. ':lease'
-- ARGV[7] optional, ms: the caller waits for a release if refused (see refused())
-- Returns the new token (an integer > 0) when the slot was free and fewer than N other
-- slots are held; {pttl} of the slot's lease when it is held; {-1} when N other slots
-- are held; with ARGV[7], each refusal also carries the release stream's last id.
-- Only slots below N exist while the width is at most N: then there is nothing to
-- count (every client on one N). A key of another slot that a migrating Redis Cluster
-- slot keeps away counts as free (here()).
"""
    + _LUA_TOKENS
    + """
-- A refusal: {pttl}; with ARGV[7], {pttl, id}, where id is the last entry of the
-- semaphore's release stream ARGV[6] .. ':released' (made with one entry if missing,
-- and kept alive at least ARGV[7] ms), read in this step: SLOT_RELEASE adds an entry
-- when it frees a slot, so a waiter blocked on the stream from id wakes at every
-- release after this refusal. A migrating cluster slot that keeps the stream away
-- gives {pttl} (the caller then polls).
local function refused(pttl)
  if not ARGV[7] then
    return {pttl}
  end
  local stream = ARGV[6] .. ':released'
  local last = here('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  local id = last and last[1] and last[1][1]
  if last and not id then
    id = here('XADD', stream, 'MAXLEN', '1', '*', 'made', '1')
  end
  if not id then
    return {pttl}
  end
  if (here('PTTL', stream) or -2) < tonumber(ARGV[7]) then
    here('PEXPIRE', stream, ARGV[7])
  end
  return {pttl, id}
end

local slot, permits = tonumber(ARGV[4]), tonumber(ARGV[5])
local width, renew_at = 0, 0
local known = redis.call('GET', KEYS[2])
if known then
  local w, r = string.match(known, '^(%d+):(%d+)$')
  width, renew_at = tonumber(w) or 0, tonumber(r) or 0
end
if width > permits then
  local held = 0
  for j = 0, width - 1 do
    if j ~= slot and here('EXISTS', ARGV[6] .. j .. ':lease') == 1 then
      held = held + 1
      if held >= permits then
        return refused(-1)
      end
    end
  end
end
local counter = string.sub(KEYS[1], 1, -6) .. 'counter'
local digits, now = next_token(counter)
if not take(digits .. ':' .. ARGV[1], ARGV[2]) then
  return refused(redis.call('PTTL', KEYS[1]))
end
set(counter, digits, ARGV[3], false)
local ms = millis(now)
if slot >= width or (ARGV[3] ~= '0' and ms >= renew_at) then
  local half = math.floor(tonumber(ARGV[3]) / 2)
  set(KEYS[2], string.format('%d:%d', math.max(width, slot + 1), ms + half), ARGV[3], false)
end
return tonumber(digits)
""",
    numkeys=2,
)

RENEW = Script(
    """
-- fencing renew: extend a lease, only for the exact lease named.
-- KEYS[1] lease key
-- ARGV[1] the lease value expected: "<token>:<holder>" (with or without the "+" mark)
-- ARGV[2] ms
-- ARGV[3] "0": the lease expires ARGV[2] ms from now; "1": ARGV[2] ms are added to
--         what is left (redis-py Lock.extend)
-- Returns 1 when renewed; 0 when the lease is not held with that value (or, adding,
-- when it has no expiry), and then nothing is changed.
local held = redis.call('GET', KEYS[1])
if held ~= ARGV[1] and held ~= '+' .. ARGV[1] then
  return 0
end
local ms = tonumber(ARGV[2])
if ARGV[3] == '1' then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then
    return 0
  end
  ms = ms + left
end
redis.call('PEXPIRE', KEYS[1], ms)
return 1
""",
    numkeys=1,
)


def _release(header: str, freed: str) -> Script:
    """RELEASE's code after ``header``, running ``freed`` (Lua, indented once) where the
    lease is deleted: ``RELEASE`` runs nothing more, ``SLOT_RELEASE`` wakes the
    semaphore's waiters."""
    return Script(
        header
        + """local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  redis.call('DEL', KEYS[1])
"""
        + freed
        + """  return 1
end
if held ~= '+' .. ARGV[1] then
  return 0
end
"""
        + _LUA_TOKENS
        + _LUA_QUEUE
        + """
local prefix = string.sub(KEYS[1], 1, -6)
if not hand_off(prefix, prefix .. 'counter', false) then
  redis.call('DEL', KEYS[1])
"""
        + freed
        + """end
return 1
""",
        numkeys=1,
    )


RELEASE = _release(
    """
-- fencing release: end a lease, only for the exact lease named, or hand it over.
-- KEYS[1] lease key (the counter and queue keys are derived from it)
-- ARGV[1] the lease value expected: "<token>:<holder>"
-- Returns 1 when released; 0 when the lease is not held with that value, and then
-- nothing is changed. An unmarked lease (nobody queued) is deleted. A marked one goes
-- to the first queued waiter whose deadline has not passed, with its own ttl and a
-- fresh token pushed to its wake key (marked again if others still wait); waiters
-- whose deadline passed are dropped on the way; with no such waiter it is deleted.
""",
    "",
)

SLOT_RELEASE = _release(
    """
-- fencing slot release: RELEASE of a semaphore's slot that also wakes the semaphore's
-- waiters when the slot is left free.
-- KEYS[1] lease key of slot k: "<head><k>:lease" (SLOT_ACQUIRE's ARGV[6] is <head>)
-- ARGV[1] the lease value expected: "<token>:<holder>"
-- ARGV[2] the semaphore's release stream, "<head>:released" (SLOT_ACQUIRE's refused()),
--         in the cluster slot of KEYS[1] (one hash tag)
-- Returns as RELEASE, and acts as it does. When the lease is deleted (not handed to a
-- fence waiter queued on the slot's own name) and the stream exists (a waiter's refused
-- take made it; it lives a little longer than their waits), an entry {slot: k} is added
-- to it (MAXLEN 1), k read off KEYS[1] between <head> and ':lease': every waiter
-- blocked on the stream from an earlier id wakes. With nobody waiting, nothing more is
-- written. A migrating cluster slot that keeps the stream away wakes nobody (the
-- waiters try again after their longest block).
""",
    """  if redis.pcall('EXISTS', ARGV[2]) == 1 then
    local slot = string.sub(KEYS[1], #ARGV[2] - #':released' + 1, -#':lease' - 1)
    redis.call('XADD', ARGV[2], 'MAXLEN', '1', '*', 'slot', slot)
  end
""",
)


# -- FencedLock's scripts: the lease is the lock's own key, as redis.lock.Lock keeps it ------

LOCK_ACQUIRE = Script(
    """
-- FencedLock acquire: take a lock as redis.lock.Lock does (SET name token NX PX) and
-- issue the fence's next token in the same step.
-- KEYS[1] the lock's own key (its name): the lock token while held, nothing else, so a
--         redis.lock.Lock on the same name sees the lock held, and is seen
-- ARGV[1] the fence's counter key (shared with RedisFence and AsyncRedisFence of the name)
-- ARGV[2] the lock's queue key; its waiting hash and wake keys start with the same
--         prefix ('...lock:waiting', '...lock:wake:<lock token>')
--         ARGV[1] and ARGV[2] are in the Redis Cluster slot of KEYS[1] (key_prefix's
--         promise) but not declared: while the slot migrates, a declared key missing on
--         its source makes Redis refuse the whole call (TRYAGAIN); undeclared, each is
--         reached through here()
-- ARGV[3] the lock token (redis-py's, any bytes)
-- ARGV[4] lease ttl in ms; "0" = the lock never expires (redis-py's timeout=None)
-- ARGV[5] counter idle lifetime in ms; "0" = the counter never expires
-- ARGV[6] ms to queue the waiter for a hand-off when the lock is busy; "0" = do not
--         queue it (and take it out of the queue if it is in)
-- ARGV[7] present ("1") when an earlier attempt of this waiter queued it
-- Returns the new token (an integer > 0) when the lock was free or had been handed to
-- this waiter, else {pttl}: the lock's remaining ms, or -1 when it has no expiry.
-- Unlike RedisFence's ACQUIRE, queueing does not mark the lease: its value must stay
-- the bare lock token that redis-py's own release compares.
"""
    + _LUA_TOKENS
    + """
local counter, holder = ARGV[1], ARGV[3]
local digits, now = next_token(counter)
local taken = take(holder, ARGV[4])
if taken then
  set(counter, digits, ARGV[5], false)
  if not ARGV[7] then
    return tonumber(digits)
  end
end
"""
    + _LUA_QUEUE
    + """
local prefix = string.sub(ARGV[2], 1, -6)
if taken then  -- a waiter that took an expired lock
  leave(prefix, holder)
  return tonumber(digits)
end
if ARGV[7] and redis.call('GET', KEYS[1]) == holder then
  -- a release handed the lock over and the wake-up was not heard: the token it pushed
  -- may have expired with the wake key, so issue a fresh one (also above all others)
  here('DEL', prefix .. 'wake:' .. holder)
  set(counter, digits, ARGV[5], false)
  return tonumber(digits)
end
queue_up(prefix, holder, ARGV[6], ARGV[7], now, ARGV[4], ARGV[5])
return {redis.call('PTTL', KEYS[1])}
""",
    numkeys=1,
)

LOCK_RELEASE = Script(
    """
-- FencedLock release: end a lock held with the given lock token, or hand it over.
-- KEYS[1] the lock's own key; ARGV[1] the fence's counter key, ARGV[2] the lock's
--         queue key (as in LOCK_ACQUIRE)
-- ARGV[3] the lock token expected
-- Returns 1 when released; 0 when the lock is not held with that token (by nobody, by
-- another FencedLock or by a redis.lock.Lock), and then nothing is changed. The lock
-- goes to the first queued waiter whose deadline has not passed, with its own ttl and
-- a fresh token pushed to its wake key; waiters whose deadline passed are dropped on
-- the way; with no such waiter it is deleted. redis.lock.Lock's own release deletes
-- the key without looking at the queue: its FencedLock waiters then find the lock free
-- at their next attempt (at most their `sleep` later).
if redis.call('GET', KEYS[1]) ~= ARGV[3] then
  return 0
end
"""
    + _LUA_TOKENS
    + _LUA_QUEUE
    + """
if not hand_off(string.sub(ARGV[2], 1, -6), ARGV[1], true) then
  redis.call('DEL', KEYS[1])
end
return 1
""",
    numkeys=1,
)

STATUS = Script(
    """
-- fencing status: read a lease, its counter and its waiters in one step (changes
-- nothing). For a fence and for a FencedLock (or a redis.lock.Lock): their keys differ.
-- KEYS[1] the lease key: a fence's 'fencing:{<name>}:lease', or a lock's own key <name>
-- KEYS[2] the token counter
-- KEYS[3] the waiting hash of the queue (holder id -> "<deadline ms>:...")
-- Returns {lease value or nil, lease pttl (-2 none, -1 no expiry), counter or nil,
-- the number of queued waiters whose deadline has not passed}; {type} when KEYS[1]
-- holds something other than a string (so it is no lease: a lock name given for a
-- key of the application's).
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' and kind ~= 'none' then
  return {kind}
end
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local waiters = 0
local places = redis.call('HVALS', KEYS[3])
for i = 1, #places do
  if tonumber(string.match(places[i], '^(%d+):')) > now then
    waiters = waiters + 1
  end
end
local counter = redis.call('GET', KEYS[2])
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), counter, waiters}
""",
    numkeys=3,
)

FORCE_RELEASE = Script(
    """
-- fencing force release: end a fence's lease whoever holds it, in one step, and make
-- sure the next token is above the ended lease's.
-- KEYS[1] lease key (the counter key is derived from it)
-- ARGV[1] counter idle lifetime in ms; "0" = the counter never expires
-- Returns {lease value, its pttl} of the lease ended, or {} when none was live.
-- The counter is raised to the ended lease's token if it was below (or gone), so the
-- next token is at least one more, whatever the server's clock says. Queued waiters
-- are not served here: each takes the free lease at its next attempt.
local held = redis.call('GET', KEYS[1])
if not held then
  return {}
end
local pttl = redis.call('PTTL', KEYS[1])
local token = string.match(held, '^%+?(%d+):')
local counter = string.sub(KEYS[1], 1, -6) .. 'counter'
local last = redis.call('GET', counter)
if token and (not last or #last < #token or (#last == #token and last < token)) then
  if ARGV[1] == '0' then
    redis.call('SET', counter, token)
  else
    redis.call('SET', counter, token, 'PX', ARGV[1])
  end
end
redis.call('DEL', KEYS[1])
return {held, pttl}
""",
    numkeys=1,
)


LOCK_FORCE_RELEASE = Script(
    """
-- FencedLock force release: end a lock kept as redis.lock.Lock keeps it (a FencedLock's
-- or a redis.lock.Lock's) whoever holds it, in one step, and make sure the next token
-- is above every token its holder could have.
-- KEYS[1] the lock's own key (its name), KEYS[2] the fence's counter
-- ARGV[1] counter idle lifetime in ms; "0" = the counter never expires
-- Returns {lock token, its pttl, counter} of the lock ended; {} when the key did not
-- exist (nothing changed); {type} when it holds something other than a string (no
-- lock: nothing changed).
-- Why the next token is above the evicted holder's: the lock's value is redis-py's
-- token only, so the fence token is not read here; it need not be. Every grant of the
-- lock (LOCK_ACQUIRE, or LOCK_RELEASE handing it over) stored its token in KEYS[2] in
-- the same script, and the counter only grows while it exists (next_token: at least
-- counter + 1), so a live counter is >= the evicted token and the next token is above
-- it. A missing counter (idle past counter_idle under a lock with no expiry, evicted, or
-- lost in a restart or failover) is set here to the server clock in microseconds:
-- tokens are clock-floored, max(counter + 1, clock at the grant), so the counter runs
-- ahead of the clock only by the tokens issued within one microsecond (one per script)
-- and the evicted token is at most about the clock at its grant: below the clock now,
-- unless the server's clock stepped back by more than the time that passed (the limit
-- every token has, see next_token). Writing this floor keeps it even if the clock
-- steps back after this. Queued waiters are not served here (as in FORCE_RELEASE):
-- each takes the free lock at its next attempt, at most its `sleep` later.
"""
    + _LUA_TOKENS
    + """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {}
end
if kind ~= 'string' then
  return {kind}
end
local held, pttl = redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])
local counter = redis.call('GET', KEYS[2])
if not counter then
  counter = next_token(KEYS[2])
  set(KEYS[2], counter, ARGV[1], false)
end
redis.call('DEL', KEYS[1])
return {held, pttl, counter}
""",
    numkeys=2,
)


# -- keys and arguments ------------------------------------------------------------------


@lru_cache(maxsize=1024)
def key_prefix(name: str) -> str:
    """What every key of the fence ``name`` starts with: its hash tag puts them all in the
    Redis Cluster slot of ``name`` itself (``slot(key_prefix(name) + anything) ==
    slot(name)``), so a script touches one slot, and a key named ``name`` (a lock's own
    key) sits beside them.

    - a name without ``}``: ``fencing:{<name>}:`` (the tag is the whole name, as in 0.1);
    - a name with a hash tag of its own (``orders{eu}:7``): ``fencing:{eu}:orders{eu}:7:``,
      the user's tag, so users co-locate fences on purpose;
    - any other name with a ``}`` (``a}b``, ``x{}y``): ``fencing:{<t>}:<name>:``, where
      ``t`` is the first hexadecimal number in the name's slot (see ``_slot_twin``).

    Distinct names never share a prefix: one ``}`` in the first form, at least two in
    the others, where the tag is followed by the name itself.
    """
    if "}" not in name:
        return f"fencing:{{{name}}}:"
    tag = hash_tag(name)
    return f"fencing:{{{_slot_twin(name) if tag is None else tag}}}:{name}:"


def hash_tag(key: str) -> str | None:
    """The hash tag of ``key`` by Redis Cluster's rule: what lies between the first ``{``
    and the first ``}`` after it, if that is not empty; else ``None`` (the whole key is
    hashed). ``{`` and ``}`` are ASCII, so the rule reads the same on str and UTF-8."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    return None if end <= start + 1 else key[start + 1 : end]


def key_slot(key: str) -> int:
    """The Redis Cluster slot of ``key`` (sent as UTF-8): CRC16 of its hash tag (or of
    the whole key) modulo 16384; ``binascii.crc_hqx`` is that CRC16 (XMODEM)."""
    tag = hash_tag(key)
    return binascii.crc_hqx((key if tag is None else tag).encode(), 0) % 16384


def _slot_twin(name: str) -> str:
    """The first hexadecimal number (``0``, ``1``, ... ``a``, ...) whose slot is the slot of
    ``name``: a hash tag for names that cannot be their own. 16384 tries on average
    (milliseconds), and every slot has one below ``0x4cd71`` (checked by the tests);
    ``key_prefix`` caches the result."""
    slot = key_slot(name)
    number = next(i for i in itertools.count() if binascii.crc_hqx(b"%x" % i, 0) % 16384 == slot)
    return f"{number:x}"


def lease_key(name: str) -> str:
    return key_prefix(name) + "lease"


#: The keys whose presence means a fence exists: its lease, or its counter.
_NAMED_SUFFIXES = ("lease", "counter")


def names_patterns(prefix: str) -> tuple[bytes, ...]:
    """The SCAN ``MATCH`` patterns of the keys of fences whose names may start with
    ``prefix``: ``fencing:{<prefix>*`` for names without ``}`` (``name_of`` and a
    ``startswith`` weed out the rest), and ``fencing:{*}:<prefix>*`` for those with one."""
    escaped = "".join("\\" + c if c in "*?[]\\" else c for c in prefix)
    plain = f"fencing:{{{escaped}*".encode()
    return (plain, f"fencing:{{*}}:{escaped}*".encode()) if prefix else (plain,)


def name_of(key: bytes) -> str | None:
    """The fence name of a lease or counter key, else ``None`` (a queue, wake or other
    key): the name whose ``key_prefix`` the key starts with (see there for the forms)."""
    try:
        text = key.decode()
    except UnicodeDecodeError:  # fence names are UTF-8
        return None
    head = "fencing:{"
    for suffix in _NAMED_SUFFIXES:
        if text.startswith(head) and text.endswith(":" + suffix):
            rest = text[len(head) : -len(suffix)]  # "<name>}:" or "<tag>}:<name>:"
            close = rest.find("}")
            name = rest[:close] if close == len(rest) - 2 else rest[close + 2 : -1]
            if name and key_prefix(name) + suffix == text:
                return name
    return None


class FenceKeys(NamedTuple):
    """The keys of one fence as bytes, ready for redis-py (no encoding per call)."""

    lease: bytes
    prefix: bytes

    def wake(self, holder: str) -> bytes:
        """The key a release pushes the handed-over token to, for ``holder``."""
        return self.prefix + b"wake:" + holder_bytes(holder)


@lru_cache(maxsize=1024)
def fence_keys(name: str) -> FenceKeys:
    """The keys of ``name``, built once; bounded, since names may be unbounded."""
    prefix = key_prefix(name).encode()
    return FenceKeys(prefix + b"lease", prefix)


class LockKeys(NamedTuple):
    """The keys of one ``FencedLock`` as bytes, encoded as its client encodes the name.

    The lease is the lock's own key, ``name``; the counter is the fence's, shared with
    ``RedisFence``; the queue, waiting hash and wake keys are the lock's own (a
    ``RedisFence`` release must never hand a waiter of the lock a lease of the fence).
    All start from ``key_prefix(name)``, whose slot is the slot of ``name`` itself (a
    promise of ``key_prefix``), so the script's keys are in one Redis Cluster slot.
    """

    lease: bytes
    counter: bytes
    queue: bytes

    def wake(self, holder: str) -> bytes:
        """The key a release pushes the handed-over token to, for ``holder``."""
        return self.queue[:-5] + b"wake:" + holder_bytes(holder)

    @property
    def waiting(self) -> bytes:
        """The hash of the queued waiters' places (``STATUS`` counts the live ones)."""
        return self.queue[:-5] + b"waiting"


def lock_keys(name: str, encode: Callable[[str], bytes]) -> LockKeys:
    """The keys of the lock ``name``, with ``encode`` (its client's encoder: redis-py
    writes ``name`` to the lock key with it, and a ``redis.lock.Lock`` must find it)."""
    prefix = encode(key_prefix(name))
    return LockKeys(encode(name), prefix + b"counter", prefix + b"lock:queue")


def holder_bytes(holder: str) -> bytes:
    """A holder id as sent to Redis: latin-1, so that a ``FencedLock``'s lock token (any
    bytes, decoded as latin-1 to pass through the fence protocol) arrives unchanged.
    The fences' own holder ids are hex, the same in every encoding."""
    return holder.encode("latin-1")


def lease_value(token: int, holder: str) -> bytes:
    """What the lease key holds while ``holder`` has the lease with ``token``
    (``holder_bytes``, inline; ``RedisFlows.release_call`` has this inline too)."""
    return b"%d:%s" % (token, holder.encode("latin-1"))


@lru_cache(maxsize=1024)
def group_head(group: str) -> str:
    """What the keys of the semaphore whose slots are the fences ``f"{group}{k}"`` start
    with: slot ``k``'s lease key is ``f"{head}{k}:lease"``; the semaphore's own keys are
    ``head + ":width"`` (``SLOT_ACQUIRE``) and ``head + ":released"`` (the release
    stream). ``group`` has a hash tag (``fencing._primitives.semaphore.slot_name``), so all of them
    sit in one Redis Cluster slot; ``ValueError`` otherwise."""
    if hash_tag(f"{group}0") is None:
        raise ValueError(f"semaphore slots {group!r}<k> have no Redis Cluster hash tag")
    return key_prefix(f"{group}0")[: -len("0:")]


@lru_cache(maxsize=1024)
def slot_keys(group: str, slot: int, permits: int) -> tuple[bytes, ...]:
    """KEYS and the ARGV that do not change between calls of ``SLOT_ACQUIRE`` on slot
    ``slot`` of the semaphore ``group`` (see ``group_head``), built once: its lease key,
    its width key, and, after the three per-call arguments, the slot, the permits and
    what ``SLOT_ACQUIRE`` appends ``k`` and ``:lease`` to."""
    head = group_head(group)
    lease = fence_keys(f"{group}{slot}").lease
    return lease, (head + ":width").encode(), b"%d" % slot, b"%d" % permits, head.encode()


def slot_acquire_args(
    group: str, slot: int, permits: int, holder: str, ttl_ms: int, idle_ms: int, wait_ms: int
) -> tuple[Any, ...]:
    """KEYS and ARGV of ``SLOT_ACQUIRE``; ``wait_ms`` 0: a refusal carries no stream id."""
    lease, width, slot_arg, permits_arg, head = slot_keys(group, slot, permits)
    per_call = (holder.encode("latin-1"), b"%d" % ttl_ms, b"%d" % idle_ms)
    if wait_ms:
        return (lease, width, *per_call, slot_arg, permits_arg, head, b"%d" % wait_ms)
    return (lease, width, *per_call, slot_arg, permits_arg, head)


@lru_cache(maxsize=1024)
def released_key(group: str) -> bytes:
    """The release stream of the semaphore ``group`` (see ``group_head``)."""
    return (group_head(group) + ":released").encode()


@lru_cache(maxsize=1024)
def slot_release_keys(group: str, slot: int) -> tuple[bytes, bytes]:
    """The keys ``SLOT_RELEASE`` of slot ``slot`` is passed, built once: the slot's lease
    key and the release stream."""
    return fence_keys(f"{group}{slot}").lease, released_key(group)


def slot_release_args(group: str, slot: int, token: int, holder: str) -> tuple[Any, ...]:
    """KEYS and ARGV of ``SLOT_RELEASE``."""
    lease, stream = slot_release_keys(group, slot)
    return (lease, lease_value(token, holder), stream)


def renew_args(name: str, value: bytes, ttl_ms: int, add: bool = False) -> tuple[Any, ...]:
    """KEYS and ARGV of ``RENEW`` for the lease holding ``value``."""
    return (fence_keys(name).lease, value, b"%d" % ttl_ms, b"1" if add else b"0")


def lock_acquire_args(
    keys: LockKeys, holder: str, ttl_ms: int, idle_ms: int, queue_ms: int, queued: bool
) -> tuple[Any, ...]:
    """KEYS and ARGV of ``LOCK_ACQUIRE`` (the lock key, then the counter and queue keys
    as its first arguments); ``ttl_ms``/``idle_ms`` 0 mean "no expiry"."""
    args = (*keys, holder_bytes(holder), b"%d" % ttl_ms, b"%d" % idle_ms, b"%d" % queue_ms)
    return (*args, b"1") if queued else args


def lock_release_args(keys: LockKeys, value: bytes) -> tuple[Any, ...]:
    """KEYS and ARGV of ``LOCK_RELEASE`` (as ``LOCK_ACQUIRE``'s) for the lock held with
    the lock token ``value``."""
    return (*keys, value)


def force_release_args(name: str, idle_ms: int) -> tuple[Any, ...]:
    """KEYS and ARGV of ``FORCE_RELEASE``."""
    return (fence_keys(name).lease, b"%d" % idle_ms)


def status_args(name: str) -> tuple[Any, ...]:
    """KEYS of ``STATUS`` for the fence ``name``: its lease, counter and waiting hash."""
    keys = fence_keys(name)
    return (keys.lease, keys.prefix + b"counter", keys.prefix + b"waiting")


def lock_status_args(keys: LockKeys) -> tuple[Any, ...]:
    """KEYS of ``STATUS`` for a lock: its own key, the counter and its waiting hash."""
    return (keys.lease, keys.counter, keys.waiting)


def lock_force_release_args(keys: LockKeys, idle_ms: int) -> tuple[Any, ...]:
    """KEYS and ARGV of ``LOCK_FORCE_RELEASE``."""
    return (keys.lease, keys.counter, b"%d" % idle_ms)


def idle_millis(counter_idle: float | None) -> int:
    """``counter_idle`` seconds as the script's ms argument (0 = never expires)."""
    return 0 if counter_idle is None else millis(counter_idle)


def block_seconds(seconds: float, socket_timeout: float | None) -> float | None:
    """How long one BLPOP may block, or ``None`` to not block at all.

    BLPOP's timeout 0 means "for ever", so waits under a millisecond are skipped. A
    client with a ``socket_timeout`` would fail a BLPOP that blocks longer than it, so
    a wait is cut to half of it: returning early only makes the waiter try again.
    """
    if socket_timeout is not None:
        seconds = min(seconds, socket_timeout / 2)
    if seconds < 0.001:
        return None
    return round(seconds, 3)


# -- replies -------------------------------------------------------------------------------


def parse_acquire(reply: Any) -> int | Busy:
    """``ACQUIRE``'s reply: the token, or ``Busy`` with the lease's remaining lifetime."""
    if type(reply) is int and reply > 0:
        return reply
    if type(reply) is list and len(reply) == 1 and type(reply[0]) is int:
        pttl = reply[0]
        return Busy(pttl / 1000 if pttl >= 0 else None)
    raise _unexpected("acquire", reply)


def parse_slot_acquire(reply: Any) -> int | Busy:
    """``SLOT_ACQUIRE``'s reply: the token, ``Busy``, or (asked with a wait) ``SlotBusy``
    with the release stream's last id."""
    if type(reply) is list and len(reply) == 2 and type(reply[0]) is int:
        pttl, since = reply
        if isinstance(since, (bytes, str)):
            return SlotBusy(_seconds_left(pttl), _text(since))
    return parse_acquire(reply)


def parse_released(reply: Any) -> int | None:
    """``XREAD``'s reply on a release stream: the slot of the release it woke on, or
    ``None`` when it timed out (or woke on the entry that made the stream). redis-py
    shapes it by protocol: ``[[stream, entries]]`` (RESP2), ``{stream: [entries]}``
    (RESP3); an entry is ``(id, fields)``."""
    fields = released_fields(reply)
    slot = None if fields is None else entry_field(fields, "slot")
    try:
        return None if slot is None else int(slot)
    except (TypeError, ValueError):
        raise _unexpected("wake-up", reply) from None


def released_fields(reply: Any) -> dict[Any, Any] | None:
    """The fields of the entry an ``XREAD`` of a release stream woke on (``reply`` shaped
    as ``parse_released`` says), or ``None`` when it timed out."""
    if not reply:
        return None
    try:
        entries = next(iter(reply.values()))[-1] if isinstance(reply, dict) else reply[0][1]
        fields = entries[-1][1]
    except (TypeError, IndexError, AttributeError, StopIteration):
        raise _unexpected("wake-up", reply) from None
    if not isinstance(fields, dict):
        raise _unexpected("wake-up", reply)
    return fields


def entry_field(fields: dict[Any, Any], name: str) -> Any:
    """A stream entry's field ``name`` (its key bytes, or str from a decoding client)."""
    return fields.get(name.encode(), fields.get(name))


def parse_wake(reply: Any) -> int | None:
    """A wake key's ``BLPOP`` reply: the token handed over, or ``None`` if none came."""
    if reply is None:
        return None
    try:
        return int(reply[1])
    except (TypeError, ValueError, IndexError):
        raise _unexpected("wake-up", reply) from None


def parse_flag(reply: Any, script: str) -> bool:
    """``RENEW``/``RELEASE``'s reply: 1 done, 0 not held; anything else is an error."""
    if reply == 1:
        return True
    if reply == 0:
        return False
    raise _unexpected(script, reply)


def parse_release(reply: Any) -> bool:
    """``RELEASE``'s (and ``SLOT_RELEASE``'s, ``LOCK_RELEASE``'s) reply: True if the lease
    was held. On the path of every release: its usual reply taken first."""
    return True if reply == 1 else parse_flag(reply, "release")


def parse_status(name: str, reply: Any) -> FenceStatus:
    """``STATUS``'s reply as a ``FenceStatus``."""
    try:
        value, pttl, counter, waiters = reply
        last = None if counter is None else int(counter)
        if value is None:
            return FenceStatus(name, held=False, last_token=last, waiters=int(waiters))
        token, holder = parse_lease_value(value)
    except (TypeError, ValueError):
        raise _unexpected("status", reply) from None
    last = token if last is None else max(last, token)
    return FenceStatus(name, True, holder, token, _seconds_left(pttl), last, int(waiters))


def parse_force_release(name: str, reply: Any) -> FenceStatus:
    """``FORCE_RELEASE``'s reply: the lease it ended, or not held."""
    if reply == []:
        return FenceStatus(name, held=False)
    try:
        value, pttl = reply
        token, holder = parse_lease_value(value)
    except (TypeError, ValueError):
        raise _unexpected("force release", reply) from None
    return FenceStatus(name, True, holder, token, _seconds_left(pttl), token)


def parse_lock_status(name: str, reply: Any) -> FenceStatus:
    """``STATUS``'s reply on a lock's keys as a ``FenceStatus``.

    ``holder`` is the lock token (redis-py's, as ``redis-cli GET <name>`` shows it).
    ``token`` is ``None``: the lock's key holds redis-py's token only (that is what lets
    a ``redis.lock.Lock`` on the name see it held, and be seen), so the fence token of
    its holder is not stored anywhere; ``last_token`` (the counter) is an upper bound
    of it, and the holder itself has it as ``lock.fence_token``.
    """
    _refuse_no_lock(name, reply)
    try:
        value, pttl, counter, waiters = reply
        last = None if counter is None else int(counter)
        waiting = int(waiters)
        if value is None:
            return FenceStatus(name, held=False, last_token=last, waiters=waiting)
        holder = _text(value)
    except (TypeError, ValueError):
        raise _unexpected("status", reply) from None
    return FenceStatus(name, True, holder, None, _seconds_left(pttl), last, waiting)


def parse_lock_force_release(name: str, reply: Any) -> FenceStatus:
    """``LOCK_FORCE_RELEASE``'s reply: the lock it ended (``token`` ``None``, as in
    ``parse_lock_status``; ``last_token`` the counter, above every token its holder
    could have), or not held."""
    if reply == []:
        return FenceStatus(name, held=False)
    _refuse_no_lock(name, reply)
    try:
        value, pttl, counter = reply
        return FenceStatus(name, True, _text(value), None, _seconds_left(pttl), int(counter))
    except (TypeError, ValueError):
        raise _unexpected("force release", reply) from None


def _refuse_no_lock(name: str, reply: Any) -> None:
    """A ``ValueError`` for a script's ``{type}`` reply: the key ``name`` holds a value of
    another type than a lock's (a string), so it is the application's, not a lock."""
    if type(reply) is list and len(reply) == 1 and isinstance(reply[0], (bytes, str)):
        raise ValueError(
            f"{name!r} is not a lock: its key holds a {_text(reply[0])}, not a lock token "
            "(nothing changed)"
        )


def _text(value: bytes | str) -> str:
    """A reply as text (a lock token is redis-py's ``uuid1().hex`` unless the user gave
    one: bytes UTF-8 cannot decode are shown escaped)."""
    return value if isinstance(value, str) else value.decode("utf-8", "backslashreplace")


def _seconds_left(pttl: int) -> float | None:
    """A ``PTTL`` reply in seconds; ``None`` for a key without expiry (``-1``)."""
    return pttl / 1000 if pttl >= 0 else None


def parse_lease_value(value: bytes) -> tuple[int, str]:
    """``(token, holder)`` of a lease value (``lease_value``, perhaps marked with "+")."""
    token, sep, holder = value.lstrip(b"+").partition(b":")
    if not sep:
        raise ValueError(f"not a lease value: {value!r}")
    return int(token), holder.decode("latin-1")


def _unexpected(script: str, reply: Any) -> FenceUnavailable:
    return issuer_error("redis", ValueError(f"unexpected reply {reply!r} from {script} script"))
