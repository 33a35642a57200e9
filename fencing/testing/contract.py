"""``fencing.testing.contract``: the promises every issuer and every mark keeps, as pytest
test classes to subclass.

A backend is done when its subclass of the contract passes. Subclass the class in a test
module and provide one fixture; pytest collects the inherited tests::

    import pytest
    import fencing
    from fencing.testing.contract import FenceContract, MakeFence

    class TestMyIssuer(FenceContract):
        @pytest.fixture
        def make_fence(self) -> MakeFence:
            issuer = MyIssuer()                  # one issuer: fences of a name share it
            return lambda name, ttl: fencing.Fence(issuer, name, ttl)

- ``FenceContract``: ``make_fence(name, ttl)`` returns a fresh ``fencing.Fence``. Every call
  with the same name must reach the same leases and tokens (the same issuer), as separate
  processes would.
- ``AsyncFenceContract``: the same promises for a ``fencing.AsyncFence``; its tests are
  coroutines (run them with pytest-asyncio in auto mode, or mark the class ``asyncio``).
  The fixture itself may be async (to open a client on the test's event loop).
- ``OperationsContract``: for an issuer with the operators' capabilities
  (``fencing.issuer.Inspects`` and ``ForceReleases``, behind ``fencing status``, ``list``
  and ``release --force``); the same ``make_fence`` fixture as ``FenceContract``.
- ``MarkContract``: ``make_mark()`` returns a fresh, empty high-water mark (a
  ``fencing._marks.Mark``: ``MemoryMark``, ``FileMark``, ``RedisMark`` or yours); its
  tests guard calls with ``fencing.guard(fn, mark=...)``.

What the fence contracts check: tokens strictly increase across release, expiry and a
crashed holder; a held lease excludes every other holder (``acquire(timeout=0)`` raises
``AcquireTimeout``); ``timeout`` 0 tries once, a number waits at least that long, ``None``
waits until the holder releases; renew extends the lease; renew and release act only for
the exact holder (``LeaseLost``; another fence's token is a ``ValueError``), also at the
issuer itself; an expired lease lets the next holder in with a higher token; ``hold()``
keeps the lease past its ttl and surfaces a lost lease (``LeaseLost`` on leaving); bad
input is refused with ``TypeError``/``ValueError`` and nothing taken; racing threads (or
tasks) are never two holders at once.

Where an engine's lease model genuinely differs, a subclass declares it with a capability
attribute (see ``LeaseTerms``) and the contract checks the behaviour the engine does
promise instead: no check is skipped silently. The timings are class attributes too;
they are only ever lower bounds or limits against hangs, never "fast enough" checks.

Names are unique per test (a uuid), so backends whose state outlives a test (a database,
a Redis server) need no cleanup between tests.

Assertion messages are written out, so failures read well without pytest's assertion
rewriting; for its detailed diffs as well, call
``pytest.register_assert_rewrite("fencing.testing.contract")`` in your ``conftest.py``
before importing this module.

Needs pytest (a test dependency). Imports the public package and the ``Mark`` protocol.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar

import pytest

from .. import (
    AcquireTimeout,
    AsyncFence,
    Fence,
    FenceToken,
    LeaseLost,
    StaleTokenError,
    guard,
)
from .._marks import Mark
from .._validate import MAX_TTL
from ..issuer import ForceReleases, Inspects

T = TypeVar("T")

#: ``make_fence(name, ttl)``: a fresh blocking fence of that name on the issuer under test.
MakeFence = Callable[[str, float], Fence]
#: ``make_fence(name, ttl)``: a fresh asyncio fence of that name on the issuer under test.
MakeAsyncFence = Callable[[str, float], AsyncFence]
#: ``make_mark()``: a fresh, empty high-water mark on the backend under test.
MakeMark = Callable[[], Mark]

#: Seconds by which a lower bound on elapsed time may be missed: issuers count lease
#: lifetimes in milliseconds on their own clock, the test reads ``time.monotonic``.
CLOCK_SLACK = 0.05

#: Refused fence names, with the error each must raise.
BAD_NAMES: list[tuple[Any, type[Exception]]] = [
    ("", ValueError),
    (5, TypeError),
    (True, TypeError),
    (None, TypeError),
    (b"name", TypeError),
    ("x" * 257, ValueError),
    ("nul\x00", ValueError),
    ("lone \ud800 surrogate", ValueError),  # cannot be encoded: refused before any I/O
]
#: Refused lease lifetimes (``ttl`` of a fence and of ``renew``).
BAD_TTLS: list[tuple[Any, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (MAX_TTL + 1, ValueError),  # beyond what Redis can renew (see fencing._validate)
    (True, TypeError),
    ("1", TypeError),
]


def _waiting(kind: str, patience: float) -> float | None:
    """The ``timeout`` of a waiter: "none" and "inf" wait for ever, else ``patience``."""
    return {"none": None, "inf": math.inf}.get(kind, patience)


#: Refused ``acquire`` timeouts.
BAD_TIMEOUTS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    (math.nan, ValueError),
    ("x", TypeError),
]
#: Refused tokens for ``renew`` and ``release``.
BAD_TOKENS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    (True, TypeError),
    (1.5, TypeError),
    ("1", TypeError),
    (None, TypeError),
]
#: Refused tokens for a guard: also those above the 64-bit range every mark stores.
BAD_MARK_TOKENS: list[tuple[Any, type[Exception]]] = [
    *BAD_TOKENS,
    (2**63, ValueError),
]


def _wrong_leases(token: int, holder: str) -> list[tuple[int, str]]:
    """(token, holder id) pairs that name the lease ``token``/``holder`` only in part."""
    return [(token, f"not-{holder}"), (token + 1, holder)]


def _millis(seconds: float) -> int:
    """Seconds as an issuer's ``ttl_ms``."""
    return round(seconds * 1000)


def _ids(table: Sequence[tuple[Any, type[Exception]]]) -> list[str]:
    return [repr(value) for value, _ in table]


def racing_tokens(me: int, racers: int, rounds: int) -> list[int]:
    """Racer ``me``'s tokens: climbing, interleaved with the others', and every fourth one
    replayed from five rounds ago (a paused holder waking up)."""
    return [
        max(0, i * racers + me - 5 * racers) if i % 4 == 3 else i * racers + me
        for i in range(rounds)
    ]


def assert_increasing(tokens: Sequence[int], what: str = "tokens") -> None:
    """Fail unless ``tokens`` are strictly increasing (so also unique)."""
    for earlier, later in itertools.pairwise(tokens):
        assert earlier < later, f"{what} not strictly increasing: {later} after {earlier}"


