"""The Redis issuer's Lua scripts, key layout, argument builders and reply parsers.

Everything here is pure (no I/O) and shared by the sync and asyncio issuers and by
``FencedLock``, so a ``RedisFence``, an ``AsyncRedisFence`` and a ``FencedLock`` on the
same name use the same keys, exclude each other and share one token counter.

Key layout of the fence ``<name>`` (one hash tag, so all keys of a fence live in one
Redis Cluster slot)::

    fencing:{<name>}:lease    "<token>:<holder>" while held, with the lease's PX expiry
    fencing:{<name>}:counter  the last token issued; expires after a long idle period
    fencing:{<name>}:signal   a one-element list pushed on release; waiters BLPOP it
    fencing:{<name>}:waiters  "1" while someone may wait: set by every busy acquire
                              attempt, it lives ``WAITER_TTL_MS``; only while it exists
                              does a release push the signal

An uncontended release therefore writes nothing but the lease's DEL. A waiter marks
itself in the same atomic step that finds the lease busy, so a release after that
attempt always signals: a wake-up is never lost to the gap between the attempt and the
BLPOP. The marker is not cleared by a release, so a second waiter still blocked is woken
by the next release too; it expires on its own once nobody has found the lease busy
for ``WAITER_TTL_MS``.

Keys and fixed arguments go to redis-py as bytes, built once (``fence_keys`` is an LRU
cache), so it does not encode them again on every call.

Imports the error, protocol and core modules only (no redis-py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from ._core import issuer_error
from ._errors import FenceUnavailable
from ._protocol import Busy

#: How long an unconsumed release signal lives. A waiter re-polls at least every second
#: (``WaitSchedule.MAX_BLOCK``), so an older signal would wake nobody who needs it.
SIGNAL_TTL_MS = 1000

#: How long the waiters marker outlives the last busy attempt. A waiter blocks at most
#: ``WaitSchedule.MAX_BLOCK`` (1 s) before its next attempt re-marks, so 2 s covers a
#: block plus a slow client; a marker that expires under a waiter only delays it (its
#: block ends within a second anyway).
WAITER_TTL_MS = 2000

#: Default idle lifetime of a counter key: a week. A lost counter is harmless (tokens
#: restart from the server clock), so one-off names need not stay in Redis for ever.
DEFAULT_COUNTER_IDLE = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Script:
    """A Lua script with its SHA1, which is what we send (EVALSHA) on the hot path.

    ``numkeys_arg`` is ``numkeys`` as the bytes redis-py would send, made once.
    """

    text: str
    numkeys: int
    sha: str = field(init=False)
    numkeys_arg: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.text.encode()).hexdigest())
        object.__setattr__(self, "numkeys_arg", b"%d" % self.numkeys)


ACQUIRE = Script(
    """
-- fencing acquire: take a fence's lease and issue its next token, in one step.
-- KEYS[1] lease key, KEYS[2] counter key, KEYS[3] waiters marker key
-- ARGV[1] holder id (unique per acquisition)
-- ARGV[2] lease ttl in ms; "0" = the lease never expires
-- ARGV[3] counter idle lifetime in ms; "0" = the counter never expires
-- Returns the new token (an integer > 0) when the lease was free, or {pttl} when it
-- is held: pttl = its remaining ms, or -1 when it has no expiry. When held, the
-- waiters marker is (re)set for WAITER_TTL_MS so that the release signals.
-- token = max(counter + 1, server clock in microseconds): a lost or stale counter
-- restarts above every earlier token unless the server clock stepped back further
-- than the time that passed.
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('GET', KEYS[2]))
if last and last >= token then
  token = last + 1
end
local digits = string.format('%d', token)
local value = digits .. ':' .. ARGV[1]
local taken
if ARGV[2] == '0' then
  taken = redis.call('SET', KEYS[1], value, 'NX')
else
  taken = redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
end
if not taken then
  redis.call('SET', KEYS[3], '1', 'PX', 'WAITER_TTL_MS')
  return {redis.call('PTTL', KEYS[1])}
end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[2], digits)
else
  redis.call('SET', KEYS[2], digits, 'PX', ARGV[3])
