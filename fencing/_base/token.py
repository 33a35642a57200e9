"""``FenceToken``: the integer issued with a lease. Imports nothing from the package."""

from __future__ import annotations

from typing import Any


class FenceToken(int):
    """A fence token: an ``int`` that also remembers the fence name it was issued for.

    Being an ``int`` means ``int(token)``, comparisons, JSON and database binding just
    work; tokens usually cross process boundaries as plain ints, and every guard
    accepts either. Arithmetic returns plain ints.
    """

    name: str

    def __new__(cls, value: int, name: str) -> FenceToken:
        token = int.__new__(cls, value)  # not super(): this is on every acquire's path
        token.name = name
        return token

    def __repr__(self) -> str:
        return f"FenceToken({int(self)}, name={self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FenceToken, (int(self), self.name))
