"""``aclose()`` of the asyncio fence, election, semaphore and limiter: closing what is theirs.

``fencing.connect(url).aio_fence(...)`` (and ``aio_election``, ``aio_semaphore``,
``aio_limiter``) opens a client, an engine or channels for that one object, on the
event loop that uses it. Nobody else holds them, so the object closes them: before its
loop closes, or redis-py warns of an "unclosed Connection" when the client is
collected after the loop is gone, in whatever code runs then.

One mechanism for the four classes: whoever made an issuer for one object alone (a
backend, or a fence built from a URL) hands it over with ``owned``, and the object's
``aclose`` closes that issuer (``AsyncCloses``) and nothing else. An object on a
client, engine or issuer that the caller passed in owns none of them, and its
``aclose`` does nothing; a backend's shared session (ZooKeeper) stays the backend's.

Imports nothing from the package.
"""

from __future__ import annotations

import warnings
from typing import Protocol, TypeVar, runtime_checkable


@runtime_checkable
class AsyncCloses(Protocol):
    """An asyncio issuer that can close the connections it opened (they reopen on use)."""

    async def aclose(self) -> None:
        """Close this issuer's connections; used again, it opens new ones."""
        ...


class Owner:
    """Mixin of the asyncio objects: ``aclose`` closes the issuer handed over to them."""

    _closes: AsyncCloses | None = None

    async def aclose(self) -> None:
        """Close the connections opened for this object alone: the client, engine or
        channels that ``fencing.connect(url)``'s backend (or a fence given a URL) made
        for it; never a client, engine or issuer passed in, nor one shared with other
        objects. Closing twice is fine; an object used after ``aclose`` opens its
        connections again (close it again when done). ``async with
        contextlib.aclosing(obj):`` closes it on the way out."""
        if self._closes is not None:
            await self._closes.aclose()


Obj = TypeVar("Obj", bound=Owner)


def owned(obj: Obj, issuer: object) -> Obj:
    """``obj``, now owner of ``issuer`` (made for ``obj`` alone): ``obj.aclose()`` closes it."""
    if not isinstance(issuer, AsyncCloses):
        raise TypeError(f"{issuer!r} cannot be closed: it has no aclose()")
    obj._closes = issuer
    return obj


class OldClose:
    """Mixin of the asyncio issuers whose ``aclose`` was once named ``close``: that name,
    deprecated (it warns, then closes; removed in 1.0)."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Deprecated: ``aclose()``."""
        warnings.warn(
            f"{type(self).__name__}.close() is now aclose(); close() goes in 1.0",
            DeprecationWarning,
            stacklevel=2,
        )
        await self.aclose()
