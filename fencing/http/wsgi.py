"""``WSGIFenceMiddleware``: the WSGI twin of ``fencing.http.asgi.FenceMiddleware`` (Flask,
Django, any WSGI app): the same check, statuses and problem bodies (see ``_check``).

The token of an admitted request is in ``environ["fencing.token"]``.

Imports the core's marks through ``_check``; no web framework.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from ._check import HEADER, Gate, Marks, Problem

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
#: ``resource(method, path)``: the key of the resource a request targets, ``None`` if it
#: is not fenced.
Resource = Callable[[str, str], "str | None"]
#: Where an admitted request's token is found in the WSGI environ.
ENVIRON_KEY = "fencing.token"


class WSGIFenceMiddleware:
    """Refuse requests to fenced resources without a current fence token."""

    def __init__(
        self, app: WSGIApp, *, resource: Resource, marks: Marks, header: str = HEADER
    ) -> None:
        if not callable(resource):
            raise TypeError(f"resource must be a function of (method, path), not {resource!r}")
        self.app = app
        self.resource = resource
        self.gate = Gate(marks, header)
        self._environ_header = "HTTP_" + header.upper().replace("-", "_")

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        key = self.resource(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""))
        if key is None:
            return self.app(environ, start_response)
        outcome = self.gate.check(key, environ.get(self._environ_header))
        if isinstance(outcome, Problem):
            status = f"{outcome.status} {HTTPStatus(outcome.status).phrase}"
            start_response(status, outcome.headers())
            return [outcome.body()]
        environ[ENVIRON_KEY] = outcome
        return self.app(environ, start_response)
