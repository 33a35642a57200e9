"""Checks of arguments at the public calls: a clear TypeError/ValueError before any I/O.

Imports nothing from the package but the token type.
"""

from __future__ import annotations

import math

from .token import FenceToken

MAX_NAME_LENGTH = 256

#: Tokens are 64-bit signed integers everywhere (Redis ``INCR``, SQL ``BIGINT``).
MAX_TOKEN = 2**63 - 1

#: The longest lease, in seconds (about 3.2 million years). Two bounds meet at Redis:
#: ``SET ... PX ms`` refuses ``now + ms`` above 2**63-1 (ms), so about 9.2e15 s; but the
#: renew script does arithmetic on the ms as a Lua number, and Redis formats a Lua
#: number with 17 significant digits when it passes it to a command, so from 1e17 ms
#: (1e14 s) on, ``PEXPIRE`` receives ``1e+17`` and refuses it. Every ttl up to this one
#: is acquired and renewed on Redis (tests/test_bad_input.py); SQL and memory issuers
#: keep seconds as doubles and have no tighter bound.
MAX_TTL = 10**14 - 1


def check_name(name: object) -> str:
    """A fence name: a non-empty ``str`` of at most 256 characters, without NUL, that
    UTF-8 can encode (no lone surrogates)."""
    if not isinstance(name, str):
        raise TypeError(f"fence name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError("fence name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"fence name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
        )
    if "\x00" in name:
        raise ValueError("fence name must not contain NUL characters")
    try:
        name.encode("utf-8")  # every issuer stores names as UTF-8
    except UnicodeEncodeError as exc:
        raise ValueError(f"fence name {name!r} cannot be encoded as UTF-8: {exc.reason}") from None
    return name


def _check_real(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return number


def check_ttl(ttl: object, what: str = "ttl") -> float:
    """A lease lifetime in seconds: a finite number from one millisecond to ``MAX_TTL``."""
    seconds = _check_real(ttl, what)
    if seconds < 0.001:
        raise ValueError(f"{what} must be at least 0.001 seconds, got {ttl!r}")
    if seconds > MAX_TTL:
        raise ValueError(f"{what} must be at most {MAX_TTL} seconds, got {ttl!r}")
    return seconds


def check_timeout(timeout: object, what: str = "timeout") -> float | None:
    """How long to wait: ``None`` or ``math.inf`` (for ever), or a number of seconds >= 0;
    ``what`` names the argument in the error."""
    if timeout is None or (isinstance(timeout, float) and timeout == math.inf):
        return None
    seconds = _check_real(timeout, what)
    if seconds < 0:
        raise ValueError(f"{what} must not be negative, got {timeout!r}")
    return seconds


def check_token(token: object) -> int:
    """A fence token: a non-negative ``int`` (``FenceToken`` or plain), never a bool."""
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError(f"fence token must be an int, not {type(token).__name__}")
    if token < 0:
        raise ValueError(f"fence token must not be negative, got {token}")
    return int(token)


def check_token_for(token: object, name: str) -> int:
    """A token passed back to the fence ``name``: also refuses another fence's token."""
    if type(token) is FenceToken and token.name == name and token >= 0:
        return int(token)  # the usual case, on every release's path: check_token's checks hold
    value = check_token(token)
    if isinstance(token, FenceToken) and token.name != name:
        raise ValueError(f"token {value} was issued by fence {token.name!r}, not {name!r}")
    return value


def check_mark_token(token: object) -> int:
    """A token for a guard: a non-negative ``int`` (never a bool) of at most 64 bits."""
    value = check_token(token)
    if value > MAX_TOKEN:
        raise ValueError(f"fence token must be at most 2**63-1, got {value}")
    return value


def check_count(count: object, what: str, maximum: int) -> int:
    """A count of permits or admissions: an ``int`` (never a bool) from 1 to ``maximum``."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"{what} must be an int, not {type(count).__name__}")
    if not 1 <= count <= maximum:
        raise ValueError(f"{what} must be from 1 to {maximum}, got {count}")
    return int(count)


def check_period(per: object, what: str = "per") -> float:
    """A rate limit's window in seconds: a finite number from one millisecond to ``MAX_TTL``."""
    return check_ttl(per, what)
