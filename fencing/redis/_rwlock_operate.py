"""The operators' scripts of Redis read-write locks: ``fencing status --rwlock`` and
``fencing release --rwlock --force`` (``fencing.issuer.OperatesReadWrites``), on the keys
of ``_rwlock_scripts`` (its docstring describes them).

Imports the Redis scripts' shared Lua, ``Script``, the read-write keys and the issuer
protocols (no redis-py).
"""

from __future__ import annotations

from typing import Any

from .._base.errors import FenceUnavailable, issuer_error
from ..issuer import READ, WRITE, RWStatus
from ._rwlock_scripts import rw_keys
from ._scripts import _LUA_TOKENS, Script, parse_lease_value

#: Lua shared by both scripts (after ``_LUA_TOKENS``, whose ``millis`` it uses).
_LUA_INSPECT = """
-- The lock's live leases, read in one step: {writer "<token>:<holder>" or false, its
-- ms left, epoch or false, {reader holder id, its ms left, ...}, the waiting writer's
-- holder id or false, the counter or false}. Ended entries count as absent.
local function inspect()
  local now = millis(redis.call('TIME'))
  local state = redis.call(
    'HMGET', KEYS[1], 'writer', 'writer_until', 'epoch', 'waiting', 'waiting_until')
  local writer, writer_left = false, 0
  if state[1] and tonumber(state[2]) > now then
    writer, writer_left = state[1], tonumber(state[2]) - now
  end
  local readers = {}
  local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #live, 2 do
    readers[#readers + 1] = live[i]
    readers[#readers + 1] = tonumber(live[i + 1]) - now
  end
  local waiting = false
  if state[4] and tonumber(state[5]) > now then
    waiting = state[4]
  end
  return {writer, writer_left, state[3] or false, readers, waiting,
          redis.call('GET', KEYS[3]) or false}
end
"""

RW_STATUS = Script(
    """
-- fencing rw status: a read-write lock's leases, marker and counter (changes nothing).
-- KEYS[1] the lock's hash, KEYS[2] its readers (sorted set), KEYS[3] the fence's counter
-- Returns inspect()'s reply.
"""
    + _LUA_TOKENS
    + _LUA_INSPECT
    + """
return inspect()
""",
    numkeys=3,
)

RW_FORCE_RELEASE = Script(
    """
-- fencing rw force release: end every lease of a read-write lock whoever holds it, in
-- one step, make sure the next token is above theirs, and wake the waiters.
-- KEYS[1] the lock's hash, KEYS[2] its readers (sorted set), KEYS[3] the fence's
-- counter, KEYS[4] its release stream
-- ARGV[1] counter idle lifetime in ms; "0" = the counter never expires
-- Returns inspect()'s reply, read before the leases ended. The counter is raised to the
-- ended leases' token if it was below (or gone), whatever the server's clock says; a
-- waiting writer's marker stays, so that writer goes in next.
"""
    + _LUA_TOKENS
    + _LUA_INSPECT
    + """
local state = inspect()
local token = state[1] and string.match(state[1], '^(%d+):')
if not token and #state[4] > 0 then
  token = state[3]
end
if not token then
  return state
end
local last = state[6]
if not last or #last < #token or (#last == #token and last < token) then
  set(KEYS[3], token, ARGV[1], false)
end
redis.call('HDEL', KEYS[1], 'writer', 'writer_until')
redis.call('DEL', KEYS[2])
redis.call('XADD', KEYS[4], 'MAXLEN', '1', '*', 'mode', 'force')
redis.call('PEXPIRE', KEYS[4], 60000)
return state
""",
    numkeys=4,
)


def rw_status_args(name: str) -> tuple[Any, ...]:
    """KEYS of ``RW_STATUS``."""
    keys = rw_keys(name)
    return keys.lock, keys.readers, keys.counter


def rw_force_release_args(name: str, idle_ms: int) -> tuple[Any, ...]:
    """KEYS and ARGV of ``RW_FORCE_RELEASE``."""
    keys = rw_keys(name)
    return keys.lock, keys.readers, keys.counter, keys.released, b"%d" % idle_ms


def parse_rw_status(name: str, reply: Any) -> RWStatus:
    """``inspect()``'s reply (either script's) as an ``RWStatus``."""
    try:
        writer, writer_left, epoch, readers, waiting, counter = reply
        last = None if counter is None else int(counter)
        waiter = None if waiting is None else waiting.decode("latin-1")
        if writer is not None:
            token, holder = parse_lease_value(writer)
            last = token if last is None else max(last, token)
            return RWStatus(name, True, WRITE, token, {holder: writer_left / 1000}, waiter, last)
        if readers:
            token = int(epoch)
            pairs = zip(readers[::2], readers[1::2], strict=True)
            left = {holder.decode("latin-1"): ms / 1000 for holder, ms in pairs}
            last = token if last is None else max(last, token)
            return RWStatus(name, True, READ, token, left, waiter, last)
    except (TypeError, ValueError, AttributeError):
        raise _unexpected(reply) from None
    return RWStatus(name, False, waiting=waiter, last_token=last)


def _unexpected(reply: Any) -> FenceUnavailable:
    return issuer_error("redis", ValueError(f"unexpected reply {reply!r} from rw status script"))
