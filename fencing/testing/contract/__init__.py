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
- ``AsyncFenceContract``: the same promises for a ``fencing.aio.Fence``; its tests are
  coroutines (run them with pytest-asyncio in auto mode, or mark the class ``asyncio``).
  The fixture itself may be async (to open a client on the test's event loop).
- ``OperationsContract``: for an issuer with the operators' capabilities
  (``fencing.issuer.Inspects`` and ``ForceReleases``, behind ``fencing status``, ``list``
  and ``release --force``); the same ``make_fence`` fixture as ``FenceContract``.
- ``SemaphoreContract`` / ``AsyncSemaphoreContract``: ``make_semaphore(name, permits, ttl)``
  returns a fresh ``fencing.Semaphore`` (``fencing.aio.Semaphore``) on the backend: N
  permits are N slots, each slot's tokens strictly increase, never more than N holders
  nor two on one slot, ``hold()`` renews, bad input refused (docs/limits.md).
- ``ElectionContract`` and ``AsyncElectionContract``: the promises of ``fencing.Election``
  and ``fencing.aio.Election`` on the issuer (which must report ``status``), with the same
  ``make_fence`` fixture as the fence contracts (or override ``make_election``): one
  term at a time, term tokens increasing, ``resign`` handing over at once, a lost term
  signalled and replaced, observers seeing every change in order, ``run`` campaigning
  again after a loss (asyncio: its task cancelled), bad input refused.
- ``LossBoundContract`` / ``AsyncLossBoundContract``: the issuer (a blocking or asyncio
  one that reports ``status``) and a ``freeze`` fixture that stops its servers for a
  ``with`` block: a hold, a semaphore's permit and an election's term on a frozen issuer
  each signal their loss (asyncio: the body cancelled) within the ttl plus a margin
  below the backends' request timeouts (docs/guarantees.md).
- ``RWLockContract``: ``make_rwlock(name, ttl)`` returns a fresh ``fencing.RWLock`` and
  ``make_async_rwlock(name, ttl)`` a ``fencing.aio.RWLock`` on the same issuer: writers
  exclusive with new tokens, readers together sharing the read epoch, the epoch between
  writes, a waiting writer stopping new readers, expiry, the exact lease, bad input,
  ``hold()``'s loss signal, racing readers and writers (docs/rwlock.md).
- ``LimiterContract``: ``make_limiter(name, limit, per, window)`` returns a fresh
  ``fencing.Limiter`` and ``make_async_limiter(...)`` a ``fencing.aio.Limiter`` on the same
  store: at most ``limit`` admissions per window (sliding and fixed), also racing; a
  waiter admitted once the window frees by the store's clock; ``acquire`` giving up at
  once when nothing frees in time; bad input refused with nothing admitted; blocking and
  asyncio sharing the windows. Each check runs with both kinds of limiter.
- ``InteropContract``: ``make_fence(name, ttl)`` and ``make_async_fence(name, ttl)``, a
  blocking and an asyncio fence on the same issuer: they exclude each other, share one
  token sequence, a waiter on one side is let in by a release on the other, and each
  side's ``status`` reports the other side's lease.
- ``StaleHolderContract``: ``holder_url`` (what a holder process passes to
  ``fencing.connect``) and ``make_fence(name, ttl)`` on the same issuer: a holder process
  frozen (``SIGSTOP``) past its lease is refused at a guard once a newer holder wrote,
  while its unfenced write (the control) lands; ``end_frozen_lease`` for engines whose
  frozen holder keeps its lease (Linux: it reads ``/proc``).
- ``MarkContract``: ``make_mark()`` returns a fresh, empty high-water mark (a
  ``fencing._resource.marks.Mark``: ``MemoryMark``, ``FileMark``, ``RedisMark`` or yours); its
  tests guard calls with ``fencing.guard(fn, mark=...)``.

What the fence contracts check: tokens strictly increase across release, expiry and a
crashed holder; a held lease excludes every other holder (``acquire(timeout=0)`` raises
``AcquireTimeout``); ``timeout`` 0 tries once, a number waits at least that long, ``None``
waits until the holder releases; renew extends the lease; renew and release act only for
the exact holder (``LeaseLost``; another fence's token is a ``ValueError``), also at the
issuer itself; an expired lease lets the next holder in with a higher token; ``hold()``
keeps the lease past its ttl and surfaces a lost lease (``LeaseLost`` on leaving); a lease
ended at the issuer behind a hold's back is signalled (``on_lost`` callbacks once, in the
renewer; ``wait_lost``; an asyncio body cancelled with ``cancel_on_loss=True``); a
reentrant fence on the issuer gives its owner (thread or task) the same token again and
ends the lease at the last release, while others wait; bad
input is refused with ``TypeError``/``ValueError`` and nothing taken; racing threads (or
tasks) are never two holders at once.

The blocking and asyncio contracts of a pair (fence, semaphore, election) check the same
promises by construction: each check is written once, as a scenario that yields each
call, and a blocking and an asyncio driver run it (``_drive``); threads in the one are
tasks in the other.

Where an engine's lease model genuinely differs, a subclass declares it with a capability
attribute (see ``LeaseTerms``; leases that live as long as a session come with an
``end_session`` hook) and the contract checks the behaviour the engine does promise
instead: no check is skipped silently. The timings are class attributes too;
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

from ._election import BAD_VALUES, AsyncElectionContract, ElectionContract
from ._fence import AsyncFenceContract, FenceContract
from ._helpers import (
    BAD_MARK_TOKENS,
    BAD_NAMES,
    BAD_TIMEOUTS,
    BAD_TOKENS,
    BAD_TTLS,
    CLOCK_SLACK,
    MakeAsyncElection,
    MakeAsyncFence,
    MakeElection,
    MakeFence,
    MakeMark,
    assert_increasing,
    assert_token_of,
    racing_tokens,
)
from ._interop import InteropContract
from ._limiter import BAD_PERS, BAD_WINDOWS, LimiterContract, MakeAsyncLimiter, MakeLimiter
from ._loss import AsyncLossBoundContract, Freeze, LossBoundContract
from ._marks import MarkContract
from ._operations import OperationsContract
from ._rwlock import MakeAsyncRWLock, MakeRWLock, RWLockContract
from ._semaphore import (
    BAD_COUNTS,
    AsyncSemaphoreContract,
    MakeAsyncSemaphore,
    MakeSemaphore,
    SemaphoreContract,
)
from ._stale import StaleHolderContract
from ._terms import LeaseTerms

__all__ = [
    "BAD_COUNTS",
    "BAD_MARK_TOKENS",
    "BAD_NAMES",
    "BAD_PERS",
    "BAD_TIMEOUTS",
    "BAD_TOKENS",
    "BAD_TTLS",
    "BAD_VALUES",
    "BAD_WINDOWS",
    "CLOCK_SLACK",
    "AsyncElectionContract",
    "AsyncFenceContract",
    "AsyncLossBoundContract",
    "AsyncSemaphoreContract",
    "ElectionContract",
    "FenceContract",
    "Freeze",
    "InteropContract",
    "LeaseTerms",
    "LimiterContract",
    "LossBoundContract",
    "MakeAsyncElection",
    "MakeAsyncFence",
    "MakeAsyncLimiter",
    "MakeAsyncRWLock",
    "MakeAsyncSemaphore",
    "MakeElection",
    "MakeFence",
    "MakeLimiter",
    "MakeMark",
    "MakeRWLock",
    "MakeSemaphore",
    "MarkContract",
    "OperationsContract",
    "RWLockContract",
    "SemaphoreContract",
    "StaleHolderContract",
    "assert_increasing",
    "assert_token_of",
    "racing_tokens",
]
