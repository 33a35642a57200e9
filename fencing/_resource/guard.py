"""``guard``: wrap any callable so it runs only for a current fence token.

Imports the marks and the validation module; knows no optional backend
(a ``RedisMark`` is passed in by the user).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Generic, ParamSpec, TypeVar, overload

from .._base.validate import check_mark_token
from .marks import Mark, MemoryMark

P = ParamSpec("P")
R = TypeVar("R")


class Guarded(Generic[P, R]):
    """A callable guarded by a high-water mark: ``guarded(token, *args, **kwargs)``.

    Runs ``fn(*args, **kwargs)`` and returns its result if ``token`` >= the mark (equal:
    the same lease calling again), raising the mark to ``token`` first; otherwise raises
    ``StaleTokenError`` without calling ``fn``. See ``guard`` for what each mark promises.
    """

    def __init__(self, fn: Callable[P, R], mark: Mark, name: str) -> None:
        self.fn = fn
        self.mark = mark
        self.name = name
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<Guarded {self.name!r} mark={self.mark!r}>"

    def __call__(self, token: int, /, *args: P.args, **kwargs: P.kwargs) -> R:
        value = check_mark_token(token)
        with self.mark.admit(value, self.name):
            return self.fn(*args, **kwargs)

    def claim(self, token: int) -> None:
        """Raise the mark to ``token`` without calling ``fn``: claim before you read.

        ``StaleTokenError`` if ``token`` is below the mark (nothing changed); the same
        token again is a no-op. Use it when the call's arguments are computed from a read
        of the resource: after the claim every older token is refused, so a stale holder
        can no longer write between your read and your call. See ``Mark.claim``.
        """
        self.mark.claim(token, self.name)


@overload
def guard(
    fn: Callable[P, R], *, mark: Mark | None = None, name: str | None = None
) -> Guarded[P, R]: ...
@overload
def guard(
    fn: None = None, *, mark: Mark | None = None, name: str | None = None
) -> Callable[[Callable[P, R]], Guarded[P, R]]: ...
def guard(
    fn: Callable[P, R] | None = None, *, mark: Mark | None = None, name: str | None = None
) -> Guarded[P, R] | Callable[[Callable[P, R]], Guarded[P, R]]:
    """Guard ``fn`` with a high-water mark: ``guard(fn)(token, *args)`` calls ``fn(*args)``
    only if ``token`` is at least the highest token admitted so far.

    Also a decorator: ``@guard`` or ``@guard(mark=FileMark(path), name="invoices")``.
    ``name`` names the resource in errors and logs (default: ``fn``'s qualified name).

    The mark is raised when a token is admitted, before ``fn`` runs, and stays raised if
    ``fn`` raises: a retry with the same token is accepted, a lower one is refused.
    ``guarded.claim(token)`` raises it without calling ``fn``: a holder that reads the
    resource before calling claims first, so no older token is admitted in between.

    What each mark guarantees:

    - ``MemoryMark()`` (default): check, raise and call under one ``threading.Lock``.
      Calls never overlap and run in non-decreasing token order, in this process only;
      the mark is forgotten when the process exits.
    - ``FileMark(path)``: the same under an exclusive ``flock`` held across check,
      durable raise and call: for every thread and process on this host; the mark
      survives restarts and crashes (it is raised durably before ``fn`` runs).
    - ``RedisMark(client, key)``: check-and-raise is one atomic Lua step shared by every
      process, so no token is admitted after a higher one was. But ``fn`` runs outside
      Redis: two admitted calls may overlap, and a caller that paused between its check
      and its call may still run ``fn`` after a newer token's call started. It narrows
      the window of the pause scenario; it does not close it.

    What no guard can protect: side effects outside the guarded call (an e-mail sent
    before calling, work done in ``fn`` by a third-party API that does not check tokens
    and that a stale caller already started), and a resource that is also written
    without going through this guard. The strongest protection checks the token inside
    the resource, atomically with the write: pass the token along and store it with the
    data (``FileStore``, the SQL guard).

    ``fn`` must be blocking: an ``async def`` raises ``TypeError`` (its body would run
    after the guard let go); from asyncio, call the guarded function in a thread. Calls
    are not reentrant for a shared memory or file mark (the lock is held during
    ``fn``). Bad tokens (bool, str, float, None, negative, above 2**63-1) raise
    ``TypeError``/``ValueError`` before anything is checked or called.
    """
    if mark is not None and not isinstance(mark, Mark):
        raise TypeError(
            "mark must be a fencing.Mark (MemoryMark, FileMark, RedisMark, or a subclass"
            f" of Mark: current, admit and claim), not {type(mark).__name__}"
        )
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if name == "":
        raise ValueError("name must not be empty")

    def wrap(function: Callable[P, R]) -> Guarded[P, R]:
        if not callable(function):
            raise TypeError(f"guard needs a callable, not {type(function).__name__}")
        if inspect.iscoroutinefunction(function):
            # Calling it under the lock would only create the coroutine; the work would
            # run later, unguarded.
            raise TypeError("guard wraps blocking callables; an async def is not guarded")
        label = name or getattr(function, "__qualname__", None) or repr(function)
        return Guarded(function, mark if mark is not None else MemoryMark(), label)

    if fn is None:
        return wrap
    return wrap(fn)