end
return token
""".replace("'WAITER_TTL_MS'", str(WAITER_TTL_MS)),
    numkeys=3,
)

RENEW = Script(
    """
-- fencing renew: extend a lease, only for the exact lease named.
-- KEYS[1] lease key
-- ARGV[1] the lease value expected: "<token>:<holder>"
-- ARGV[2] ms
-- ARGV[3] "0": the lease expires ARGV[2] ms from now; "1": ARGV[2] ms are added to
--         what is left (redis-py Lock.extend)
-- Returns 1 when renewed; 0 when the lease is not held with that value (or, adding,
-- when it has no expiry), and then nothing is changed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
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

RELEASE = Script(
    """
-- fencing release: end a lease, only for the exact lease named; wake one waiter if any.
-- KEYS[1] lease key, KEYS[2] signal key, KEYS[3] waiters marker key
-- ARGV[1] the lease value expected: "<token>:<holder>"
-- Returns 1 when released; 0 when the lease is not held with that value, and then
-- nothing is changed. Only while the waiters marker exists (someone found the lease
-- busy in the last WAITER_TTL_MS) does the signal list get one element for a waiter's
-- BLPOP, replacing any older one and living SIGNAL_TTL_MS; the marker is left to
-- expire, so a second waiter is woken by the next release.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('RPUSH', KEYS[2], '1')
redis.call('PEXPIRE', KEYS[2], 'SIGNAL_TTL_MS')
return 1
""".replace("'SIGNAL_TTL_MS'", str(SIGNAL_TTL_MS)),
    numkeys=3,
)


# -- keys and arguments ------------------------------------------------------------------


def key_prefix(name: str) -> str:
    """``fencing:{<name>}:``: every key of the fence ``name`` starts with it."""
    return f"fencing:{{{name}}}:"


def lease_key(name: str) -> str:
    return key_prefix(name) + "lease"


def signal_key(name: str) -> str:
    return key_prefix(name) + "signal"


class FenceKeys(NamedTuple):
    """The keys of one fence as bytes, ready for redis-py (no encoding per call)."""

    lease: bytes
    counter: bytes
    signal: bytes
    waiters: bytes


@lru_cache(maxsize=1024)
def fence_keys(name: str) -> FenceKeys:
    """The keys of ``name``, built once; bounded, since names may be unbounded."""
    prefix = key_prefix(name).encode()
    return FenceKeys(
        prefix + b"lease", prefix + b"counter", prefix + b"signal", prefix + b"waiters"
    )


def lease_value(token: int, holder: str) -> str:
    """What the lease key holds while ``holder`` has the lease with ``token``."""
    return f"{token}:{holder}"


def acquire_args(name: str, holder: str | bytes, ttl_ms: int, idle_ms: int) -> tuple[Any, ...]:
    """KEYS and ARGV of ``ACQUIRE``; ``ttl_ms``/``idle_ms`` 0 mean "no expiry"."""
    keys = fence_keys(name)
    return (keys.lease, keys.counter, keys.waiters, holder, b"%d" % ttl_ms, b"%d" % idle_ms)


def renew_args(name: str, value: str | bytes, ttl_ms: int, add: bool = False) -> tuple[Any, ...]:
    """KEYS and ARGV of ``RENEW`` for the lease holding ``value``."""
    return (fence_keys(name).lease, value, b"%d" % ttl_ms, b"1" if add else b"0")


def release_args(name: str, value: str | bytes) -> tuple[Any, ...]:
    """KEYS and ARGV of ``RELEASE`` for the lease holding ``value``."""
    keys = fence_keys(name)
    return (keys.lease, keys.signal, keys.waiters, value)


def idle_millis(counter_idle: float | None) -> int:
    """``counter_idle`` seconds as the script's ms argument (0 = never expires)."""
    return 0 if counter_idle is None else max(1, round(counter_idle * 1000))


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


def parse_flag(reply: Any, script: str) -> bool:
    """``RENEW``/``RELEASE``'s reply: 1 done, 0 not held; anything else is an error."""
    if reply == 1:
        return True
    if reply == 0:
        return False
    raise _unexpected(script, reply)


def _unexpected(script: str, reply: Any) -> FenceUnavailable:
    return issuer_error("redis", ValueError(f"unexpected reply {reply!r} from {script} script"))
