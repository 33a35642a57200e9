"""Elections whose term is a fence token: ``Election`` (blocking) and ``AsyncElection``.

One generic implementation over the issuer protocols, for every backend. An election
named ``NAME`` is the fence ``NAME``: a candidate's term is a lease of it, held by
``hold()`` (renewed in the background, its loss signalled), and the term's token is the
lease's token, so whatever a leader writes through a guard is refused once a newer term
exists. The holder id of a term's lease carries the candidate's value
(``<16 random hex digits>|<value>``), so ``leader()`` reads who leads, from any process,
through the issuer's ``status`` (``fencing.issuer.Inspects`` / ``AsyncInspects``).

Timeline of a leader that paused past its term (the reason terms are tokens)::

    leader A: campaign -> term 33 ...... [pause > ttl] ....... write(33) -> REJECTED
    leader B:               term ends -> campaign -> term 34 -> write(34) -> ok
    resource: accepts 34, then refuses 33 because 33 < 34

``observe()`` reads ``status`` and then waits on the engine's watch where the issuer
has one (``fencing.issuer.WatchesLease``: etcd's watch, ZooKeeper's exists-watch, Redis
keyspace notifications), else sleeps its polling period (``poll``, 0.5 s by default: the
SQL and in-memory issuers); a term shorter than a wait may be missed, never reported out
of order.

``observe`` is a flow on the ``Watching`` port, driven blocking or asyncio (``_flow``).
Imports the fences, the flow drivers, the protocol's ``Call`` step and the issuer
protocols; knows no backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from .._base.errors import AcquireTimeout, FenceUnavailable, LeaseLost
from .._base.flow import Flow, run_async, run_sync
from .._base.owned import Owner
from .._base.token import FenceToken
from .._base.validate import check_name, check_timeout, check_ttl
from .._lease.async_fence import AsyncFence, AsyncHold
from .._lease.core import DEFAULT_TTL, BaseHold, Clock, OnLost
from .._lease.fence import Fence, Hold
from .._lease.protocol import Call
from ..issuer import AsyncIssuer, AsyncWatchesLease, FenceStatus, Issuer, WatchesLease

T = TypeVar("T")

#: Between the random part of a term's holder id and the candidate's value.
SEPARATOR = "|"
#: The longest candidate value, in characters: a holder id must fit the SQL issuer's
#: 64-character ``holder`` column (16 random hex digits, the separator, the value).
MAX_VALUE = 32
#: Seconds between two reads of ``status`` by ``observe()``, unless told otherwise.
DEFAULT_POLL = 0.5


@dataclass(frozen=True)
class Leader:
    """Who leads an election now: the candidate's ``value`` and its term's ``token``.

    ``value`` is ``""`` when the fence is held by something else than a candidate (a
    plain fence of the same name).
    """

    value: str
    token: FenceToken


def check_value(value: object) -> str:
    """A candidate's value: a non-empty ``str`` of at most ``MAX_VALUE`` characters,
    without NUL and encodable as UTF-8; else ``TypeError``/``ValueError``."""
    if not isinstance(value, str):
        raise TypeError(f"a candidate's value must be a str, not {type(value).__name__}")
    if not value or len(value) > MAX_VALUE:
        raise ValueError(f"a candidate's value has 1 to {MAX_VALUE} characters, not {len(value)}")
    if "\x00" in value:
        raise ValueError("a candidate's value must not contain NUL")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"a candidate's value must be encodable as UTF-8: {exc}") from None
    return value


def leader_of(status: FenceStatus) -> Leader | None:
    """The leader a fence's status shows, or ``None`` when no lease is live."""
    if not status.held or status.token is None:
        return None
    _, separator, value = (status.holder or "").partition(SEPARATOR)
    return Leader(value if separator else "", FenceToken(status.token, status.name))


def _holder_ids(value: str) -> Callable[[], str]:
    """Fresh holder ids carrying ``value``: 64 random bits each, so no two terms share one."""
    return lambda: f"{os.urandom(8).hex()}{SEPARATOR}{value}"


def _check_poll(poll: object) -> float:
    seconds = check_timeout(poll, "poll")
    if seconds is None or seconds <= 0:
        raise ValueError(f"poll must be a finite number of seconds > 0, not {poll!r}")
    return seconds


