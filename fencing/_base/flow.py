"""Flows: the one technique ``fencing`` uses to write logic once for blocking and asyncio code.

A *flow* is a generator that yields *steps* (requests for I/O) and returns a value. A
step knows how to carry itself out on a *port* (whatever does the I/O: an issuer, a
redis-py client, a database connection) and stores its reply in its own ``result``
attribute, which the flow reads after the ``yield``, typed::

    def renew_flow(...) -> Flow[Op, None]:
        renew = Renew(token, holder, ttl_ms)
        yield renew                      # the driver performs it
        if not renew.result: ...         # result: bool

``run_sync`` performs each step blocking, ``run_async`` awaits it; nothing else differs
(the model is httpx's auth flows and h11's protocol without I/O). An error raised while
performing a step, an interrupt or a cancellation included, is thrown back into the
flow at its ``yield``, so the flow may yield clean-up steps before it lets the error
out. The fences' protocol (``_protocol``), the semaphores, elections and limiters, and
the backends' issuers (``fencing.redis``, ``fencing.sql``, ``fencing.etcd``,
``fencing.zookeeper``) are all written this way; the core's one step class is
``_protocol.Call`` (docs/design.md, "Where blocking and asyncio differ").

Imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Protocol, TypeVar

S = TypeVar("S")
T = TypeVar("T")
P = TypeVar("P", contravariant=True)

#: A flow that yields steps of type ``S`` and returns a ``T``: ``Flow[Execute, bool]``.
#: The one definition, for the core and every backend.
Flow = Generator[S, None, T]


class Step(Protocol[P]):
    """A request a flow yields to a blocking driver: carried out on a port of type ``P``."""

    def perform(self, port: P) -> None:
        """Do the I/O and store the reply in ``self.result`` (raise on failure)."""


class AsyncStep(Protocol[P]):
    """A request a flow yields to the asyncio driver (see ``Step``)."""

    async def aperform(self, port: P) -> None:
        """Do the I/O, awaited, and store the reply in ``self.result``."""


def run_sync(flow: Flow[Step[P], T], port: P) -> T:
    """Drive ``flow`` to its end, performing each step on ``port``; return its value."""
    error: BaseException | None = None
    while True:
        try:
            step = flow.throw(error) if error is not None else next(flow)
        except StopIteration as stop:
            result: T = stop.value
            return result
        error = None
        try:
            step.perform(port)
        except BaseException as exc:  # thrown into the flow, which decides
            error = exc


async def run_async(flow: Flow[AsyncStep[P], T], port: P) -> T:
    """The asyncio twin of ``run_sync``: each step is awaited.

    A cancellation is thrown into the flow like any error, so its clean-up steps still
    run (once: a second cancellation ends them).
    """
    error: BaseException | None = None
    while True:
        try:
            step = flow.throw(error) if error is not None else next(flow)
        except StopIteration as stop:
            result: T = stop.value
            return result
        error = None
        try:
            await step.aperform(port)
        except BaseException as exc:
            error = exc
