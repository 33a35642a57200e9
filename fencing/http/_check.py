"""The fence check of an HTTP request, without any HTTP library: read the token from its
header, claim the resource's mark with it, and describe a refusal as an RFC 9457 problem.

Shared by the ASGI and WSGI middlewares, the FastAPI dependency and the clients (which
recognise our problem bodies), so every entry point answers the same statuses and bodies:

======  ============================  ==============================================
status  when                          problem ``type``
======  ============================  ==============================================
428     no token header               ``urn:fencing:problem:missing-token``
400     empty, signed, not decimal,   ``urn:fencing:problem:bad-token``
        longer than 19 digits, or
        above 2**63-1
409     token below the mark          ``urn:fencing:problem:stale-token``
                                      (``token`` refused, ``current`` mark)
503     the mark could not be read    ``urn:fencing:problem:mark-unavailable``
======  ============================  ==============================================

Imports the core's errors, marks and validation only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._base.errors import FenceUnavailable, StaleTokenError
from .._base.validate import MAX_TOKEN
from .._resource.marks import Mark, MemoryMark

#: The request header that carries the fence token (``Fencing-Token: 42``).
HEADER = "Fencing-Token"
#: The media type of a refusal's body (RFC 9457).
PROBLEM_JSON = "application/problem+json"
_PROBLEM = "urn:fencing:problem:"
STALE = _PROBLEM + "stale-token"
MISSING = _PROBLEM + "missing-token"
BAD = _PROBLEM + "bad-token"
UNAVAILABLE = _PROBLEM + "mark-unavailable"
_DIGITS = len(str(MAX_TOKEN))
#: How many resources' mark objects a ``Gate`` keeps (least recently used go first).
MARKS_KEPT = 4096


@dataclass(frozen=True)
class Problem:
    """A refused request: its status and RFC 9457 problem details (``extra`` members too)."""

    status: int
    type: str
    title: str
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)

    def body(self) -> bytes:
        """The ``application/problem+json`` body."""
        members = {"type": self.type, "title": self.title, "status": self.status}
        members.update(detail=self.detail, **self.extra)
        return json.dumps(members).encode()

    def headers(self) -> list[tuple[str, str]]:
        """Content type and length of ``body()``."""
        return [("content-type", PROBLEM_JSON), ("content-length", str(len(self.body())))]


def read_token(value: str | None, header: str = HEADER) -> int | Problem:
    """The token in a header ``value`` (``None``: the header is missing), or the problem.

    Only plain decimal digits are a token: no sign, no spaces inside, no ``_``, at most
    19 digits and at most 2**63-1 (what every mark stores).
    """
    if value is None:
        return Problem(
            428,
            MISSING,
            "Fence token required",
            f"this resource is fenced: send the lease's token in the {header} header",
            {"header": header},
        )
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > _DIGITS or int(text) > MAX_TOKEN:
        return Problem(
            400,
            BAD,
            "Bad fence token",
            f"the {header} header must be a decimal integer from 0 to {MAX_TOKEN}, "
            f"got {value[:40]!r}",
            {"header": header},
        )
    return int(text)


def claim(mark: Mark, token: int, resource: str) -> Problem | None:
    """Claim ``mark`` for ``token`` (every older token refused from now on); the problem
    if it is stale (409) or the mark is unavailable (503), ``None`` if it may go on."""
    try:
        mark.claim(token, resource)
    except StaleTokenError as exc:
        return Problem(
            409,
            STALE,
            "Stale fence token",
            str(exc),
            {"token": exc.token, "current": exc.current, "resource": resource},
        )
    except FenceUnavailable as exc:
        return Problem(
            503,
            UNAVAILABLE,
            "Fence mark unavailable",
            f"the mark of {resource} could not be checked, nothing was applied: {exc}",
            {"resource": resource},
        )
    return None


def stale_error(status: int, content_type: str | None, body: bytes) -> StaleTokenError | None:
    """The ``StaleTokenError`` a client raises for our 409 problem, else ``None``."""
    if status != 409 or not (content_type or "").startswith(PROBLEM_JSON):
        return None
    try:
        problem = json.loads(body)
    except ValueError:
        return None
    if not isinstance(problem, dict) or problem.get("type") != STALE:
        return None
    token, current = problem.get("token"), problem.get("current")
    if not isinstance(token, int) or not (current is None or isinstance(current, int)):
        return None
    return StaleTokenError(token, current, str(problem.get("resource", "")))


#: A service's marks: one ``Mark`` for every fenced resource, or a function from a
#: resource key to its mark (for example ``lambda key: RedisMark(r, f"mark:{key}")``).
Marks = Mark | Callable[[str], Mark]


class Gate:
    """The check one fenced service applies to a request for the resource ``key``.

    ``marks`` gives each resource's mark (a function is called once per resource key,
    its mark kept for the next requests); ``header`` names the token header.
    ``threaded`` says whether an asyncio server runs a check in a thread: by default
    (``None``) every check but that of a ``MemoryMark`` given as the one mark, since the
    others wait on I/O; ``False`` runs a Redis mark's round trip on the event loop
    (faster for one request, but the loop waits for Redis).
    """

    def __init__(self, marks: Marks, header: str = HEADER, threaded: bool | None = None) -> None:
        if not isinstance(header, str) or not header or not header.isascii():
            raise ValueError(f"header must be a non-empty ASCII str, got {header!r}")
        if isinstance(marks, Mark):
            one = marks
            self._mark: Callable[[str], Mark] = lambda key: one
        elif callable(marks):
            # A mark object per resource key, kept: making one can cost (a RedisMark
            # hashes its script), and the function may make a new one on every call.
            self._mark = functools.lru_cache(maxsize=MARKS_KEPT)(marks)
        else:
            raise TypeError(f"marks must be a Mark or a function of a resource key, not {marks!r}")
        self.header = header
        self.threaded = not isinstance(marks, MemoryMark) if threaded is None else threaded

    def check(self, key: str, value: str | None) -> int | Problem:
        """The token of a request for ``key`` whose header holds ``value`` (``None``: no
        header), its mark claimed with it; or the problem to answer instead."""
        token = read_token(value, self.header)
        if isinstance(token, Problem):
            return token
        problem = claim(self._mark(key), token, key)
        return token if problem is None else problem