def _check_fn(fn: object) -> None:
    if not callable(fn):
        raise TypeError(f"run needs a callable, not {type(fn).__name__}")


class Watching:
    """The port of an election's ``observe``: its issuer's ``status`` and the wait for a
    change (the engine's watch, ``WatchesLease``, or else ``sleep``). As ``Port``, its
    methods return the issuer's reply (an awaitable for an asyncio issuer), so one class
    serves both drivers; it also keeps the last leader seen (``next_change``)."""

    __slots__ = ("issuer", "name", "seen", "sleep", "started", "watch")

    def __init__(self, issuer: Any, name: str, sleep: Callable[[float], Any], watch: bool):
        self.issuer = issuer
        self.name = name
        self.sleep = sleep
        self.watch = watch
        self.seen: int | None = None  # the token of the term seen last (None: nobody)
        self.started = False

    def status(self) -> Any:
        return self.issuer.status(self.name)

    def wait(self, token: int | None, poll: float) -> Any:
        """Until the lease of ``token`` may have changed, at most ``poll`` seconds."""
        if self.watch:  # the engine's watch wakes us on a change; poll bounds the wait
            return self.issuer.await_change(self.name, token, poll)
        return self.sleep(poll)

    def next_change(self, poll: float) -> Flow[Call[Any], Leader | None]:
        """The leader now, the first time; then the next one that differs from the last
        seen (a new term, or ``None`` once nobody leads), waiting between reads."""
        while True:
            if self.started:
                yield Call("wait", self.seen, poll)
            status: Call[FenceStatus] = Call("status")
            yield status
            now = leader_of(status.result)
            key = None if now is None else int(now.token)
            if key != self.seen or not self.started:
                self.started = True
                self.seen = key
                return now


class _CandidateFence(Fence):
    """A fence whose leases' holder ids carry a candidate's value."""

    def __init__(self, election: Election, value: str) -> None:
        super().__init__(election.issuer, election.name, election.ttl, clock=election.clock)
        self._new_holder_id = _holder_ids(value)


class _AsyncCandidateFence(AsyncFence):
    """The asyncio ``_CandidateFence``."""

    def __init__(self, election: AsyncElection, value: str) -> None:
        super().__init__(election.issuer, election.name, election.ttl, clock=election.clock)
        self._new_holder_id = _holder_ids(value)


@contextlib.contextmanager
def _not_elected(name: str) -> Iterator[None]:
    """A campaign's ``AcquireTimeout`` says the election's name and "not elected", not
    the candidate fence's lease."""
    try:
        yield
    except AcquireTimeout as exc:
        raise AcquireTimeout(name, exc.timeout, "election") from None


class BaseElection:
    """What both elections check and keep: no I/O."""

    #: Whether the issuer's ``status`` must be a coroutine function.
    _awaits = False

    def __init__(self, issuer: object, name: str, ttl: float, clock: Clock | None) -> None:
        self.name = check_name(name)
        self.ttl = check_ttl(ttl)
        self.clock = clock
        status = getattr(issuer, "status", None)
        if not callable(status) or inspect.iscoroutinefunction(status) != self._awaits:
            needed = "an async status()" if self._awaits else "a blocking status()"
            raise TypeError(
                f"{issuer!r} cannot tell who leads: {type(self).__name__} needs an issuer "
                f"with {needed} (fencing.issuer.Inspects, or AsyncInspects for asyncio)"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, ttl={self.ttl})"


class BaseTerm:
    """What both terms share: the hold of the term's lease, its token and value, and
    the claim that ends the term once (resigning, or leaving the ``with``)."""

    def __init__(self, hold: BaseHold, value: str) -> None:
        self._hold = hold
        self.value = value
        token = hold.token
        assert token is not None
        self.token: FenceToken = token
        self._lock = threading.Lock()
        self._over = False

    def __repr__(self) -> str:
        kind, token = type(self).__name__, int(self.token)
        return f"{kind}(value={self.value!r}, token={token}, lost={self.lost})"

    @property
    def lost(self) -> bool:
        """True once this term's lease was found lost: another term may exist."""
        return self._hold.lost

    def on_lost(self, callback: OnLost) -> None:
        """Call ``callback(error)`` once when the term is found lost (see ``Hold.on_lost``;
        an asyncio term's runs in a task of its hold)."""
        self._hold.on_lost(callback)

    def _ending(self) -> bool:
        """True the first time only: the term ends once."""
        with self._lock:
            over, self._over = self._over, True
        return not over