def assert_token_of(token: object, name: str) -> None:
    """Fail unless ``token`` is a non-negative ``FenceToken`` issued for fence ``name``."""
    assert isinstance(token, FenceToken), f"acquire returned {token!r}, not a FenceToken"
    assert token.name == name, f"token of fence {token.name!r}, expected {name!r}"
    assert token >= 0, f"negative token {token}"


class _Background(Generic[T]):
    """``fn()`` running in a daemon thread; ``result`` waits for it and re-raises its error."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._outcome: list[T] = []
        self._error: Exception | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(self._fn())
        except Exception as exc:
            self._error = exc

    def running(self) -> bool:
        return self.thread.is_alive()

    def result(self, patience: float) -> T:
        """Its return value; fails the test if it still runs after ``patience`` seconds."""
        self.thread.join(patience)
        assert not self.thread.is_alive(), f"a thread still runs after {patience}s"
        if self._error is not None:
            raise self._error
        return self._outcome[0]


def _run_threads(targets: Sequence[Callable[[], None]], patience: float) -> list[Exception]:
    """Run the targets in parallel threads and return what they raised."""
    calls = [_Background(target) for target in targets]
    errors: list[Exception] = []
    for call in calls:
        try:
            call.result(patience)
        except Exception as exc:
            errors.append(exc)
    return errors


class LeaseTerms:
    """Capabilities and timings of the engine under test, for ``FenceContract`` and
    ``AsyncFenceContract``. A subclass overrides those that differ for its engine."""

    #: Capability. True (the default): a lease that is neither renewed nor released ends
    #: ``ttl`` seconds after it was granted or last renewed, even though its holder lives
    #: (Redis ``PX``, the SQL ``expires_at`` column, the memory issuer); a holder that
    #: crashed is therefore followed by the next one once its ttl has passed. False: the
    #: engine keeps a lease for as long as its holder's session lives and ends it with the
    #: session (ZooKeeper's ephemeral nodes, whose sessions the client keeps alive by
    #: itself). The checks that wait for an expiry then assert the promise of that model
    #: instead: the unrenewed lease is still held well past its ttl, renew and release
    #: still work on it, and the next holder gets a higher token after the release.
    expires_while_held: ClassVar[bool] = True

    #: Seconds: the ttl of a lease that a test lets expire (and the wait of the
    #: ``timeout`` checks). Tests wait about twice this long.
    short_ttl: ClassVar[float] = 0.3
    #: Seconds: the ttl of a lease that must outlive a test step.
    long_ttl: ClassVar[float] = 5.0
    #: Seconds: the ttl of a lease kept alive by ``hold()``, which renews it every ttl/3;
    #: a process stalled for 2/3 of it loses the lease, so it is generous.
    renewal_ttl: ClassVar[float] = 1.0
    #: Seconds: how long something that must happen is waited for before the test fails.
    #: A limit against hangs, never a timing assertion.
    patience: ClassVar[float] = 30.0
    #: The racing check: this many threads (or tasks) each take the lease this many times.
    racers: ClassVar[int] = 8
    rounds: ClassVar[int] = 20

    @staticmethod
    def fresh_name(what: str) -> str:
        """A fence name no other test uses, so state left on a server never interferes."""
        return f"contract:{what}:{uuid.uuid4().hex}"


class FenceContract(LeaseTerms):
    """The promises of a blocking issuer, checked through ``fencing.Fence``.

    Subclass it (the subclass's name must start with ``Test``) and provide the
    ``make_fence`` fixture: ``make_fence(name, ttl)`` returns a fresh ``Fence`` of that
    name; fences of one name must share leases and tokens.
    """

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Provided by the subclass: ``make_fence(name, ttl)`` -> a fresh ``Fence``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    # -- tokens ------------------------------------------------------------------------

    def test_tokens_increase_across_release(self, make_fence: MakeFence) -> None:
        """Each acquisition, by any fence object of the name, gets a larger token."""
        name = self.fresh_name("release")
        one, two = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        tokens: list[int] = []
        for fence in (one, two, one, one, two):
            token = fence.acquire(timeout=0)
            assert_token_of(token, name)
            fence.release(token)
            tokens.append(token)
        assert_increasing(tokens)

    def test_expired_lease_lets_the_next_holder_in(self, make_fence: MakeFence) -> None:
        """Past its ttl an unrenewed lease goes to the next holder with a higher token,
        and its old holder can neither renew nor release it any more."""
        name = self.fresh_name("expiry")
        old, new = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        granted = time.monotonic()
        token = old.acquire(timeout=0)
        if not self.expires_while_held:
            self._assert_still_held_past_ttl(make_fence, name)
            old.renew(token)
            old.release(token)
            newer = new.acquire(timeout=0)
            assert newer > token, f"token {newer} after {token}"
            new.release(newer)
            return
        newer = new.acquire(timeout=self.patience)
        waited = time.monotonic() - granted
        assert waited >= self.short_ttl - CLOCK_SLACK, (
            f"a {self.short_ttl}s lease ended in {waited}s"
        )
        assert newer > token, f"token {newer} after the expired {token}"
        with pytest.raises(LeaseLost):
            old.renew(token)
        with pytest.raises(LeaseLost):
            old.release(token)
        with pytest.raises(AcquireTimeout):  # the old holder's attempts left the new lease
            make_fence(name, self.long_ttl).acquire(timeout=0)
        new.renew(newer)
        new.release(newer)

    def test_crashed_holder_is_followed_by_a_higher_token(self, make_fence: MakeFence) -> None:
        """A holder that dies without releasing (a thread that ends holding the lease)
        blocks others only until its lease expires; the next token is higher."""
        name = self.fresh_name("crash")

        def crash() -> tuple[Fence, FenceToken]:
            fence = make_fence(name, self.short_ttl)
            return fence, fence.acquire(timeout=0)  # and never a release

        ghost, token = _Background(crash).result(self.patience)
        successor = make_fence(name, self.long_ttl)
        if self.expires_while_held:
            newer = successor.acquire(timeout=self.patience)
        else:
            self._assert_still_held_past_ttl(make_fence, name)
            ghost.release(token)  # what the end of the dead holder's session does
            newer = successor.acquire(timeout=0)
        assert newer > token, f"token {newer} after the crashed holder's {token}"
        successor.release(newer)

    def _assert_still_held_past_ttl(self, make_fence: MakeFence, name: str) -> None:
        """For engines whose leases live as long as their holder's session."""
        time.sleep(2 * self.short_ttl)
        with pytest.raises(AcquireTimeout):
            make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- exclusion and timeouts --------------------------------------------------------

    def test_lease_is_exclusive_and_timeout_zero_tries_once(self, make_fence: MakeFence) -> None:
        """While a lease is held, ``acquire(timeout=0)`` by anyone, the holder's own fence
        object included, raises ``AcquireTimeout`` and takes nothing from the holder."""
        name = self.fresh_name("exclusive")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        with pytest.raises(AcquireTimeout) as info:
            other.acquire(timeout=0)
        assert isinstance(info.value, TimeoutError) and info.value.name == name
        with pytest.raises(AcquireTimeout):
            holder.acquire(timeout=0)  # a fence is a lock, not a reentrant one
        holder.renew(token)
        holder.release(token)
        newer = other.acquire(timeout=0)
        assert newer > token, f"token {newer} after {token}"
        other.release(newer)

    def test_timeout_waits_at_least_that_long(self, make_fence: MakeFence) -> None:
        """``acquire(timeout=t)`` on a held lease gives up with ``AcquireTimeout`` only
        after ``t`` seconds."""
        name = self.fresh_name("timeout")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        wait = self.short_ttl
        started = time.monotonic()
        with pytest.raises(AcquireTimeout) as info:
            other.acquire(timeout=wait)
        waited = time.monotonic() - started
        assert waited >= wait - CLOCK_SLACK, f"gave up after {waited}s of a {wait}s timeout"
        assert info.value.timeout == wait
        holder.renew(token)  # the waiter took nothing from the holder
        holder.release(token)

    @pytest.mark.parametrize("timeout", ["none", "inf", "number"])
    def test_waiter_gets_the_lease_when_the_holder_releases(
        self, make_fence: MakeFence, timeout: str
    ) -> None:
        """``acquire(timeout=None)`` (or ``math.inf``, or a long enough number) waits while
        the lease is held and takes it, with a higher token, once the holder releases."""
        name = self.fresh_name(f"wait-{timeout}")
        holder, waiter = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        wait = _Background(lambda: waiter.acquire(timeout=_waiting(timeout, self.patience)))
        time.sleep(self.short_ttl)
        assert wait.running(), "acquire returned while the lease was held"
        holder.release(token)
        newer = wait.result(self.patience)
        assert newer > token, f"token {newer} after {token}"
        waiter.release(newer)

    # -- renew and release -------------------------------------------------------------

    def test_renew_extends_the_lease(self, make_fence: MakeFence) -> None:
        """After ``renew(token, ttl)`` the lease outlives the ttl it was granted with."""
        name = self.fresh_name("renew")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        token = fence.acquire(timeout=0)
        fence.renew(token, ttl=self.long_ttl)
        time.sleep(2 * self.short_ttl)  # past the ttl it was granted with
        with pytest.raises(AcquireTimeout):
            other.acquire(timeout=0)
        fence.renew(token)
        fence.release(token)
        newer = other.acquire(timeout=0)
        assert newer > token, f"token {newer} after {token}"
        other.release(newer)

    def test_renew_and_release_only_by_the_exact_holder(self, make_fence: MakeFence) -> None:
        """Renew and release act only for the lease's holder: another fence object, a
        token never granted, a released lease or someone else's lease raise
        ``LeaseLost``; and the issuer itself refuses a wrong holder id or token."""
        name = self.fresh_name("holder")
        holder, stranger = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = holder.acquire(timeout=0)
        with pytest.raises(LeaseLost):
            stranger.renew(token)  # another fence object never held that lease
        with pytest.raises(LeaseLost):
            stranger.release(token)
        with pytest.raises(LeaseLost):
            holder.renew(token + 1)  # a token this fence was never granted
        with pytest.raises(LeaseLost):
            holder.release(token + 1)
        with pytest.raises(AcquireTimeout):  # none of those calls changed the lease
            stranger.acquire(timeout=0)
        holder.renew(int(token))  # a plain int names the same lease
        holder.release(token)
        with pytest.raises(LeaseLost):
            holder.release(token)
        with pytest.raises(LeaseLost):
            holder.renew(token)
        newer = stranger.acquire(timeout=0)
        with pytest.raises(LeaseLost):
            holder.renew(newer)
        with pytest.raises(LeaseLost):
            holder.release(newer)
        stranger.renew(newer)
        stranger.release(newer)

    def test_issuer_compares_holder_and_token(self, make_fence: MakeFence) -> None:
        """At the issuer itself, renew and release need both the holder id and the token
        of the lease: either one alone changes nothing."""
        name = self.fresh_name("issuer")
        fence = make_fence(name, self.long_ttl)
        issuer = fence.issuer
        token = issuer.try_acquire(name, "holder-a", _millis(self.long_ttl))
        assert isinstance(token, int), f"try_acquire on a free lease returned {token!r}"
        for wrong_token, wrong_holder in _wrong_leases(token, "holder-a"):
            assert issuer.renew(name, wrong_token, wrong_holder, 1) is False
            assert issuer.release(name, wrong_token, wrong_holder) is False
        time.sleep(0.01)  # a wrongly applied 1 ms renew would have ended the lease by now
        with pytest.raises(AcquireTimeout):
            fence.acquire(timeout=0)
        assert issuer.renew(name, token, "holder-a", _millis(self.long_ttl)) is True
        assert issuer.release(name, token, "holder-a") is True
        newer = fence.acquire(timeout=0)
        assert newer > token, f"token {newer} after {token}"
        fence.release(newer)

    def test_token_of_another_fence_is_refused(self, make_fence: MakeFence) -> None:
        """A token issued for another fence name raises ``ValueError`` and changes nothing."""
        name, elsewhere = self.fresh_name("mine"), self.fresh_name("theirs")
        fence, theirs = make_fence(name, self.long_ttl), make_fence(elsewhere, self.long_ttl)
        token, foreign = fence.acquire(timeout=0), theirs.acquire(timeout=0)
        for act in (fence.renew, fence.release):
            with pytest.raises(ValueError):
                act(foreign)
            with pytest.raises(ValueError):
                act(FenceToken(int(token), elsewhere))
        with pytest.raises(AcquireTimeout):
            make_fence(elsewhere, self.long_ttl).acquire(timeout=0)
        fence.renew(token)
        theirs.renew(foreign)
        fence.release(token)
        theirs.release(foreign)

    # -- hold --------------------------------------------------------------------------

    def test_hold_keeps_the_lease_past_its_ttl(self, make_fence: MakeFence) -> None:
        """``hold()`` renews in the background: the lease outlives several ttls, the hold
        is not lost, and leaving releases it."""
        name = self.fresh_name("hold")
        fence, other = make_fence(name, self.renewal_ttl), make_fence(name, self.long_ttl)
        hold = fence.hold()
        with hold as token:
            assert_token_of(token, name)
            assert hold.token == token
            time.sleep(2.2 * self.renewal_ttl)
            with pytest.raises(AcquireTimeout):
                other.acquire(timeout=0)
            assert not hold.lost
        assert not hold.lost
        newer = other.acquire(timeout=0)  # released on leaving
        assert newer > token, f"token {newer} after {token}"
        other.release(newer)

    def test_hold_surfaces_a_lost_lease(self, make_fence: MakeFence) -> None:
        """A hold whose lease expired and went to another holder raises ``LeaseLost`` on
        leaving, and leaves the new holder's lease alone; a later hold starts afresh."""
        name = self.fresh_name("lost")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        hold = fence.hold(auto_renew=False)
        if not self.expires_while_held:
            with hold:
                self._assert_still_held_past_ttl(make_fence, name)
            assert not hold.lost
            return
        with pytest.raises(LeaseLost) as info, hold as token:
            newer = other.acquire(timeout=self.patience)  # after the expiry
        assert info.value.token == token
        assert newer > token, f"token {newer} after {token}"
        with pytest.raises(AcquireTimeout):  # leaving did not touch the new lease
            make_fence(name, self.long_ttl).acquire(timeout=0)
        other.release(newer)
        again = fence.hold()
        with again:
            assert not again.lost
        assert not again.lost

    # -- bad input ---------------------------------------------------------------------

    @pytest.mark.parametrize(("name", "error"), BAD_NAMES, ids=_ids(BAD_NAMES))
    def test_bad_name_is_refused(
        self, make_fence: MakeFence, name: Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            make_fence(name, self.long_ttl)

    @pytest.mark.parametrize(("ttl", "error"), BAD_TTLS, ids=_ids(BAD_TTLS))
    def test_bad_ttl_is_refused_with_nothing_taken(
        self, make_fence: MakeFence, ttl: Any, error: type[Exception]
    ) -> None:
        """A bad ttl is refused by the fence and by ``renew``; the lease stays as it was."""
        name = self.fresh_name("ttl")
        with pytest.raises(error):
            make_fence(name, ttl)
        fence = make_fence(name, self.long_ttl)
        token = fence.acquire(timeout=0)
        with pytest.raises(error):
            fence.renew(token, ttl=ttl)
        with pytest.raises(AcquireTimeout):
            make_fence(name, self.long_ttl).acquire(timeout=0)
        fence.release(token)
        make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("timeout", "error"), BAD_TIMEOUTS, ids=_ids(BAD_TIMEOUTS))
    def test_bad_timeout_is_refused_with_nothing_taken(
        self, make_fence: MakeFence, timeout: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("timeout")
        fence = make_fence(name, self.long_ttl)
        with pytest.raises(error):
            fence.acquire(timeout=timeout)
        make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("token", "error"), BAD_TOKENS, ids=_ids(BAD_TOKENS))
    def test_bad_token_is_refused_with_nothing_changed(
        self, make_fence: MakeFence, token: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("token")
        fence = make_fence(name, self.long_ttl)
        held = fence.acquire(timeout=0)
        with pytest.raises(error):
            fence.renew(token)
        with pytest.raises(error):
            fence.release(token)
        with pytest.raises(AcquireTimeout):
            make_fence(name, self.long_ttl).acquire(timeout=0)
        fence.release(held)
        make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- racing ------------------------------------------------------------------------

    def test_racing_threads_are_never_two_holders(self, make_fence: MakeFence) -> None:
        """Threads that take and release one lease over and over are never inside at the
        same time, and their tokens increase in the order they got the lease. Pairs of
        threads share a fence object, as threads may share a ``threading.Lock``."""
        name = self.fresh_name("race")
        lock = threading.Lock()
        inside, most = 0, 0
        order: list[int] = []

        fences = [make_fence(name, self.long_ttl) for _ in range((self.racers + 1) // 2)]

        def race(fence: Fence) -> None:
            nonlocal inside, most
            for _ in range(self.rounds):
                token = fence.acquire(timeout=self.patience)
                with lock:
                    inside += 1
                    most = max(most, inside)
                    order.append(token)
                time.sleep(0.001)  # a window for a second holder to show
                with lock:
                    inside -= 1
                fence.release(token)

        racers = [partial(race, fences[i % len(fences)]) for i in range(self.racers)]
        errors = _run_threads(racers, self.patience * 4)
        assert most == 1, f"{most} holders at once"
        assert not errors, f"racers failed: {errors!r}"
        assert len(order) == self.racers * self.rounds
        assert_increasing(order, "tokens in acquisition order")


class AsyncFenceContract(LeaseTerms):
    """The promises of an asyncio issuer, checked through ``fencing.AsyncFence``.

    The same checks as ``FenceContract``, as coroutines, with tasks where it uses
    threads. Provide ``make_fence(name, ttl)`` returning a fresh ``AsyncFence``.
    """

    @pytest.fixture
    def make_fence(self) -> MakeAsyncFence:
        """Provided by the subclass: ``make_fence(name, ttl)`` -> a fresh ``AsyncFence``."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    # -- tokens ------------------------------------------------------------------------

    async def test_tokens_increase_across_release(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_tokens_increase_across_release``."""
        name = self.fresh_name("release")
        one, two = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        tokens: list[int] = []
        for fence in (one, two, one, one, two):
            token = await fence.acquire(timeout=0)
            assert_token_of(token, name)
            await fence.release(token)
            tokens.append(token)
        assert_increasing(tokens)

    async def test_expired_lease_lets_the_next_holder_in(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_expired_lease_lets_the_next_holder_in``."""
        name = self.fresh_name("expiry")
        old, new = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        granted = time.monotonic()
        token = await old.acquire(timeout=0)
        if not self.expires_while_held:
            await self._assert_still_held_past_ttl(make_fence, name)
            await old.renew(token)
            await old.release(token)
            newer = await new.acquire(timeout=0)
            assert newer > token, f"token {newer} after {token}"
            await new.release(newer)
            return
        newer = await new.acquire(timeout=self.patience)
        waited = time.monotonic() - granted
        assert waited >= self.short_ttl - CLOCK_SLACK, (
            f"a {self.short_ttl}s lease ended in {waited}s"
        )
        assert newer > token, f"token {newer} after the expired {token}"
        with pytest.raises(LeaseLost):
            await old.renew(token)
        with pytest.raises(LeaseLost):
            await old.release(token)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await new.renew(newer)
        await new.release(newer)

    async def test_crashed_holder_is_followed_by_a_higher_token(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """See ``FenceContract.test_crashed_holder_is_followed_by_a_higher_token``; here
        the holder is a task that ends holding the lease."""
        name = self.fresh_name("crash")

        async def crash() -> tuple[AsyncFence, FenceToken]:
            fence = make_fence(name, self.short_ttl)
            return fence, await fence.acquire(timeout=0)  # and never a release

        ghost, token = await asyncio.wait_for(asyncio.create_task(crash()), self.patience)
        successor = make_fence(name, self.long_ttl)
        if self.expires_while_held:
            newer = await successor.acquire(timeout=self.patience)
        else:
            await self._assert_still_held_past_ttl(make_fence, name)
            await ghost.release(token)  # what the end of the dead holder's session does
            newer = await successor.acquire(timeout=0)
        assert newer > token, f"token {newer} after the crashed holder's {token}"
        await successor.release(newer)

    async def _assert_still_held_past_ttl(self, make_fence: MakeAsyncFence, name: str) -> None:
        await asyncio.sleep(2 * self.short_ttl)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- exclusion and timeouts --------------------------------------------------------

    async def test_lease_is_exclusive_and_timeout_zero_tries_once(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """See ``FenceContract.test_lease_is_exclusive_and_timeout_zero_tries_once``."""
        name = self.fresh_name("exclusive")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        with pytest.raises(AcquireTimeout) as info:
            await other.acquire(timeout=0)
        assert isinstance(info.value, TimeoutError) and info.value.name == name
        with pytest.raises(AcquireTimeout):
            await holder.acquire(timeout=0)
        await holder.renew(token)
        await holder.release(token)
        newer = await other.acquire(timeout=0)
        assert newer > token, f"token {newer} after {token}"
        await other.release(newer)

    async def test_timeout_waits_at_least_that_long(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_timeout_waits_at_least_that_long``."""
        name = self.fresh_name("timeout")
        holder, other = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        wait = self.short_ttl
        started = time.monotonic()
        with pytest.raises(AcquireTimeout) as info:
            await other.acquire(timeout=wait)
        waited = time.monotonic() - started
        assert waited >= wait - CLOCK_SLACK, f"gave up after {waited}s of a {wait}s timeout"
        assert info.value.timeout == wait
        await holder.renew(token)
        await holder.release(token)

    @pytest.mark.parametrize("timeout", ["none", "inf", "number"])
    async def test_waiter_gets_the_lease_when_the_holder_releases(
        self, make_fence: MakeAsyncFence, timeout: str
    ) -> None:
        """See ``FenceContract.test_waiter_gets_the_lease_when_the_holder_releases``."""
        name = self.fresh_name(f"wait-{timeout}")
        holder, waiter = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        wait = asyncio.create_task(waiter.acquire(timeout=_waiting(timeout, self.patience)))
        await asyncio.sleep(self.short_ttl)
        assert not wait.done(), f"acquire returned while the lease was held: {wait}"
        await holder.release(token)
        newer = await asyncio.wait_for(wait, self.patience)
        assert newer > token, f"token {newer} after {token}"
        await waiter.release(newer)

    # -- renew and release -------------------------------------------------------------

    async def test_renew_extends_the_lease(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_renew_extends_the_lease``."""
        name = self.fresh_name("renew")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        token = await fence.acquire(timeout=0)
        await fence.renew(token, ttl=self.long_ttl)
        await asyncio.sleep(2 * self.short_ttl)
        with pytest.raises(AcquireTimeout):
            await other.acquire(timeout=0)
        await fence.renew(token)
        await fence.release(token)
        newer = await other.acquire(timeout=0)
        assert newer > token, f"token {newer} after {token}"
        await other.release(newer)

    async def test_renew_and_release_only_by_the_exact_holder(
        self, make_fence: MakeAsyncFence
    ) -> None:
        """See ``FenceContract.test_renew_and_release_only_by_the_exact_holder``."""
        name = self.fresh_name("holder")
        holder, stranger = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        token = await holder.acquire(timeout=0)
        with pytest.raises(LeaseLost):
            await stranger.renew(token)
        with pytest.raises(LeaseLost):
            await stranger.release(token)
        with pytest.raises(LeaseLost):
            await holder.renew(token + 1)
        with pytest.raises(LeaseLost):
            await holder.release(token + 1)
        with pytest.raises(AcquireTimeout):
            await stranger.acquire(timeout=0)
        await holder.renew(int(token))
        await holder.release(token)
        with pytest.raises(LeaseLost):
            await holder.release(token)
        with pytest.raises(LeaseLost):
            await holder.renew(token)
        newer = await stranger.acquire(timeout=0)
        with pytest.raises(LeaseLost):
            await holder.renew(newer)
        with pytest.raises(LeaseLost):
            await holder.release(newer)
        await stranger.renew(newer)
        await stranger.release(newer)

    async def test_issuer_compares_holder_and_token(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_issuer_compares_holder_and_token``."""
        name = self.fresh_name("issuer")
        fence = make_fence(name, self.long_ttl)
        issuer = fence.issuer
        token = await issuer.try_acquire(name, "holder-a", _millis(self.long_ttl))
        assert isinstance(token, int), f"try_acquire on a free lease returned {token!r}"
        for wrong_token, wrong_holder in _wrong_leases(token, "holder-a"):
            assert await issuer.renew(name, wrong_token, wrong_holder, 1) is False
            assert await issuer.release(name, wrong_token, wrong_holder) is False
        await asyncio.sleep(0.01)
        with pytest.raises(AcquireTimeout):
            await fence.acquire(timeout=0)
        assert await issuer.renew(name, token, "holder-a", _millis(self.long_ttl)) is True
        assert await issuer.release(name, token, "holder-a") is True
        newer = await fence.acquire(timeout=0)
        assert newer > token, f"token {newer} after {token}"
        await fence.release(newer)

    async def test_token_of_another_fence_is_refused(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_token_of_another_fence_is_refused``."""
        name, elsewhere = self.fresh_name("mine"), self.fresh_name("theirs")
        fence, theirs = make_fence(name, self.long_ttl), make_fence(elsewhere, self.long_ttl)
        token, foreign = await fence.acquire(timeout=0), await theirs.acquire(timeout=0)
        for act in (fence.renew, fence.release):
            with pytest.raises(ValueError):
                await act(foreign)
            with pytest.raises(ValueError):
                await act(FenceToken(int(token), elsewhere))
        with pytest.raises(AcquireTimeout):
            await make_fence(elsewhere, self.long_ttl).acquire(timeout=0)
        await fence.renew(token)
        await theirs.renew(foreign)
        await fence.release(token)
        await theirs.release(foreign)

    # -- hold --------------------------------------------------------------------------

    async def test_hold_keeps_the_lease_past_its_ttl(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_hold_keeps_the_lease_past_its_ttl``; renewal is a task."""
        name = self.fresh_name("hold")
        fence, other = make_fence(name, self.renewal_ttl), make_fence(name, self.long_ttl)
        hold = fence.hold()
        async with hold as token:
            assert_token_of(token, name)
            assert hold.token == token
            await asyncio.sleep(2.2 * self.renewal_ttl)
            with pytest.raises(AcquireTimeout):
                await other.acquire(timeout=0)
            assert not hold.lost
        assert not hold.lost
        newer = await other.acquire(timeout=0)
        assert newer > token, f"token {newer} after {token}"
        await other.release(newer)

    async def test_hold_surfaces_a_lost_lease(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_hold_surfaces_a_lost_lease``."""
        name = self.fresh_name("lost")
        fence, other = make_fence(name, self.short_ttl), make_fence(name, self.long_ttl)
        hold = fence.hold(auto_renew=False)
        if not self.expires_while_held:
            async with hold:
                await self._assert_still_held_past_ttl(make_fence, name)
            assert not hold.lost
            return
        with pytest.raises(LeaseLost) as info:
            async with hold as token:
                newer = await other.acquire(timeout=self.patience)
        assert info.value.token == token
        assert newer > token, f"token {newer} after {token}"
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await other.release(newer)
        again = fence.hold()
        async with again:
            assert not again.lost
        assert not again.lost

    # -- bad input ---------------------------------------------------------------------

    @pytest.mark.parametrize(("name", "error"), BAD_NAMES, ids=_ids(BAD_NAMES))
    async def test_bad_name_is_refused(
        self, make_fence: MakeAsyncFence, name: Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            make_fence(name, self.long_ttl)

    @pytest.mark.parametrize(("ttl", "error"), BAD_TTLS, ids=_ids(BAD_TTLS))
    async def test_bad_ttl_is_refused_with_nothing_taken(
        self, make_fence: MakeAsyncFence, ttl: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("ttl")
        with pytest.raises(error):
            make_fence(name, ttl)
        fence = make_fence(name, self.long_ttl)
        token = await fence.acquire(timeout=0)
        with pytest.raises(error):
            await fence.renew(token, ttl=ttl)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await fence.release(token)
        await make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("timeout", "error"), BAD_TIMEOUTS, ids=_ids(BAD_TIMEOUTS))
    async def test_bad_timeout_is_refused_with_nothing_taken(
        self, make_fence: MakeAsyncFence, timeout: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("timeout")
        fence = make_fence(name, self.long_ttl)
        with pytest.raises(error):
            await fence.acquire(timeout=timeout)
        await make_fence(name, self.long_ttl).acquire(timeout=0)

    @pytest.mark.parametrize(("token", "error"), BAD_TOKENS, ids=_ids(BAD_TOKENS))
    async def test_bad_token_is_refused_with_nothing_changed(
        self, make_fence: MakeAsyncFence, token: Any, error: type[Exception]
    ) -> None:
        name = self.fresh_name("token")
        fence = make_fence(name, self.long_ttl)
        held = await fence.acquire(timeout=0)
        with pytest.raises(error):
            await fence.renew(token)
        with pytest.raises(error):
            await fence.release(token)
        with pytest.raises(AcquireTimeout):
            await make_fence(name, self.long_ttl).acquire(timeout=0)
        await fence.release(held)
        await make_fence(name, self.long_ttl).acquire(timeout=0)

    # -- racing ------------------------------------------------------------------------

    async def test_racing_tasks_are_never_two_holders(self, make_fence: MakeAsyncFence) -> None:
        """See ``FenceContract.test_racing_threads_are_never_two_holders``; the tasks
        yield to each other inside the lease, where a second holder would show."""
        name = self.fresh_name("race")
        inside, most = 0, 0
        order: list[int] = []

        fences = [make_fence(name, self.long_ttl) for _ in range((self.racers + 1) // 2)]

        async def race(fence: AsyncFence) -> None:
            nonlocal inside, most
            for _ in range(self.rounds):
                token = await fence.acquire(timeout=self.patience)
                inside += 1
                most = max(most, inside)
                order.append(token)
                await asyncio.sleep(0.001)
                inside -= 1
                await fence.release(token)

        tasks = [asyncio.create_task(race(fences[i % len(fences)])) for i in range(self.racers)]
        done, pending = await asyncio.wait(tasks, timeout=self.patience * 4)
        for task in pending:
            task.cancel()
        assert not pending, f"{len(pending)} racing tasks still run after {self.patience * 4}s"
        errors = [task.exception() for task in done if task.exception() is not None]
        assert most == 1, f"{most} holders at once"
        assert not errors, f"racers failed: {errors!r}"
        assert len(order) == self.racers * self.rounds
        assert_increasing(order, "tokens in acquisition order")


class MarkContract:
    """The promises of a high-water mark, checked through ``fencing.guard``.

    Subclass it and provide the ``make_mark`` fixture: ``make_mark()`` returns a fresh,
    empty mark. Tokens below the mark are refused (``StaleTokenError``, the guarded
    function not called), equal ones accepted, higher ones raise the mark, which stays
    raised when the guarded call fails; bad tokens are refused with nothing changed;
    racing threads never get a lower token admitted after a higher one was. ``claim``
    raises the mark without calling anything, refuses a lower token the same way, is a
    no-op for the mark's own token, and waits for a running guarded call exactly when
    the mark serializes calls.
    """

    #: Capability. True (the default): the mark holds its lock across check, raise and
    #: the guarded call, so guarded calls never overlap and run in token order
    #: (``MemoryMark``, ``FileMark``). False: only check-and-raise is atomic and the call
    #: runs outside it (``RedisMark``); the contract then asserts that model: a newer
    #: token is admitted and its call runs while an older admitted call still runs, and
    #: the older token is refused from then on.
    serializes_calls: ClassVar[bool] = True

    #: The racing check: this many threads each guard this many calls.
    racers: ClassVar[int] = 6
    rounds: ClassVar[int] = 40
    #: Seconds: a limit against hangs, never a timing assertion.
    patience: ClassVar[float] = 30.0

    @pytest.fixture
    def make_mark(self) -> MakeMark:
        """Provided by the subclass: ``make_mark()`` -> a fresh, empty mark."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_mark fixture")

    def test_fresh_mark_is_empty(self, make_mark: MakeMark) -> None:
        assert make_mark().current is None

    def test_lower_token_is_refused_without_calling(self, make_mark: MakeMark) -> None:
        calls: list[str] = []
        write = guard(calls.append, mark=make_mark(), name="ledger")
        write(34, "fresh")
        with pytest.raises(StaleTokenError) as info:
            write(33, "stale")
        assert (info.value.token, info.value.current, info.value.resource) == (33, 34, "ledger")
        assert calls == ["fresh"], f"the guarded function ran for a stale token: {calls}"
        assert write.mark.current == 34

    def test_equal_token_is_accepted_and_higher_raises_the_mark(self, make_mark: MakeMark) -> None:
        """The same lease may call again; a newer lease's token becomes the mark."""
        calls: list[str] = []
        write = guard(calls.append, mark=make_mark())
        write(0, "first")
        write(5, "a")
        write(5, "same lease again")
        write(FenceToken(6, "fence"), "newer")
        assert calls == ["first", "a", "same lease again", "newer"]
        assert write.mark.current == 6
        with pytest.raises(StaleTokenError):
            write(5, "superseded")
        assert calls[-1] == "newer"

    @pytest.mark.parametrize(
        ("mark", "token", "admitted"),
        [
            (9, 10, True),  # more digits: higher
            (10, 9, False),  # fewer digits: lower, although "9" > "10" as text
            (2**62 + 1, 2**62, False),  # equal as doubles: must compare exactly
            (2**62, 2**62 + 1, True),
            (2**63 - 2, 2**63 - 1, True),
            (2**63 - 1, 2**63 - 1, True),
            (0, 0, True),
        ],
    )
    def test_tokens_compare_exactly(
        self, make_mark: MakeMark, mark: int, token: int, admitted: bool
    ) -> None:
        """Marks compare 64-bit tokens as integers: not as text, not as floats."""
        calls: list[int] = []
        guarded = guard(calls.append, mark=make_mark())
        guarded(mark, mark)
        if admitted:
            guarded(token, token)
            assert calls == [mark, token] and guarded.mark.current == token
        else:
            with pytest.raises(StaleTokenError):
                guarded(token, token)
            assert calls == [mark] and guarded.mark.current == mark

    def test_mark_stays_raised_when_the_call_fails(self, make_mark: MakeMark) -> None:
        """A token is admitted before the call: if the call fails, the same token may
        retry and a lower one stays refused (its lease was superseded anyway)."""
        attempts: list[int] = []

        def flaky(n: int) -> int:
            attempts.append(n)
            if n == 1:
                raise OSError("disk full")
            return n

        guarded = guard(flaky, mark=make_mark())
        guarded(5, 0)
        with pytest.raises(OSError):
            guarded(7, 1)
        assert guarded.mark.current == 7
        assert guarded(7, 2) == 2
        with pytest.raises(StaleTokenError):
            guarded(6, 3)
        assert attempts == [0, 1, 2]

    @pytest.mark.parametrize(("token", "error"), BAD_MARK_TOKENS, ids=_ids(BAD_MARK_TOKENS))
    def test_bad_token_is_refused_with_nothing_changed(
        self, make_mark: MakeMark, token: Any, error: type[Exception]
    ) -> None:
        calls: list[int] = []
        guarded = guard(calls.append, mark=make_mark())
        with pytest.raises(error):
            guarded(token, 1)
        assert calls == [] and guarded.mark.current is None
        guarded(3, 3)
        with pytest.raises(error):
            guarded(token, 2)
        assert calls == [3] and guarded.mark.current == 3

    def test_claim_raises_the_mark_without_calling(self, make_mark: MakeMark) -> None:
        """The read-then-write window: once the new holder has claimed (before reading),
        the old holder's write that would land before the new holder's is refused."""
        calls: list[str] = []
        write = guard(calls.append, mark=make_mark(), name="ledger")
        write(3, "old holder, earlier")
        write.claim(5)
        assert write.mark.current == 5, f"claim(5) left the mark at {write.mark.current}"
        assert calls == ["old holder, earlier"], f"claim called the guarded function: {calls}"
        with pytest.raises(StaleTokenError) as info:
            write(4, "stale, between the read and the write")
        assert (info.value.token, info.value.current, info.value.resource) == (4, 5, "ledger")
        write(5, "new holder, computed from its read")
        assert calls == ["old holder, earlier", "new holder, computed from its read"]

    def test_claim_below_the_mark_is_refused_and_equal_is_a_no_op(
        self, make_mark: MakeMark
    ) -> None:
        mark = make_mark()
        mark.claim(7)
        mark.claim(FenceToken(7, "fence"))  # the same lease again
        assert mark.current == 7
        with pytest.raises(StaleTokenError) as info:
            mark.claim(6, "orders")
        assert (info.value.token, info.value.current, info.value.resource) == (6, 7, "orders")
        assert mark.current == 7, "a refused claim changed the mark"
        mark.claim(2**63 - 1)
        assert mark.current == 2**63 - 1

    @pytest.mark.parametrize(("token", "error"), BAD_MARK_TOKENS, ids=_ids(BAD_MARK_TOKENS))
    def test_claim_with_a_bad_token_changes_nothing(
        self, make_mark: MakeMark, token: Any, error: type[Exception]
    ) -> None:
        mark = make_mark()
        with pytest.raises(error):
            mark.claim(token)
        assert mark.current is None
        mark.claim(3)
        with pytest.raises(error):
            guard(print, mark=mark).claim(token)
        assert mark.current == 3

    def test_claim_waits_for_a_running_call_or_not_as_declared(self, make_mark: MakeMark) -> None:
        """With ``serializes_calls`` a claim is ordered after a guarded call that runs (so
        the claimer's read sees that call's effect); without, it returns at once."""
        started, proceed = threading.Event(), threading.Event()
        order: list[str] = []

        def work() -> None:
            order.append("call starts")
            started.set()
            proceed.wait(self.patience)
            order.append("call ends")

        guarded = guard(work, mark=make_mark())
        call = _Background(lambda: guarded(5))
        assert started.wait(self.patience)

        def claim() -> None:
            guarded.claim(6)
            order.append("claimed")

        claiming = _Background(claim)
        if self.serializes_calls:
            time.sleep(0.2)
            assert claiming.running() and order == ["call starts"], "a claim overtook a call"
            proceed.set()
            claiming.result(self.patience)
            assert order == ["call starts", "call ends", "claimed"]
        else:
            claiming.result(self.patience)
            assert order == ["call starts", "claimed"]
            proceed.set()
        call.result(self.patience)
        assert guarded.mark.current == 6

    def test_racing_admissions_keep_token_order(self, make_mark: MakeMark) -> None:
        """Threads guard calls with climbing tokens and replays of old ones: a token
        admitted after another one's call returned is never lower, every refusal names a
        mark that a higher admitted token had set, and the mark ends at the highest."""
        lock = threading.Lock()
        called: list[int] = []

        def record(token: int) -> None:
            with lock:
                called.append(token)

        guarded = guard(record, mark=make_mark(), name="race")
        admitted: list[tuple[int, float, float]] = []  # token, began, returned
        refused: list[tuple[int, int | None, float]] = []  # token, mark, returned

        def racer(me: int) -> None:
            for token in racing_tokens(me, self.racers, self.rounds):
                began = time.monotonic()
                try:
                    guarded(token, token)
                except StaleTokenError as exc:
                    refused.append((token, exc.current, time.monotonic()))
                else:
                    admitted.append((token, began, time.monotonic()))

        assert not _run_threads([partial(racer, me) for me in range(self.racers)], self.patience)
        assert len(admitted) + len(refused) == self.racers * self.rounds
        assert refused, "replayed tokens must be refused at least sometimes"
        for earlier, _, returned in admitted:
            for later, began, _ in admitted:
                if returned < began:
                    assert earlier <= later, f"{later} admitted after {earlier}"
        for token, mark, returned in refused:
            assert mark is not None and mark > token, f"{token} refused by the mark {mark}"
            assert any(t >= mark and began < returned for t, began, _ in admitted), (
                f"{token} refused by {mark}, which no admitted token had set"
            )
        assert sorted(called) == sorted(t for t, _, _ in admitted)
        if self.serializes_calls:
            assert called == sorted(called), "serialized calls ran out of token order"
        assert guarded.mark.current == max(t for t, _, _ in admitted)

    def test_guarded_calls_serialize_or_overlap_as_declared(self, make_mark: MakeMark) -> None:
        """With ``serializes_calls``: a second call waits until the first returns. Without:
        a newer token's call runs while an older admitted call is still running, and the
        older token is refused from then on."""
        started, proceed = threading.Event(), threading.Event()
        order: list[str] = []

        def work(label: str) -> None:
            order.append(f"start {label}")
            if label == "old":
                started.set()
                proceed.wait(self.patience)
            order.append(f"end {label}")

        guarded = guard(work, mark=make_mark())
        old = _Background(lambda: guarded(5, "old"))
        assert started.wait(self.patience)
        if self.serializes_calls:
            new = _Background(lambda: guarded(6, "new"))
            time.sleep(0.2)
            assert new.running() and order == ["start old"], "a call overlapped another one"
            proceed.set()
            old.result(self.patience)
            new.result(self.patience)
            assert order == ["start old", "end old", "start new", "end new"]
        else:
            guarded(6, "new")  # not held up by the running older call
            with pytest.raises(StaleTokenError):
                guarded(5, "old again")
            proceed.set()
            old.result(self.patience)
            assert order == ["start old", "start new", "end new", "end old"]


class OperationsContract(LeaseTerms):
    """The promises of the operators' capabilities, ``Inspects`` and ``ForceReleases``.

    Subclass it with the same ``make_fence`` fixture as ``FenceContract``; the issuer is
    the fences' ``issuer``. It checks: ``status`` follows the lease (free, held with its
    token and holder, free again with the last token); ``names`` lists the fences with a
    prefix and no others; ``force_release`` ends the lease whoever holds it, reports it,
    changes nothing when no lease is live, and the next token is higher, so the evicted
    holder's renew and release raise ``LeaseLost`` while the new lease is untouched.
    """

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Override: return ``make(name, ttl)`` giving fresh fences on the issuer under test."""
        raise NotImplementedError("subclass OperationsContract and provide make_fence")

    @staticmethod
    def operations(fence: Fence) -> Any:
        """The fence's issuer, which must have both capabilities."""
        issuer = fence.issuer
        assert isinstance(issuer, Inspects), f"{issuer!r} is not fencing.issuer.Inspects"
        assert isinstance(issuer, ForceReleases), f"{issuer!r} is not ForceReleases"
        return issuer

    def test_status_follows_the_lease(self, make_fence: MakeFence) -> None:
        name = self.fresh_name("status")
        fence = make_fence(name, self.long_ttl)
        issuer = self.operations(fence)
        unused = issuer.status(name)
        assert unused.name == name and not unused.held, f"a name never used: {unused}"
        assert (unused.holder, unused.token, unused.expires_in) == (None, None, None), unused
        assert unused.last_token is None, f"a name never used has a last token: {unused}"
        token = fence.acquire(timeout=0)
        held = issuer.status(name)
        assert held.held and held.token == token == held.last_token, f"{held} after {token}"
        assert isinstance(held.holder, str) and held.holder, f"no holder id: {held}"
        left = held.expires_in
        assert left is None or 0 < left <= self.long_ttl, f"{left}s left of {self.long_ttl}"
        fence.release(token)
        free = issuer.status(name)
        assert not free.held and free.token is None and free.holder is None, f"{free}"
        assert free.last_token in (token, None), f"last token {free.last_token}, not {token}"

    def test_names_lists_the_fences_with_a_prefix(self, make_fence: MakeFence) -> None:
        prefix = self.fresh_name("names") + ":"
        names = [f"{prefix}a", f"{prefix}b*_%", f"{prefix}c"]  # glob and LIKE characters
        fences = [make_fence(name, self.long_ttl) for name in [*names, prefix[:-1] + "x:d"]]
        tokens = [fence.acquire(timeout=0) for fence in fences]
        issuer = self.operations(fences[0])
        listed = list(issuer.names(prefix))
        assert sorted(listed) == sorted(names), f"names({prefix!r}) gave {listed}"
        assert list(issuer.names(names[1])) == [names[1]], "a prefix is literal"
        for fence, token in zip(fences, tokens, strict=True):
            fence.release(token)

    def test_force_release_evicts_the_holder_and_the_next_token_is_higher(
        self, make_fence: MakeFence
    ) -> None:
        name = self.fresh_name("force")
        evicted, successor = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        issuer = self.operations(evicted)
        token = evicted.acquire(timeout=0)
        ended = issuer.force_release(name)
        assert ended.held and ended.token == token, f"ended {ended}, held token {token}"
        newer = successor.acquire(timeout=0)  # free at once, not after the ttl
        assert newer > token, f"token {newer} after the evicted {token}"
        with pytest.raises(LeaseLost):
            evicted.renew(token)
        with pytest.raises(LeaseLost):
            evicted.release(token)
        successor.renew(newer)  # the evicted holder's calls did not touch the new lease
        successor.release(newer)
        nothing = issuer.force_release(name)
        assert not nothing.held and nothing.token is None, f"no lease was live: {nothing}"
        assert successor.acquire(timeout=0) > newer


__all__ = [
    "BAD_MARK_TOKENS",
    "BAD_NAMES",
    "BAD_TIMEOUTS",
    "BAD_TOKENS",
    "BAD_TTLS",
    "CLOCK_SLACK",
    "AsyncFenceContract",
    "FenceContract",
    "LeaseTerms",
    "MakeAsyncFence",
    "MakeFence",
    "MakeMark",
    "MarkContract",
    "OperationsContract",
    "assert_increasing",
    "assert_token_of",
    "racing_tokens",
]
