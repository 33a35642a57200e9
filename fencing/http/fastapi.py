"""FastAPI: a dependency that gives a route its request's fence token, checked and claimed.

::

    app = FastAPI()
    fencing.http.fastapi.install(app)  # answers refusals with problem bodies
    item_token = fence_token(lambda request: f"item:{request.path_params['item']}", marks)

    @app.put("/items/{item}")
    async def put_item(item: str, token: int = Depends(item_token)) -> ...: ...

The same check, statuses and bodies as the middlewares (see ``_check``), for the routes
that ask for it. Imports FastAPI (Starlette) and the core's marks through ``_check``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ._check import HEADER, Gate, Marks, Problem


class FenceRefused(Exception):
    """Raised by a ``fence_token`` dependency; ``install`` turns it into the problem's
    response."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail)
        self.problem = problem


def fence_token(
    resource: Callable[[Request], str],
    marks: Marks,
    header: str = HEADER,
    threaded: bool | None = None,
) -> Callable[[Request], Awaitable[int]]:
    """A dependency: the request's token, after claiming the mark of ``resource(request)``.

    A check that waits on I/O (every mark but a ``MemoryMark``) runs in Starlette's
    thread pool, unless ``threaded=False`` (see ``Gate``).
    """
    gate = Gate(marks, header, threaded)

    async def dependency(request: Request) -> int:
        key, value = resource(request), request.headers.get(gate.header)
        if gate.threaded:
            outcome = await run_in_threadpool(gate.check, key, value)
        else:
            outcome = gate.check(key, value)
        if isinstance(outcome, Problem):
            raise FenceRefused(outcome)
        return outcome

    return dependency


def install(app: FastAPI) -> None:
    """Make ``app`` answer a refused token with its RFC 9457 problem response."""
    app.add_exception_handler(FenceRefused, _respond)  # type: ignore[arg-type]


async def _respond(request: Request, refused: FenceRefused) -> Response:
    problem = refused.problem
    return Response(problem.body(), problem.status, headers=dict(problem.headers()))