class Term(BaseTerm):
    """One term of office in a blocking ``Election``, from ``campaign``.

    ``token`` (a ``FenceToken``: pass it with every write to a guarded resource),
    ``value`` (the candidate's), ``lost``, ``on_lost``/``wait_lost`` (see ``Hold``).
    The term is renewed in the background like ``hold()``. As a context manager it
    resigns on exit, raising ``LeaseLost`` if the term was lost meanwhile.
    """

    _hold: Hold

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the term is lost (True), or ``timeout`` passes or it ends (False)."""
        return self._hold.wait_lost(timeout)

    def resign(self) -> None:
        """End the term now: its lease is released, so the next candidate is elected at
        once, not a ttl later. Idempotent; a lost term has nothing to hand over (no
        error here), and neither has a term whose issuer does not answer now: its lease
        is released behind it once the issuer answers again (no error here either)."""
        with contextlib.suppress(LeaseLost, FenceUnavailable):
            self.__exit__(None, None, None)

    def __enter__(self) -> Term:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._ending():
            self._hold.__exit__(*exc_info)


class Election(BaseElection):
    """A leader election on a blocking issuer whose term is a fence token.

    ``Election(issuer, name, ttl)``, or ``backend.election(name, ttl=...)``. The issuer
    must report status (``fencing.issuer.Inspects``: every issuer of the package).
    """

    def __init__(
        self, issuer: Issuer, name: str, ttl: float = DEFAULT_TTL, *, clock: Clock | None = None
    ) -> None:
        super().__init__(issuer, name, ttl, clock)
        self.issuer = issuer

    def campaign(self, value: str, timeout: float | None = None) -> Term:
        """Block until this candidate leads and return its ``Term``.

        ``timeout``: as for ``acquire`` (``0`` tries once, ``None`` waits for ever),
        then ``AcquireTimeout``. ``value`` is what ``leader()`` shows (a short label such
        as ``host:port``, at most ``MAX_VALUE`` characters).
        """
        candidate = _CandidateFence(self, check_value(value))
        check_timeout(timeout)
        hold = candidate.hold(timeout)
        with _not_elected(self.name):
            hold.__enter__()
        return Term(hold, value)

    def leader(self) -> Leader | None:
        """Who leads now (``None``: nobody), read from the issuer; any process may ask."""
        return leader_of(self.issuer.status(self.name))  # type: ignore[attr-defined]

    def observe(self, poll: float = DEFAULT_POLL) -> Iterator[Leader | None]:
        """The leader now, then each change (a new term, or ``None`` once nobody leads),
        read every ``poll`` seconds; an endless iterator (stop with ``break``). On an
        issuer with a watch (``fencing.issuer.WatchesLease``: etcd, ZooKeeper, and Redis
        when the server publishes keyspace notifications) it reads again as soon as the
        engine reports a change, and ``poll`` only bounds the wait; on SQL it polls.
        A term shorter than that may be missed; changes are never reported out of order.
        An issuer that cannot be reached ends it with ``FenceUnavailable``: observe again
        (it starts with the leader then)."""
        seconds = _check_poll(poll)
        sleep = self.clock.sleep if self.clock is not None else _sleep
        watch = self.clock is None and isinstance(self.issuer, WatchesLease)
        return self._observe(Watching(self.issuer, self.name, sleep, watch), seconds)

    def _observe(self, port: Watching, poll: float) -> Iterator[Leader | None]:
        while True:
            yield run_sync(port.next_change(poll), port)

    def run(self, fn: Callable[[Term], T], value: str) -> T:
        """Campaign, run ``fn(term)`` while leading, and return what it returns (the
        term resigns). When the term is lost, ``term.lost`` turns True and its
        ``on_lost`` callbacks run: ``fn`` should then return (or raise ``LeaseLost``),
        and ``run`` campaigns again and calls ``fn`` with the new term. Any other error
        of ``fn`` resigns and propagates."""
        _check_fn(fn)
        check_value(value)
        while True:
            term = self.campaign(value)
            try:
                result = fn(term)
            except LeaseLost:
                if not term.lost:
                    term.resign()
                    raise
            except BaseException:
                term.resign()
                raise
            lost = term.lost
            term.resign()
            if not lost:
                return result


def _sleep(seconds: float) -> None:
    threading.Event().wait(seconds)


class AsyncTerm(BaseTerm):
    """One term of office in an ``AsyncElection`` (see ``Term``); ``await
    term.resign()``, ``async with`` resigns on exit."""

    _hold: AsyncHold

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until the term is lost (True), or ``timeout`` passes or it ends (False)."""
        return await self._hold.wait_lost(timeout)

    async def resign(self) -> None:
        """End the term now and hand over at once (see ``Term.resign``)."""
        with contextlib.suppress(LeaseLost):
            await self.__aexit__(None, None, None)

    async def __aenter__(self) -> AsyncTerm:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._ending():
            await self._hold.__aexit__(*exc_info)


