"""The rate limiter's Lua scripts, keys and reply parser (no I/O).

One script per window, one round trip per request, time from the server's ``TIME``
inside the script (invariant 6 of docs/design.md), so clients' clocks never count.
Keys of the limiter ``<name>`` (in the Redis Cluster slot of its fences, see
``key_prefix``)::

    fencing:{<name>}:limit:sliding   list: the server times (µs, as digits) of the last
                                     ``limit`` admissions, newest first, and at most one
                                     older; expires ``per`` to ``2 per`` after the last
    fencing:{<name>}:limit:fixed     string: the count of the current window, which
                                     expires when the window ends

Both scripts reply the server time in µs (an integer) when they admit, and
``{retry_in µs, server time µs}`` when they refuse. Every request pays for what its
script does on the server and for what redis-py reads back, so the scripts keep both
small (docs/performance.md has the measurements): one integer is the cheapest reply to
parse; an argument a script passes on to a command is a string (``ARGV``, ``TIME``'s
digits), since a Lua number passed to ``redis.call`` is formatted on every call; and the
sliding window's expiry is refreshed only when less than ``per`` of it is left, a read
where an unconditional ``PEXPIRE`` would be a write.

Imports the key layout of ``_scripts`` and the core's ``Admission``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .._base.errors import FenceUnavailable
from .._primitives.limiter import Admission, LimitUse
from ._scripts import Script, key_prefix

#: KEYS[1]: the list of admission times (µs digits, newest first). ARGV[1]: limit;
#: ARGV[2]: per (µs). Logs this request, then, if the log holds more than ``limit``,
#: reads the ``limit``-th admission before it: younger than ``per``, the request is
#: refused (its entry taken back) with the wait until that one turns ``per`` old; else
#: admitted, and the log keeps ``limit`` + 1 entries (the last one ``per`` old or older).
#: The key lives at least ``per`` past every admission: set to ``2 per`` when less than
#: ``per`` is left, so that a busy name's refresh is one ``PTTL`` read.
SLIDING = Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local per = tonumber(ARGV[2])
if redis.call('LPUSH', KEYS[1], t[1] .. string.sub('00000' .. t[2], -6)) > tonumber(ARGV[1]) then
  local wait = tonumber(redis.call('LINDEX', KEYS[1], ARGV[1])) + per - now
  if wait > 0 then
    redis.call('LPOP', KEYS[1])
    return {wait, now}
  end
  redis.call('LTRIM', KEYS[1], 0, ARGV[1])
end
if redis.call('PTTL', KEYS[1]) * 1000 < per then
  redis.call('PEXPIRE', KEYS[1], math.ceil(per / 500))
end
return now
""",
    1,
)

#: KEYS[1]: the count of the current fixed window. ARGV[1]: limit; ARGV[2]: per (ms).
#: A window starts at the first admission after the last one ended (the count's key
#: does not exist) and ends when its key expires: ``per`` later, rounded up to the
#: server's next whole millisecond (Redis keeps expiries in ms). It admits ``limit``,
#: then refuses (the count taken back) with the wait until the key expires.
FIXED = Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local count = redis.call('INCR', KEYS[1])
if count <= tonumber(ARGV[1]) then
  if count == 1 then
    redis.call('PEXPIREAT', KEYS[1], math.ceil(now / 1000) + tonumber(ARGV[2]) - 1)
  end
  return now
end
redis.call('DECR', KEYS[1])
return {(math.floor(now / 1000) + redis.call('PTTL', KEYS[1]) + 1) * 1000 - now, now}
""",
    1,
)


#: KEYS[1]: the limiter's key. ARGV[1]: per (µs); ARGV[2]: its window. Reads only:
#: replies ``{used, µs until used goes down (-1: nothing counts), server time µs}``.
#: Sliding: the log is in admission order, so the admissions that count are a prefix,
#: found by bisection (a busy log holds ``limit`` entries).
USE = Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local per = tonumber(ARGV[1])
if ARGV[2] == 'sliding' then
  local low, high = 0, redis.call('LLEN', KEYS[1])
  while low < high do
    local middle = math.floor((low + high) / 2)
    if tonumber(redis.call('LINDEX', KEYS[1], middle)) > now - per then
      low = middle + 1
    else
      high = middle
    end
  end
  if low == 0 then
    return {0, -1, now}
  end
  return {low, tonumber(redis.call('LINDEX', KEYS[1], low - 1)) + per - now, now}
end
local count = tonumber(redis.call('GET', KEYS[1]))
if not count then
  return {0, -1, now}
end
return {count, (math.floor(now / 1000) + redis.call('PTTL', KEYS[1]) + 1) * 1000 - now, now}
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
    """The script and arguments of one request of the limiter ``name`` (``per`` in µs for
    the sliding window, in ms for the fixed one, whose window is a key's expiry)."""
    key = f"{key_prefix(name)}limit:{window}".encode()
    if window == "sliding":
        return SLIDING, (key, b"%d" % limit, b"%d" % (per_ms * 1000))
    return FIXED, (key, b"%d" % limit, b"%d" % per_ms)


def parse_admission(reply: Any) -> Admission:
    """The server time (µs) of an admission, or ``{retry_in µs, now µs}`` of a refusal,
    as an ``Admission`` (seconds); anything else is ``FenceUnavailable``.

    On the path of every request: redis-py gives ints, taken as they come.
    """
    if type(reply) is int:
        return Admission(True, 0.0, reply / 1e6)
    if type(reply) is list and len(reply) == 2:
        retry, now = reply
        if type(retry) is int and type(now) is int:
            return Admission(False, max(retry, 0) / 1e6, now / 1e6)
    raise FenceUnavailable(f"unexpected reply from the limiter script: {reply!r}")


def admitted(reply: Any) -> bool:
    """Whether ``reply`` admitted, checked as ``parse_admission`` checks it, without
    building the ``Admission`` (``try_acquire``'s path)."""
    return type(reply) is int or parse_admission(reply).admitted
