"""``RequestsFenceAuth``: ``FenceAuth`` for ``requests`` (an auth plus a response hook).

::

    session.auth = RequestsFenceAuth(token)
    session.put(url, json=data)  # StaleTokenError if a newer holder got there first

Imports requests, the core's errors through ``_check``.
"""

from __future__ import annotations

from typing import Any

import requests
import requests.auth

from ._check import HEADER, stale_error
from ._client import TokenSource, check_source, token_of


class RequestsFenceAuth(requests.auth.AuthBase):
    """Adds ``Fencing-Token`` to each request; our 409 problem becomes ``StaleTokenError``."""

    def __init__(self, token: TokenSource, header: str = HEADER) -> None:
        self.token = check_source(token)
        self.header = header

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers[self.header] = str(token_of(self.token))
        request.hooks["response"].append(_raise_if_stale)
        return request


def _raise_if_stale(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    error = stale_error(
        response.status_code, response.headers.get("content-type"), response.content
    )
    if error is not None:
        raise error