class AsyncElection(BaseElection, Owner):
    """The asyncio ``Election`` (``fencing.aio.Election``), on an asyncio issuer with
    ``status`` (``fencing.issuer.AsyncInspects``); ``aclose`` as ``AsyncFence.aclose``."""

    _awaits = True

    def __init__(
        self,
        issuer: AsyncIssuer,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(issuer, name, ttl, clock)
        self.issuer = issuer

    async def campaign(
        self, value: str, timeout: float | None = None, *, cancel_on_loss: bool = False
    ) -> AsyncTerm:
        """Wait until this candidate leads and return its ``AsyncTerm`` (see
        ``Election.campaign``). ``cancel_on_loss=True``: the task that campaigned is
        cancelled when the term is lost, and leaving ``async with term`` raises
        ``LeaseLost`` from the ``CancelledError`` (see ``AsyncFence.hold``)."""
        candidate = _AsyncCandidateFence(self, check_value(value))
        check_timeout(timeout)
        hold = candidate.hold(timeout, cancel_on_loss=cancel_on_loss)
        with _not_elected(self.name):
            await hold.__aenter__()
        return AsyncTerm(hold, value)

    async def leader(self) -> Leader | None:
        """Who leads now (``None``: nobody), read from the issuer."""
        return leader_of(await self.issuer.status(self.name))  # type: ignore[attr-defined]

    def observe(self, poll: float = DEFAULT_POLL) -> AsyncGenerator[Leader | None, None]:
        """The asyncio ``Election.observe``: ``async for leader in election.observe():``
        (an async generator: ``aclose()`` it, or use ``contextlib.aclosing``, when you
        stop early)."""
        seconds = _check_poll(poll)
        watch = isinstance(self.issuer, AsyncWatchesLease)
        return self._observe(Watching(self.issuer, self.name, asyncio.sleep, watch), seconds)

    async def _observe(self, port: Watching, poll: float) -> AsyncGenerator[Leader | None, None]:
        while True:
            yield await run_async(port.next_change(poll), port)

    async def run(self, fn: Callable[[AsyncTerm], Awaitable[T]], value: str) -> T:
        """Campaign, run ``await fn(term)`` in a task of its own while leading, and return
        its result (the term resigns). When the term is lost that task is cancelled and
        ``run`` campaigns again, then calls ``fn`` with the new term. A cancellation of
        ``run`` itself, or any other error of ``fn``, resigns and propagates."""
        _check_fn(fn)
        check_value(value)
        while True:
            term = await self.campaign(value)
            try:
                task = asyncio.ensure_future(fn(term))
            except BaseException:  # fn(term) raised before its first await
                await term.resign()
                raise
            term.on_lost(_canceller(task))
            try:
                result = await task
            except asyncio.CancelledError:
                await term.resign()
                me = asyncio.current_task()
                if not term.lost or (me is not None and _cancelling(me)):
                    raise
                continue
            except LeaseLost:
                await term.resign()
                if not term.lost:
                    raise
                continue
            except BaseException:
                await term.resign()
                raise
            lost = term.lost
            await term.resign()
            if not lost:
                return result


def _canceller(task: asyncio.Future[Any]) -> OnLost:
    """An ``on_lost`` callback that cancels ``task``."""
    return lambda _: task.cancel()


def _cancelling(task: asyncio.Task[object]) -> bool:
    """Whether ``task`` itself is being cancelled (Python 3.11+; before: unknown, False)."""
    cancelling = getattr(task, "cancelling", None)
    return cancelling is not None and bool(cancelling())
