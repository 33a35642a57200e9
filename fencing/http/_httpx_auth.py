"""``FenceAuth``: an ``httpx`` auth that sends a held lease's token with every request and
raises ``StaleTokenError`` when the service refuses it, blocking and asyncio alike.

::

    with fence.hold() as token, httpx.Client(auth=FenceAuth(token)) as client:
        client.put(url, json=data)  # StaleTokenError if a newer holder got there first

Imports httpx, the core's errors through ``_check``.
"""

from __future__ import annotations

from collections.abc import Generator

import httpx

from ._check import HEADER, stale_error
from ._client import TokenSource, check_source, token_of


class FenceAuth(httpx.Auth):
    """Adds ``Fencing-Token`` to each request; our 409 problem becomes ``StaleTokenError``.

    ``token``: a token, a hold (its current token is sent) or a function returning one.
    """

    requires_response_body = True  # the 409's body says which token won

    def __init__(self, token: TokenSource, header: str = HEADER) -> None:
        self.token = check_source(token)
        self.header = header

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self.header] = str(token_of(self.token))
        response = yield request
        error = stale_error(
            response.status_code, response.headers.get("content-type"), response.content
        )
        if error is not None:
            raise error
