"""The rate limiter's Lua scripts, keys and reply parser (no I/O).

One script per window, one round trip per request, time from the server's ``TIME``
inside the script (invariant 6 of docs/design.md), so clients' clocks never count.
Keys of the limiter ``<name>`` (in the Redis Cluster slot of its fences, see
``key_prefix``)::

    fencing:{<name>}:limit:sliding   sorted set: one member per admission, scored by its
                                     server time in µs; expires ``per`` after the last
    fencing:{<name>}:limit:fixed     hash: ``start`` (µs, the window's first admission)
                                     and ``count``; expires ``per`` after ``start``

Both scripts reply ``{admitted (1/0), retry_in µs, server time µs}``.

Imports the key layout of ``_scripts`` and the core's ``Admission``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .._errors import FenceUnavailable
from .._limiter import Admission, LimitUse
from ._scripts import Script, key_prefix

#: KEYS[1]: the sorted set of admission times (µs). ARGV[1]: limit; ARGV[2]: per (µs).
#: Drops the admissions ``per`` old or older; admits if fewer than ``limit`` remain,
#: else replies when the oldest of the last ``limit`` turns ``per`` old.
SLIDING = Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - per))
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  local member = string.format('%d', now)
  local seq = 0
  while redis.call('ZADD', KEYS[1], 'NX', now, member) == 0 do  -- two admissions in one µs
    seq = seq + 1
    member = string.format('%d:%d', now, seq)
  end
  redis.call('PEXPIRE', KEYS[1], math.ceil(per / 1000) + 1)
  return {1, 0, now}
end
local oldest = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
return {0, tonumber(oldest[2]) + per - now, now}
""",
    1,
)

#: KEYS[1]: the hash of the current fixed window. ARGV[1]: limit; ARGV[2]: per (µs).
#: A window starts at the first admission after the last one ended and lasts ``per``
#: by the server's clock; it admits ``limit``, then replies when it ends.
FIXED = Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local window = redis.call('HMGET', KEYS[1], 'start', 'count')
local start = tonumber(window[1])
local count = tonumber(window[2]) or 0
if not start or now >= start + per then
  redis.call('HSET', KEYS[1], 'start', string.format('%d', now), 'count', 1)
  redis.call('PEXPIRE', KEYS[1], math.ceil(per / 1000) + 1)
  return {1, 0, now}
end
if count < limit then
  redis.call('HINCRBY', KEYS[1], 'count', 1)
  return {1, 0, now}
end
return {0, start + per - now, now}
""",
    1,
)


#: KEYS[1]: the limiter's key. ARGV[1]: per (µs); ARGV[2]: its window. Reads only:
#: replies ``{used, µs until used goes down (-1: nothing counts), server time µs}``.
USE = Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local per = tonumber(ARGV[1])
if ARGV[2] == 'sliding' then
  local after = string.format('(%d', now - per)
  local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #oldest == 0 then
    return {0, -1, now}
  end
  return {redis.call('ZCOUNT', KEYS[1], after, '+inf'), tonumber(oldest[2]) + per - now, now}
end
local window = redis.call('HMGET', KEYS[1], 'start', 'count')
local start = tonumber(window[1])
if not start or now >= start + per then
  return {0, -1, now}
end
return {tonumber(window[2]) or 0, start + per - now, now}
""",
    1,
)


def use_call(name: str, per_ms: int, window: str) -> tuple[Script, tuple[Any, ...]]:
    """The script and arguments that read the use of the limiter ``name``."""
    key = f"{key_prefix(name)}limit:{window}".encode()
    return USE, (key, b"%d" % (per_ms * 1000), window.encode())


def parse_use(reply: Any) -> LimitUse:
    """``{used, resets_in µs or -1, now µs}`` as a ``LimitUse`` (seconds)."""
    try:
        used, resets, now = (int(part) for part in reply)
    except (TypeError, ValueError):
        raise FenceUnavailable(f"unexpected reply from the limiter script: {reply!r}") from None
    return LimitUse(used, None if resets < 0 else resets / 1e6, now / 1e6)


@lru_cache(maxsize=1024)
def limit_call(name: str, limit: int, per_ms: int, window: str) -> tuple[Script, tuple[Any, ...]]:
    """The script and arguments of one request of the limiter ``name``."""
    script = SLIDING if window == "sliding" else FIXED
    key = f"{key_prefix(name)}limit:{window}".encode()
    return script, (key, b"%d" % limit, b"%d" % (per_ms * 1000))


def parse_admission(reply: Any) -> Admission:
    """``{admitted, retry_in µs, now µs}`` as an ``Admission`` (seconds).

    On the path of every request: unpacked and compared as they come (redis-py gives
    ints), no conversion pass; anything else is ``FenceUnavailable``.
    """
    try:
        admitted, retry, now = reply
        at = now / 1e6
        if admitted == 1:
            return Admission(True, 0.0, at)
        if admitted == 0:
            return Admission(False, max(retry, 0) / 1e6, at)
    except (TypeError, ValueError):
        pass
    raise FenceUnavailable(f"unexpected reply from the limiter script: {reply!r}")
