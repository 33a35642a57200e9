"""Scenarios: each contract check written once, run blocking and asyncio by a driver.

A *scenario* is a generator. Each call on the object under test whose asyncio form is
awaited is yielded, and its value comes back at the ``yield``::

    token = yield fence.acquire(timeout=0)
    with pytest.raises(LeaseLost):
        yield fence.renew(token + 1)

``BLOCKING`` runs a scenario on blocking objects: a yielded call has already run, so it
sends the value straight back (an error was raised in the scenario itself). ``ASYNCIO``
runs it on asyncio objects: it awaits what is yielded and sends the result back, or
throws the call's error in at the ``yield``; so ``pytest.raises`` around a ``yield``
checks both kinds. What does differ between threads and tasks (a sleep, entering a
hold, a scenario run beside the test, racers, "the current thread or task") each driver
provides, as something to yield as well.

Why generators driven two ways: it is the package's own technique (``fencing._base.flow``)
with the public calls themselves as the steps, so a scenario reads like the user code
it checks, and nothing is generated (an unasync-style generated copy would need a build
step in a module that users subclass). Each driver refuses what only the other could
run (the blocking one an awaitable, which would pass for a value un-awaited; the
asyncio one anything else, whose ``TypeError`` thrown in could pass a bad-input check),
so a scenario that yields the wrong thing fails loudly.

A contract class names its driver (``drive = BLOCKING``) and subclasses ``Driven``,
which turns each of its scenarios named ``test*`` into a test function of that kind,
with the scenario's signature and marks: pytest collects it and fills in its fixtures.

Imports the contract's helpers; no pytest.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterator,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, ClassVar, Protocol, TypeVar

from ._helpers import _Background, _run_threads, _tries

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: A scenario returning a ``T``: it yields calls (or a driver's steps) and gets their
#: values back.
Scenario = Generator[Any, Any, T]


def _wrong_step(scenario: Scenario[Any], step: object, kind: str) -> TypeError:
    """Close ``scenario`` (and ``step``, a coroutine) and say what it wrongly yielded."""
    if inspect.iscoroutine(step):
        step.close()
    scenario.close()
    return TypeError(f"a scenario yielded {step!r} to the {kind} driver")


class Started(Protocol[T_co]):
    """A scenario running beside the test (in a thread, or a task)."""

    def running(self) -> bool:
        """Whether it still runs."""

    def result(self, patience: float) -> Any:
        """To yield: its value, or its error raised; fails the test if it still runs
        after ``patience`` seconds."""

    def check(self) -> None:
        """Raise the error it ended with, if it ended with one."""


class Driver(ABC):
    """What differs between running a scenario blocking and asyncio: the steps a
    scenario yields (``sleep``, ``enter``, ``leave``, ``next``, ``close``, ``race``,
    ``result`` of what it ``start``-ed) and how a scenario becomes a test function or
    a callback."""

    #: What the driver is called in messages.
    kind: ClassVar[str]

    @abstractmethod
    def callback(self, scenario: Callable[..., Scenario[T]]) -> Callable[..., Any]:
        """``scenario`` as a function of this kind (a coroutine function for asyncio),
        for an API that calls back, such as ``Election.run``."""

    def test(self, scenario: Callable[..., Scenario[Any]]) -> Callable[..., Any]:
        """A test function of this kind running ``scenario`` (same signature, marks)."""
        return functools.wraps(scenario)(self.callback(scenario))

    @abstractmethod
    def next(self, iterator: Any) -> Any:
        """To yield: the next item of ``iterator`` (an async one for asyncio)."""

    @abstractmethod
    def close(self, iterator: Any) -> Any:
        """To yield: close the generator ``iterator`` (``aclose`` for asyncio)."""

    @abstractmethod
    def sleep(self, seconds: float) -> Any:
        """To yield: sleep without holding up the racers."""

    @abstractmethod
    def enter(self, manager: Any) -> Any:
        """To yield: enter ``manager`` (a ``with``, or an ``async with``, one)."""

    @abstractmethod
    def leave(self, manager: Any, error: BaseException | None) -> Any:
        """To yield: leave ``manager`` with ``error`` (what its block raised, if
        anything); the value says whether the error is suppressed."""

    @abstractmethod
    def start(self, scenario: Scenario[T]) -> Started[T]:
        """Run ``scenario`` beside this one: in a thread, or a task."""

    @abstractmethod
    def race(self, scenarios: Sequence[Scenario[Any]], patience: float) -> Any:
        """To yield: run ``scenarios`` at once (threads, or tasks) and get the errors
        they raised; fails the test if one still runs after ``patience`` seconds."""

    @abstractmethod
    def current(self) -> object:
        """The thread (or task) running the scenario that asks."""

    def until(self, condition: Callable[[], bool], what: str, patience: float) -> Scenario[None]:
        """Poll ``condition`` until it holds; fail after ``patience`` (a limit, not a
        timing)."""
        for _ in _tries(patience, what):
            if condition():
                return
            yield self.sleep(0.01)

    def within(
        self, manager: Any, body: Callable[[Any], Scenario[Any]] | None = None
    ) -> Scenario[Any]:
        """``body(entered)`` in ``manager``'s block, as a ``with`` (``async with``)
        statement runs its block (none: an empty block); what ``body`` returns, ``None``
        if the manager suppressed its error."""
        entered = yield self.enter(manager)
        try:
            result = None if body is None else (yield from body(entered))
        except BaseException as error:
            if not (yield self.leave(manager, error)):
                raise
            return None
        yield self.leave(manager, None)
        return result


class _Blocking(Driver):
    kind = "blocking"

    def run(self, scenario: Scenario[T]) -> T:
        """Run ``scenario`` to its end in this thread; its value."""
        value = None
        while True:
            try:
                value = scenario.send(value)
            except StopIteration as stop:
                result: T = stop.value
                return result
            if inspect.isawaitable(value):
                raise _wrong_step(scenario, value, self.kind)

    def callback(self, scenario: Callable[..., Scenario[T]]) -> Callable[..., T]:
        return lambda *args, **kwargs: self.run(scenario(*args, **kwargs))

    def next(self, iterator: Iterator[T]) -> T:
        return next(iterator)

    def close(self, iterator: Generator[Any, Any, Any]) -> None:
        iterator.close()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def enter(self, manager: AbstractContextManager[T]) -> T:
        return manager.__enter__()

    def leave(self, manager: AbstractContextManager[Any], error: BaseException | None) -> Any:
        return manager.__exit__(type(error) if error else None, error, None)

    def start(self, scenario: Scenario[T]) -> Started[T]:
        return _Thread(_Background(lambda: self.run(scenario)))

    def race(self, scenarios: Sequence[Scenario[Any]], patience: float) -> list[Exception]:
        return _run_threads([functools.partial(self.run, s) for s in scenarios], patience)

    def current(self) -> object:
        return threading.current_thread()


class _Thread(Started[T]):
    def __init__(self, call: _Background[T]) -> None:
        self._call = call

    def running(self) -> bool:
        return self._call.running()

    def result(self, patience: float) -> T:
        return self._call.result(patience)

    def check(self) -> None:
        if not self._call.running():
            self._call.result(0)


class _Asyncio(Driver):
    kind = "asyncio"

    async def run(self, scenario: Scenario[T]) -> T:
        """Run ``scenario`` to its end, awaiting each call it yields; its value."""
        value: Any = None
        error: Exception | None = None
        while True:
            try:
                step = scenario.throw(error) if error is not None else scenario.send(value)
            except StopIteration as stop:
                result: T = stop.value
                return result
            if not inspect.isawaitable(step):
                raise _wrong_step(scenario, step, self.kind)
            value, error = None, None
            try:
                value = await step
            except Exception as exc:  # thrown in at the yield (a cancellation goes on)
                error = exc

    def callback(self, scenario: Callable[..., Scenario[T]]) -> Callable[..., Awaitable[T]]:
        async def call(*args: Any, **kwargs: Any) -> T:
            return await self.run(scenario(*args, **kwargs))

        return call

    def next(self, iterator: AsyncIterator[T]) -> Awaitable[T]:
        return anext(iterator)

    def close(self, iterator: AsyncGenerator[Any, Any]) -> Awaitable[None]:
        return iterator.aclose()

    def sleep(self, seconds: float) -> Any:
        return asyncio.sleep(seconds)

    def enter(self, manager: AbstractAsyncContextManager[Any]) -> Any:
        return manager.__aenter__()

    def leave(self, manager: AbstractAsyncContextManager[Any], error: BaseException | None) -> Any:
        return manager.__aexit__(type(error) if error else None, error, None)

    def start(self, scenario: Scenario[T]) -> Started[T]:
        return _Task(asyncio.ensure_future(self.run(scenario)))

    async def race(self, scenarios: Sequence[Scenario[Any]], patience: float) -> list[Exception]:
        tasks = [asyncio.ensure_future(self.run(s)) for s in scenarios]
        done, pending = await asyncio.wait(tasks, timeout=patience)
        for task in pending:
            task.cancel()
        assert not pending, f"{len(pending)} racing tasks still run after {patience}s"
        return [error for task in done if isinstance(error := task.exception(), Exception)]

    def current(self) -> object:
        return asyncio.current_task()


class _Task(Started[T]):
    def __init__(self, task: asyncio.Future[T]) -> None:
        self._task = task

    def running(self) -> bool:
        return not self._task.done()

    async def result(self, patience: float) -> T:
        done, _ = await asyncio.wait({self._task}, timeout=patience)
        if not done:
            self._task.cancel()
        assert done, f"a task still runs after {patience}s"
        return self._task.result()

    def check(self) -> None:
        if self._task.done():
            self._task.result()


#: The drivers: of blocking tests (threads), and of asyncio tests (tasks of the test's loop).
BLOCKING = _Blocking()
ASYNCIO = _Asyncio()


class Driven:
    """A contract whose scenarios run with its ``drive``: in a class that sets
    ``drive``, each generator function named ``test*`` becomes a test function of that
    driver's kind (its subclasses inherit those)."""

    drive: ClassVar[Driver]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        drive = cls.__dict__.get("drive")
        if drive is None:
            return
        for name in dir(cls):
            scenario = getattr(cls, name)
            if name.startswith("test") and inspect.isgeneratorfunction(scenario):
                setattr(cls, name, drive.test(scenario))
