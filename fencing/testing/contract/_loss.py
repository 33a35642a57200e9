"""``LossBoundContract`` and ``AsyncLossBoundContract``: a hold learns that its lease is
lost by the lease's end, whatever its renewal's I/O does (docs/guarantees.md).

The issuer is frozen under live holds, so every renewal call blocks (or fails) from then
on: a fence's hold, a semaphore's permit and an election's term must each signal the
loss within ``ttl`` of the freeze plus a margin well below every backend's request
timeout, so a renewal loop that waits for its calls to time out fails. Nothing asserts
a wall-clock bound beyond that deadline of the wait for the signal. Once the issuer is
back, the renewals left blocked in it must end: no thread or task is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import pytest

from ... import Election, Fence, LeaseLost, Semaphore, aio

#: ``freeze()``: a context manager during which the issuer answers nothing (its servers
#: stopped with SIGSTOP, checked stopped, or the connections to them cut), back to
#: normal on leaving whatever happens.
Freeze = Callable[[], AbstractContextManager[None]]


class _LossBound:
    """Timings of both contracts."""

    #: Seconds: the ttl of the holds frozen (renewed every ttl/3 until the freeze).
    ttl: ClassVar[float] = 1.0
    #: Seconds past ``ttl`` that the signal may take, from the freeze: generous for a
    #: loaded machine, yet below every backend's request timeout (5 s for etcd,
    #: ZooKeeper and Redlock; none at all for a Redis client without a socket timeout
    #: or PostgreSQL), which a renewal blocked in a frozen issuer waits for.
    margin: ClassVar[float] = 2.5
    #: Seconds: how long entering the holds may take (a limit against hangs).
    patience: ClassVar[float] = 30.0

    @pytest.fixture
    def freeze(self) -> Freeze:
        """Provided by the subclass: ``freeze()`` stops the issuer (every server that a
        lease needs an answer from; e.g. SIGSTOP, checked in ``/proc``, or the
        connections to them cut) for the ``with`` block and resumes it on leaving, also
        on failure."""
        raise NotImplementedError(f"{type(self).__name__} must provide a freeze fixture")

    @staticmethod
    def fresh_name(what: str) -> str:
        return f"contract:{what}:{uuid.uuid4().hex}"

    def signal_deadline(self) -> float:
        """Monotonic time by which a hold frozen now must have signalled its loss."""
        return time.monotonic() + self.ttl + self.margin


class LossBoundContract(_LossBound):
    """The loss bound of blocking holds. Subclass it and provide the ``issuer`` fixture
    (a blocking issuer whose ``status`` elections can read) and ``freeze``."""

    @pytest.fixture
    def issuer(self) -> Any:
        """Provided by the subclass: the blocking issuer under test."""
        raise NotImplementedError(f"{type(self).__name__} must provide an issuer fixture")

    def test_a_frozen_issuer_is_presumed_lost_by_the_lease_end(
        self, issuer: Any, freeze: Freeze
    ) -> None:
        """With the issuer frozen under them, a fence's hold (``wait_lost``, ``lost``,
        ``on_lost``), a semaphore's permit and an election's term each signal the loss
        within ``ttl`` of the freeze plus ``margin``; leaving each then raises
        ``LeaseLost`` once the issuer is back."""
        name = self.fresh_name("frozen")
        errors: list[LeaseLost] = []
        hold = Fence(issuer, name, self.ttl).hold(self.patience, on_lost=errors.append)
        permit = Semaphore(issuer, f"{name}:permits", 2, self.ttl).hold(self.patience)
        with contextlib.ExitStack() as stack:
            stack.push(_lost_expected)
            stack.enter_context(hold)
            stack.push(_lost_expected)
            stack.enter_context(permit)
            term = Election(issuer, f"{name}:term", self.ttl).campaign("old", self.patience)
            stack.push(_lost_expected)
            stack.enter_context(term)
            signals: dict[str, Callable[[float], bool]] = {
                "a fence's hold": hold.wait_lost,
                "a semaphore's permit": permit.wait_lost,
                "an election's term": term.wait_lost,
            }
            with freeze():
                deadline = self.signal_deadline()
                late = [
                    what
                    for what, wait_lost in signals.items()
                    if not wait_lost(max(0.0, deadline - time.monotonic()))
                ]
            assert not late, (
                f"{', '.join(late)} not presumed lost within ttl {self.ttl}s + {self.margin}s "
                "of the issuer's freeze"
            )
            assert hold.lost and term.lost
            assert [error.token for error in errors] == [hold.token]
        # a renewer left blocked in the frozen issuer ends once it answers again
        deadline = time.monotonic() + self.patience
        while left := [t.name for t in threading.enumerate() if name in t.name]:
            assert time.monotonic() < deadline, f"threads left behind by the holds: {left}"
            time.sleep(0.01)


class AsyncLossBoundContract(_LossBound):
    """The loss bound of asyncio holds. Subclass it and provide the ``async_issuer``
    fixture (an asyncio issuer whose ``status`` elections can read; it may be an async
    fixture) and ``freeze``."""

    @pytest.fixture
    def async_issuer(self) -> Any:
        """Provided by the subclass: the asyncio issuer under test."""
        raise NotImplementedError(f"{type(self).__name__} must provide an async_issuer fixture")

    async def test_a_frozen_issuer_cancels_the_body_by_the_lease_end(
        self, async_issuer: Any, freeze: Freeze
    ) -> None:
        """With the issuer frozen under them, a hold with ``cancel_on_loss=True`` has its
        body cancelled (and raises ``LeaseLost``), and a semaphore's permit and an
        election's term signal the loss, each within ``ttl`` of the freeze plus
        ``margin``."""
        name = self.fresh_name("frozen")
        hold = aio.Fence(async_issuer, name, self.ttl).hold(self.patience, cancel_on_loss=True)
        entered = asyncio.Event()

        async def body() -> None:
            async with hold:
                entered.set()
                await asyncio.Event().wait()  # until the loss cancels it

        permit = aio.Semaphore(async_issuer, f"{name}:permits", 2, self.ttl).hold(self.patience)
        held = asyncio.create_task(body())
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(_finished, held)
            await asyncio.wait_for(entered.wait(), self.patience)
            stack.push(_lost_expected)
            await stack.enter_async_context(permit)
            election = aio.Election(async_issuer, f"{name}:term", self.ttl)
            term = await election.campaign("old", self.patience)
            stack.push(_lost_expected)
            await stack.enter_async_context(term)
            signals: dict[str, Callable[[float], Awaitable[bool]]] = {
                "a semaphore's permit": permit.wait_lost,
                "an election's term": term.wait_lost,
            }
            with freeze():
                deadline = self.signal_deadline()
                await asyncio.wait({held}, timeout=max(0.0, deadline - time.monotonic()))
                late = [] if held.done() else ["a hold's body (cancel_on_loss)"]
                for what, wait_lost in signals.items():
                    if not await wait_lost(max(0.0, deadline - time.monotonic())):
                        late.append(what)
            assert not late, (
                f"{', '.join(late)} not presumed lost within ttl {self.ttl}s + {self.margin}s "
                "of the issuer's freeze"
            )
            assert isinstance(held.exception(), LeaseLost), f"the body ended with {held!r}"
        # a renewal left blocked in the frozen issuer ends once it answers again
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:
            _, left = await asyncio.wait(others, timeout=self.patience)
            assert not left, f"tasks left behind by the holds: {left}"


def _lost_expected(kind: object, error: BaseException | None, tb: object) -> bool:
    """An exit callback pushed before a hold (or a term) is entered on the same stack:
    the ``LeaseLost`` of leaving it is expected (the test checks the loss itself), so it
    is suppressed; any other error, and one raised while the test's own error went on
    (its ``__context__``), goes on."""
    return isinstance(error, LeaseLost) and error.__context__ is None


async def _finished(task: asyncio.Task[None]) -> None:
    """End ``task`` (cancel it if the test failed before its loss) and wait for it."""
    task.cancel()
    await asyncio.wait({task})
