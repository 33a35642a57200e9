"""The Lua scripts, keys and arguments of Redis read-write locks (docs/rwlock.md).

Keys of the read-write lock ``<name>``, all under the fence's ``key_prefix`` (one Redis
Cluster slot, the slot of ``<name>``)::

    fencing:{<name>}:counter      the fence's token counter: the lock's token sequence
    fencing:{<name>}:rw           hash: writer "<token>:<holder>", writer_until (ms),
                                  epoch (the readers' token), waiting (a writer's holder
                                  id), waiting_until (ms), waiting_ttl ("<ms>:<idle
                                  ms>:<holder>": the ttl that writer asked for and its
                                  counter's idle lifetime)
    fencing:{<name>}:rw:readers   sorted set: holder id -> the read lease's end (ms)
    fencing:{<name>}:rw:released  stream: one entry per release, read by the waiters;
                                  "to" and "token" name a write lease it handed over

A release that leaves the lock free while a writer is marked waiting hands that writer
the write lease in the same step (a new token, as its acquire would take), as a fence's
release hands its lease to its queued waiter: the writer reads its token from the
stream's entry, or, if it missed it, its next acquire returns the lease it holds.

Times are the server's (``TIME``, in ms); entries whose end has passed count as absent
and are dropped by the next acquire. The hash and the sorted set expire once the last
lease or marker in them has ended. Every script is one atomic step, its keys all passed
as KEYS.

Imports the Redis scripts' shared Lua, ``Script``, the key prefix and the stream's
parsing (no redis-py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from .._base.errors import issuer_error
from ._scripts import _LUA_TOKENS, Script, entry_field, holder_bytes, key_prefix, released_fields

#: Lua shared by the three scripts (after ``_LUA_TOKENS``, whose ``millis`` it uses).
_LUA_RW = """
-- Make KEYS[1] and KEYS[2] live at least ms from now (a key without expiry gets one).
local function keep(ms)
  for i = 1, 2 do
    if redis.call('PTTL', KEYS[i]) < ms then
      redis.call('PEXPIRE', KEYS[i], ms)
    end
  end
end

-- The writer's lease ("<token>:<holder>") and its end, or false once it has ended.
local function writer_of(now)
  local state = redis.call('HMGET', KEYS[1], 'writer', 'writer_until')
  if state[1] and tonumber(state[2]) > now then
    return state[1], tonumber(state[2])
  end
  return false, 0
end
"""

RW_ACQUIRE = Script(
    """
-- fencing rw acquire: a read or write lease of a read-write lock, in one step.
-- KEYS[1] the lock's hash, KEYS[2] its readers (sorted set), KEYS[3] the fence's counter,
-- KEYS[4] its release stream
-- ARGV[1] "read" or "write"
-- ARGV[2] holder id (unique per acquisition)
-- ARGV[3] lease ttl in ms (> 0)
-- ARGV[4] counter idle lifetime in ms; "0" = the counter never expires
-- ARGV[5] ms the caller will wait when refused, a writer marked waiting that long;
--         "0" = it will not wait (and a writer's marker, if it has one, is cleared)
-- Returns the token (an integer > 0): a writer's new one (or the one a release handed
-- it: a writer queued before), or the readers' epoch (a new one when the lock had no
-- reader); else {ms}: when the leases that refuse it end; a
-- caller that will wait gets {ms, id}, id the release stream's last entry read in this
-- step (the stream made with one entry if missing, kept alive ARGV[5] ms at least), so
-- a wait from id wakes at every release after this refusal, none missed in between.
"""
    + _LUA_TOKENS
    + _LUA_RW
    + """
local holder, ttl, queue = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])

local function refused(ms)
  if queue == 0 then
    return {ms}
  end
  local last = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)
  local id = last[1] and last[1][1]
  if not id then
    id = redis.call('XADD', KEYS[4], 'MAXLEN', '1', '*', 'made', '1')
  end
  if redis.call('PTTL', KEYS[4]) < queue then
    redis.call('PEXPIRE', KEYS[4], queue)
  end
  return {ms, id}
end

local now = millis(redis.call('TIME'))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local writer, writer_until = writer_of(now)
local marker = redis.call('HMGET', KEYS[1], 'waiting', 'waiting_until')
local waiting = marker[1]
if waiting and tonumber(marker[2]) <= now then
  waiting = false
