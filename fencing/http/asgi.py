"""``FenceMiddleware``: an ASGI middleware (Starlette, FastAPI, any ASGI app) that lets a
request change a fenced resource only with a fence token no older than the newest it saw.

``app = FenceMiddleware(app, resource=..., marks=...)``: ``resource(method, path)`` names
the resource a request targets (``None``: not fenced, passed through untouched);
``marks`` gives that resource's mark (``fencing.http._check.Gate``). A fenced request
must carry ``Fencing-Token: <token>``; the middleware claims the resource's mark with it
before the application sees the request, so from then on every older token is refused
(409), and hands the token to the application in ``scope["state"]["fence_token"]``
(``request.state.fence_token`` in Starlette). Refusals are RFC 9457 problem bodies:
see ``_check``. A check that waits on I/O (a Redis, file or SQL mark) runs in a thread
(``asyncio.to_thread``), so the event loop never blocks on it (``threaded=False``: on
the loop; see ``Gate``).

Imports the core's marks through ``_check``; no web framework.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._check import HEADER, Gate, Marks, Problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: ``resource(method, path)``: the key of the resource a request targets, ``None`` if it
#: is not fenced.
Resource = Callable[[str, str], "str | None"]


class FenceMiddleware:
    """Refuse requests to fenced resources without a current fence token (see module)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        resource: Resource,
        marks: Marks,
        header: str = HEADER,
        threaded: bool | None = None,
    ) -> None:
        if not callable(resource):
            raise TypeError(f"resource must be a function of (method, path), not {resource!r}")
        self.app = app
        self.resource = resource
        self.gate = Gate(marks, header, threaded)
        self._header = header.lower().encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = self.resource(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if key is None:
            await self.app(scope, receive, send)
            return
        value = next((v.decode("latin-1") for k, v in scope["headers"] if k == self._header), None)
        if self.gate.threaded:
            outcome = await asyncio.to_thread(self.gate.check, key, value)
        else:
            outcome = self.gate.check(key, value)
        if isinstance(outcome, Problem):
            await _answer(send, outcome)
            return
        state = dict(scope.get("state") or {}, fence_token=outcome)
        await self.app({**scope, "state": state}, receive, send)


async def _answer(send: Send, problem: Problem) -> None:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in problem.headers()]
    await send({"type": "http.response.start", "status": problem.status, "headers": headers})
    await send({"type": "http.response.body", "body": problem.body()})
