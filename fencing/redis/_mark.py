"""``RedisMark``: a guard's high-water mark in Redis, raised by an atomic Lua
compare-and-set, shared by every process that can reach the server.

What it promises, as a timeline (``guard`` with a ``RedisMark``)::

    A: check(33) ok ............. [pause] ............. fn(33) runs   <- NOT prevented
    B:              check(34) ok -> fn(34) runs
    A:                                  check(33) again -> StaleTokenError, fn not run

The check-and-raise is one atomic step in Redis, so admissions happen in token order:
once a token is admitted, every later check of a lower token is refused. The guarded
call itself runs in the caller's process, outside Redis: a caller that passed the check
and then paused may still run its call after a newer one started, and admitted calls
may run concurrently. To close that gap the check must happen inside the resource,
atomically with the write (``FileStore``, the SQL guard, or your own Lua script).

On Redis Cluster (a ``redis.cluster.RedisCluster`` client) the mark is one key, so its
script runs on the node serving that key's slot.

Imports the core's errors, its ``Mark`` protocol and ``rejected``, the redis error
translation and the client check.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._base.errors import FenceUnavailable
from .._resource.marks import Mark, rejected
from ._clients import SYNC_CLIENTS, SYNC_KINDS, SyncClient, check_client
from ._errors import redis_errors

#: The compare-and-set. Tokens are compared as canonical decimal strings (length first,
#: then byte by byte), never as Lua numbers: those are doubles, exact only below 2**53.
RAISE_MARK = """
-- fencing guard mark: raise a high-water mark to a token unless the token is below it.
-- KEYS[1] the mark key: absent, or a string holding the mark in decimal
-- ARGV[1] the incoming token in canonical decimal (no sign, no leading zeros)
-- Returns {1, mark}: admitted, the mark is now ARGV[1] (it was lower, equal or absent)
--         {0, mark}: refused, ARGV[1] is below the mark, which is unchanged
-- Errors when the key holds something that is not a decimal mark.
local token = ARGV[1]
local mark = redis.call('GET', KEYS[1])
if mark then
  if not string.match(mark, '^%d+$') then
    return redis.error_reply('fencing: key ' .. KEYS[1] .. ' does not hold a mark')
  end
  if #token ~= #mark then
    if #token < #mark then return {0, mark} end
  elseif token ~= mark then
    for i = 1, #token do
      local a, b = string.byte(token, i), string.byte(mark, i)
      if a ~= b then
        if a < b then return {0, mark} end
        break
      end
    end
  else
    return {1, mark}
  end
end
redis.call('SET', KEYS[1], token)
return {1, token}
"""


def parse_reply(reply: Any, key: str) -> tuple[bool, int]:
    """``(admitted, mark)`` from the script's reply; any other shape is an error."""
    if isinstance(reply, list) and len(reply) == 2 and reply[0] in (0, 1):
        mark = reply[1]
        if isinstance(mark, (bytes, str)) and mark.isdigit():
            return reply[0] == 1, int(mark)
    raise FenceUnavailable(f"redis mark {key!r}: unexpected reply {reply!r}")


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"mark key must be a str, not {type(key).__name__}")
    if not key:
        raise ValueError("mark key must not be empty")
    return key


class RedisMark(Mark):
    """A high-water mark at ``key`` in Redis (``redis.Redis`` or
    ``redis.cluster.RedisCluster``), for guards in any number of processes.

    Check-and-raise is atomic (Lua, sent by EVALSHA and reloaded after a script flush);
    the guarded call is not serialized: see this module's docstring for exactly what
    that means. Redis errors are raised as ``FenceUnavailable`` and admit nothing. The
    mark is as durable as the server's persistence: a Redis that restarts without it
    forgets the mark and admits old tokens again.

    ``claim(token)`` is the same Lua step with nothing run after it: one round trip.
    """

    def __init__(self, client: SyncClient, key: str) -> None:
        check_client(client, SYNC_CLIENTS, SYNC_KINDS)
        self.client = client
        self.key = _check_key(key)
        self._raise = client.register_script(RAISE_MARK)

    def __repr__(self) -> str:
        return f"RedisMark(key={self.key!r})"

    @property
    def current(self) -> int | None:
        with redis_errors(f"redis mark {self.key!r}"):
            value = self.client.get(self.key)
        return None if value is None else int(value)

    @contextmanager
    def admit(self, token: int, resource: str) -> Iterator[None]:
        with redis_errors(f"redis mark {self.key!r}"):
            reply = self._raise(keys=[self.key], args=[str(token)])
        admitted, mark = parse_reply(reply, self.key)
        if not admitted:
            raise rejected(token, mark, resource, "callable", "redis")
        yield