end
if ARGV[1] == 'read' then
  if writer then
    return refused(writer_until - now)
  end
  if waiting then  -- a writer waits: new readers wait behind it
    return refused(tonumber(marker[2]) - now)
  end
  local epoch = redis.call('HGET', KEYS[1], 'epoch')
  if not epoch or redis.call('ZCARD', KEYS[2]) == 0 then  -- a new epoch
    epoch = next_token(KEYS[3])
    set(KEYS[3], epoch, ARGV[4], false)
    redis.call('HSET', KEYS[1], 'epoch', epoch)
  end
  redis.call('ZADD', KEYS[2], now + ttl, holder)
  keep(ttl)
  return tonumber(epoch)
end
if writer and string.match(writer, '^%d+:(.*)$') == holder then  -- handed over to it
  return tonumber(string.match(writer, '^(%d+):'))
end
if waiting == holder and queue == 0 then
  redis.call('HDEL', KEYS[1], 'waiting', 'waiting_until', 'waiting_ttl')
  waiting = false
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if writer or #last > 0 then
  if queue > 0 and (not waiting or waiting == holder) then
    redis.call(
      'HSET', KEYS[1], 'waiting', holder, 'waiting_until', now + queue,
      'waiting_ttl', ttl .. ':' .. ARGV[4] .. ':' .. holder)
    keep(queue)
  end
  local ends = writer_until
  if #last > 0 and tonumber(last[2]) > ends then
    ends = tonumber(last[2])
  end
  return refused(ends - now)
end
if waiting == holder then
  redis.call('HDEL', KEYS[1], 'waiting', 'waiting_until', 'waiting_ttl')
end
local token = next_token(KEYS[3])
set(KEYS[3], token, ARGV[4], false)
redis.call('HSET', KEYS[1], 'writer', token .. ':' .. holder, 'writer_until', now + ttl)
keep(ttl)
return tonumber(token)
""",
    numkeys=4,
)

RW_RENEW = Script(
    """
-- fencing rw renew: extend one read or write lease of a read-write lock.
-- KEYS[1] the lock's hash, KEYS[2] its readers (sorted set)
-- ARGV[1] "read" or "write", ARGV[2] the lease's token, ARGV[3] its holder id,
-- ARGV[4] the new ttl in ms
-- Returns 1 if that exact lease was live and now lasts ARGV[4] ms, else 0.
"""
    + _LUA_TOKENS
    + _LUA_RW
    + """
local holder, ttl = ARGV[3], tonumber(ARGV[4])
local now = millis(redis.call('TIME'))
if ARGV[1] == 'read' then
  local ends = redis.call('ZSCORE', KEYS[2], holder)
  if not ends or tonumber(ends) <= now or redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then
    return 0
  end
  redis.call('ZADD', KEYS[2], now + ttl, holder)
else
  if writer_of(now) ~= ARGV[2] .. ':' .. holder then
    return 0
  end
  redis.call('HSET', KEYS[1], 'writer_until', now + ttl)
end
keep(ttl)
return 1
""",
    numkeys=2,
)

RW_RELEASE = Script(
    """
-- fencing rw release: end one read or write lease of a read-write lock, hand the lock
-- to the writer marked waiting if none is left (hand_over), and wake the waiters.
-- KEYS[1] the lock's hash, KEYS[2] its readers (sorted set), KEYS[3] its release stream,
-- KEYS[4] the fence's counter
-- ARGV[1] "read" or "write", ARGV[2] the lease's token, ARGV[3] its holder id
-- Returns 1 if that exact lease was live (and has ended), else 0.
"""
    + _LUA_TOKENS
    + _LUA_RW
    + """
-- The write lease this release hands over, or false: when no lease is left and a
-- writer is marked waiting, that writer takes it here, its token a new one from the
-- counter (as its acquire's), its ttl the one it asked for (waiting_ttl, which has
-- its counter's idle lifetime and names the writer too: a marker that an older
-- release of this script set has no ttl of its own, and is handed nothing; that
-- writer acquires as before).
local function hand_over(now)
  local state = redis.call(
    'HMGET', KEYS[1], 'waiting', 'waiting_until', 'waiting_ttl', 'writer', 'writer_until')
  local ttl, idle, asker = string.match(state[3] or '', '^(%d+):(%d+):(.*)$')
  if asker ~= state[1] or tonumber(state[2]) <= now or (state[4] and tonumber(state[5]) > now)
  then
    return false
  end
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if #last > 0 and tonumber(last[2]) > now then
    return false
  end
  local token = next_token(KEYS[4])
  ttl = tonumber(ttl)
  set(KEYS[4], token, idle, false)
  redis.call('HSET', KEYS[1], 'writer', token .. ':' .. state[1], 'writer_until', now + ttl)
  redis.call('HDEL', KEYS[1], 'waiting', 'waiting_until', 'waiting_ttl')
  keep(ttl)
  return {state[1], token}
