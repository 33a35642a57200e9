"""Fence tokens over HTTP: services that refuse stale tokens, clients that send them.

Server side (no web framework needed): ``FenceMiddleware`` (ASGI: Starlette, FastAPI),
``WSGIFenceMiddleware`` (WSGI: Flask, Django) and, for FastAPI routes,
``fencing.http.fastapi.fence_token`` (a dependency). A request to a fenced resource
carries ``Fencing-Token: <token>``; its mark (memory, file, Redis, or any ``Mark``) is
claimed with that token before the application runs, so every older token is refused
from then on: 409 with an RFC 9457 problem body naming the refused and the current
token; 428 without the header; 400 for a malformed one; 503 if the mark is down (see
``_check`` for the table).

Client side: ``FenceAuth`` (httpx, blocking and asyncio) and ``RequestsFenceAuth``
(requests) send a held lease's token with every request and raise ``StaleTokenError``
when the service refuses it, so a holder that paused past its lease learns it at its
next call.

Imports the core only; httpx, requests and FastAPI load with the names that need them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base.lazy import lazy_names
from ._check import HEADER, PROBLEM_JSON, Gate, Problem
from .asgi import FenceMiddleware
from .wsgi import WSGIFenceMiddleware

if TYPE_CHECKING:
    from ._httpx_auth import FenceAuth
    from ._requests_auth import RequestsFenceAuth

_LAZY = {
    "FenceAuth": "fencing.http._httpx_auth",
    "RequestsFenceAuth": "fencing.http._requests_auth",
}

__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "HEADER",
    "PROBLEM_JSON",
    "FenceAuth",
    "FenceMiddleware",
    "Gate",
    "Problem",
    "RequestsFenceAuth",
    "WSGIFenceMiddleware",
]
