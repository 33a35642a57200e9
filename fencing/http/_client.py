"""What the HTTP clients share: where the token of a request comes from.

Imports the core's validation only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .._base.validate import check_mark_token


@runtime_checkable
class HasToken(Protocol):
    """A held lease: ``fence.hold()``'s ``Hold`` or ``AsyncHold`` once entered."""

    @property
    def token(self) -> int | None: ...


#: A token, a hold (its token at each request) or a function giving the current token.
TokenSource = int | HasToken | Callable[[], int]


def check_source(source: object) -> TokenSource:
    """``source`` if it can give tokens; ``TypeError``/``ValueError`` now otherwise."""
    if isinstance(source, int):
        check_mark_token(source)
    elif not (isinstance(source, HasToken) or callable(source)):
        raise TypeError(f"token must be an int, a hold or a function, not {source!r}")
    return source


def token_of(source: TokenSource) -> int:
    """The token to send now."""
    if isinstance(source, int):
        token: int | None = source
    else:
        token = source.token if isinstance(source, HasToken) else source()
    if token is None:
        raise ValueError("the hold has no token yet: send requests inside `with hold:`")
    return check_mark_token(token)