end

local holder = ARGV[3]
local now = millis(redis.call('TIME'))
if ARGV[1] == 'read' then
  local ends = redis.call('ZSCORE', KEYS[2], holder)
  if not ends or tonumber(ends) <= now or redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then
    return 0
  end
  redis.call('ZREM', KEYS[2], holder)
else
  if writer_of(now) ~= ARGV[2] .. ':' .. holder then
    return 0
  end
  redis.call('HDEL', KEYS[1], 'writer', 'writer_until')
end
local handed = hand_over(now)
if handed then
  redis.call(
    'XADD', KEYS[3], 'MAXLEN', '1', '*', 'mode', ARGV[1], 'to', handed[1], 'token', handed[2])
else
  redis.call('XADD', KEYS[3], 'MAXLEN', '1', '*', 'mode', ARGV[1])
end
redis.call('PEXPIRE', KEYS[3], 60000)
return 1
""",
    numkeys=4,
)


class RWKeys(NamedTuple):
    """The keys of one read-write lock as bytes (see the module docstring)."""

    lock: bytes
    readers: bytes
    counter: bytes
    released: bytes


def rw_keys_under(prefix: bytes) -> RWKeys:
    """The keys of a read-write lock whose keys begin with ``prefix`` (a single server's
    ``fencing:{<name>}:``, a Redlock node's ``fencing:redlock:{<name>}:``)."""
    return RWKeys(
        prefix + b"rw", prefix + b"rw:readers", prefix + b"counter", prefix + b"rw:released"
    )


@lru_cache(maxsize=1024)
def rw_keys(name: str) -> RWKeys:
    """The keys of the read-write lock ``name``, built once."""
    return rw_keys_under(key_prefix(name).encode())


def rw_acquire_args(
    name: str, mode: str, holder: str, ttl_ms: int, idle_ms: int, queue_ms: int
) -> tuple[Any, ...]:
    """KEYS and ARGV of ``RW_ACQUIRE``."""
    keys = rw_keys(name)
    return (
        keys.lock,
        keys.readers,
        keys.counter,
        keys.released,
        mode.encode(),
        holder_bytes(holder),
        b"%d" % ttl_ms,
        b"%d" % idle_ms,
        b"%d" % queue_ms,
    )


def rw_renew_args(name: str, mode: str, token: int, holder: str, ttl_ms: int) -> tuple[Any, ...]:
    """KEYS and ARGV of ``RW_RENEW``."""
    keys = rw_keys(name)
    return (
        keys.lock,
        keys.readers,
        mode.encode(),
        b"%d" % token,
        holder_bytes(holder),
        b"%d" % ttl_ms,
    )


def rw_release_args(name: str, mode: str, token: int, holder: str) -> tuple[Any, ...]:
    """KEYS and ARGV of ``RW_RELEASE``."""
    keys = rw_keys(name)
    return (
        keys.lock,
        keys.readers,
        keys.released,
        keys.counter,
        mode.encode(),
        b"%d" % token,
        holder_bytes(holder),
    )


def parse_handed(holder: bytes, reply: Any) -> int | None:
    """``XREAD``'s reply on a read-write lock's release stream (shaped as
    ``parse_released`` says): the token of the write lease the release handed to
    ``holder``, or ``None`` (timed out, or a release that handed ``holder`` nothing)."""
    fields = released_fields(reply)
    if fields is None:
        return None
    to = entry_field(fields, "to")
    if (to.encode("latin-1") if isinstance(to, str) else to) != holder:
        return None
    try:
        return int(entry_field(fields, "token"))
    except (TypeError, ValueError):
        raise issuer_error("redis", ValueError(f"unexpected wake-up {reply!r}")) from None
