"""``Semaphore`` and ``AsyncSemaphore``: N permits, each a fenced lease of its own slot.

A semaphore of N permits is N slots, and slot ``k`` is an ordinary fence named
``slot_name(name, k)`` on the same issuer. A permit is (slot, token): the token is that
slot fence's token, so it is strictly increasing per slot across release, expiry and
crashed holders, exactly as a fence's is (invariant 1 of docs/design.md), and a resource
owned by a slot is guarded by that slot's tokens. One mark over all slots would refuse a
legitimate long holder once newer permits of other slots passed it (docs/limits.md).

Acquiring is a flow that tries the slots one after the other (starting at a random slot
so that callers spread), and when all are busy waits the way a fence waits
(``WaitSchedule``), never past the soonest expiry the issuer reported:

- woken by the release of any slot where the issuer can (``WakesSlots``: Redis, etcd,
  ZooKeeper). The first take of each round also reads the semaphore's release mark,
  in the same atomic step as that refusal, and the wait returns at the first release
  after the mark; so a release during the round (of a slot already tried) wakes the
  waiter too, and the next round starts at the slot released. The slot fences release
  through the issuer's ``release_slot`` (their port's ``release``), which is what
  wakes them;
- else woken by the release of the slot whose lease ends first (``WakesOnRelease``);
- else backing off with jitter.

``renew``, ``release`` and ``hold`` are the slot fence's own. The flow is written once
and driven blocking or asyncio (``_flow``).

Clients of one name with different ``permits``: a semaphore of N takes only slots below
N, but a client with a higher M may hold slots ``>= N``. So that a lower N lets no new
holder in until fewer than N permits are held (docs/limits.md), a slot is taken with the
issuer's ``try_acquire_slot`` (``TakesSlots``), which counts the held slots of the
semaphore, every slot, in the same atomic step as the take and refuses it at N. A
count made in a step of its own could not be sound without a second round trip (and an
undo), and one made atomically costs the usual case nothing more than server work:
Redis reads a per-semaphore "one past the highest slot ever taken" key in the take's
script and counts only when it is above N; SQL counts the slots' rows in the take's
transaction; etcd and ZooKeeper compare in the take's transaction (see each issuer). An
issuer without the capability gets the slot fence's plain ``try_acquire``: there a
lower N counts only its own slots.

Imports the fences, the protocol's steps and the validation helpers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from .._base.errors import LeaseLost
from .._base.flow import Flow, run_async, run_sync
from .._base.metrics import permits_changed, waiting
from .._base.owned import Owner
from .._base.token import FenceToken
from .._base.validate import check_count, check_name, check_timeout, check_ttl
from .._base.waits import JITTER
from .._lease.async_fence import AsyncFence, AsyncHolding
from .._lease.core import DEFAULT_TTL, Clock, new_holder_id
from .._lease.fence import Fence, Holding
from .._lease.protocol import Call, Op, Port, WaitSchedule, queue_millis
from ..issuer import (
    AsyncIssuer,
    AsyncTakesSlots,
    AsyncWakesSlots,
    Busy,
    Issuer,
    SlotBusy,
    TakesSlots,
    WakesSlots,
)

#: The most permits one semaphore may have: each is a fence that an acquire may try.
MAX_PERMITS = 1024


def slot_name(name: str, slot: int) -> str:
    """The fence name of ``slot`` of the semaphore ``name``: ``{<name>}#slot<k>``.

    The braces are a Redis Cluster hash tag, so every slot of one semaphore lives in one
    cluster slot; a name that has a hash tag of its own (``jobs{eu}``) keeps it and is not
    wrapped (``jobs{eu}#slot<k>``). The same rule holds on every backend, so a slot's
    fence has one name everywhere (``fencing status '{jobs}#slot0'``).
    """
    return f"{name}#slot{slot}" if _has_hash_tag(name) else f"{{{name}}}#slot{slot}"


def _has_hash_tag(name: str) -> bool:
    start = name.find("{")
    return start >= 0 and name.find("}", start + 1) > start + 1


def check_semaphore_name(name: object) -> str:
    """``check_name``, and a ``ValueError`` for a name that starts with ``}``: its slots'
    names (``{}...}#slot<k>``) would have an empty hash tag, so Redis Cluster would
    scatter them and Redis could not take them in one script. Refused on every backend,
    at construction, so a name works on all of them or on none."""
    checked = check_name(name)
    if checked.startswith("}"):
        raise ValueError(
            f"semaphore name {checked!r} must not start with '}}': its slots' names "
            f"({slot_name(checked, 0)!r}, ...) would have no Redis Cluster hash tag"
        )
    return checked


@dataclass(frozen=True)
class Permit:
    """One permit of a semaphore: its ``slot`` (in ``range(permits)``) and the slot's
    ``token`` (a ``FenceToken`` whose ``name`` is the slot's fence name). Guard a resource
    owned by the slot with that slot's tokens."""

    semaphore: str
    slot: int
    token: FenceToken


F = TypeVar("F", Fence, AsyncFence)


class Slots:
    """The port of a semaphore's acquire flow: its slot fences' ports, and the issuer's
    slot calls when it counts the semaphore's held slots (``group`` set, see the module
    docstring). Like ``Port``, each method returns the issuer's reply (an awaitable for
    an asyncio issuer), so one class serves both drivers."""

    __slots__ = ("group", "issuer", "permits", "ports")

    def __init__(self, ports: Sequence[Port], group: str | None, permits: int) -> None:
        self.ports = ports
        self.issuer: Any = ports[0].issuer
        self.group = group
        self.permits = permits

    def take(self, slot: int, holder: str, ttl_ms: int, wait_ms: int) -> Any:
        """``try_acquire_slot`` where the issuer counts (``wait_ms`` > 0, ``WakesSlots``
        only: a refusal is a ``SlotBusy`` with the release mark), else the slot fence's
        ``try_acquire``."""
        if self.group is None:
            return self.ports[slot].try_acquire(holder, ttl_ms)
        if wait_ms:
            return self.issuer.try_acquire_slot(
                self.group, slot, self.permits, holder, ttl_ms, wait_ms
            )
        return self.issuer.try_acquire_slot(self.group, slot, self.permits, holder, ttl_ms)

    def await_slot_release(self, since: str, seconds: float) -> Any:
        """``WakesSlots.await_slot_release`` of this semaphore."""
        return self.issuer.await_slot_release(self.group, since, seconds)

    def await_release(self, slot: int, seconds: float) -> Any:
        """``WakesOnRelease.await_release`` of one slot's fence."""
        return self.ports[slot].await_release(seconds)

    def sleep(self, seconds: float) -> Any:
        return self.ports[0].sleep(seconds)


class TakeSlot(Call[int | Busy]):
    """One slot's take (``Slots.take``): the token, or ``Busy``."""

    __slots__ = ()

    def __init__(self, slot: int, holder: str, ttl_ms: int, wait_ms: int) -> None:
        super().__init__("take", slot, holder, ttl_ms, wait_ms)


class AwaitSlotRelease(Call[int | None]):
    """``WakesSlots.await_slot_release``: block until a slot of the semaphore was
    released after the mark ``since``; the slot released if known, else ``None``."""

    __slots__ = ()

    def __init__(self, since: str, seconds: float) -> None:
        super().__init__("await_slot_release", since, seconds)


R = TypeVar("R")


def slot_release(
    release_slot: Callable[[str, int, int, str], R], group: str, slot: int
) -> Callable[[str, int, str], R]:
    """``release_slot`` of slot ``slot`` in the shape of ``issuer.release``: what the slot
    fence's port calls to end a lease (``Port.releaser``), blocking or asyncio."""
    return lambda _name, token, holder: release_slot(group, slot, token, holder)


class BaseSemaphore(Generic[F]):
    """What the blocking and asyncio semaphores share: checks, the acquire flow, the
    permits' bookkeeping (in the slot fences); no I/O."""

    def __init__(self, name: str, permits: int, ttl: float, make_fence: Callable[[str], F]) -> None:
        self.name = check_semaphore_name(name)
        self.permits = check_count(permits, "permits", MAX_PERMITS)
        self.ttl = check_ttl(ttl)
        self.fences: list[F] = [make_fence(slot_name(self.name, k)) for k in range(self.permits)]
        first = self.fences[0]
        self._issuer: object = first.issuer
        kind = type(first.issuer)
        counts = issubclass(kind, (TakesSlots, AsyncTakesSlots))
        #: the slots' fence names without their number, when the issuer counts them
        self._group = slot_name(self.name, 0)[:-1] if counts else None
        wakes_slots = counts and issubclass(kind, (WakesSlots, AsyncWakesSlots))
        #: ``_group`` when a release of any slot wakes the waiters (``WakesSlots``)
        self._wake_group = self._group if wakes_slots else None
        #: (slot, token) of the permits counted in ``fencing.permits.used``
        self._counted: set[tuple[int, int]] = set()
        self.clock: Clock = first.clock
        self._wakes = first._waiting.wakes
        #: the longest a waiter blocks before it tries the slots again, so that a lost
        #: wake-up only delays (``WaitSchedule``)
        self._max_block = WaitSchedule.MAX_BLOCK
        self._ttl_ms = first._ttl_ms

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, permits={self.permits}, ttl={self.ttl})"

    def _acquire_flow(self, holder: str, timeout: float | None) -> Flow[Call[Any], tuple[int, int]]:
        """Try every slot once, from a random one; when all are busy, wait (woken on a
        release, or backing off with jitter, never past the soonest expiry) and again."""
        group = self._wake_group
        wakes = group is not None or self._wakes
        schedule = WaitSchedule(
            self.name,
            timeout,
            wakes,
            self.clock.monotonic,
            max_block=self._max_block,
            kind="semaphore",
        )
        count = self.permits
        start = JITTER.randrange(count)
        while True:
            # the round's first take reads the release mark: a later one could miss the
            # release of a slot tried before it; the mark outlives the wait (as a place
            # in a fence's queue does)
            wait_ms = 0 if group is None else queue_millis(schedule.remaining(), self._max_block)
            since: str | None = None
            soonest: tuple[float, int] | None = None
            for i in range(count):
                slot = (start + i) % count
                attempt = TakeSlot(slot, holder, self._ttl_ms, wait_ms)
                wait_ms = 0
                yield attempt
                reply = attempt.result
                if not isinstance(reply, Busy):
                    return slot, reply
                if isinstance(reply, SlotBusy):
                    since = reply.since
                if reply.expires_in is not None and (
                    soonest is None or reply.expires_in < soonest[0]
                ):
                    soonest = (reply.expires_in, slot)
            expires_in, slot = (None, start) if soonest is None else soonest
            wait = schedule.next_wait(Busy(expires_in))  # AcquireTimeout at the deadline
            start = JITTER.randrange(count)
            if since is not None and group is not None:
                released = AwaitSlotRelease(since, wait)
                yield released
                if released.result is not None and released.result < count:
                    start = released.result  # the slot just freed: likely free still
            else:
                yield Call("await_release", slot, wait) if self._wakes else Call("sleep", wait)

    def _permit(self, slot: int, token: int, holder: str) -> Permit:
        if permits_changed(self._issuer, self.name, 1):
            self._counted.add((slot, token))
        return Permit(self.name, slot, self.fences[slot]._granted(token, holder))

    def _ended(self, permit: Permit) -> None:
        """``permit`` was released or found lost: no longer counted as held."""
        key = (permit.slot, int(permit.token))
        if key in self._counted:
            self._counted.discard(key)
            permits_changed(self._issuer, self.name, -1)

    def _renewal(self, permit: object, ttl: float | None) -> tuple[Flow[Op, None], Port]:
        """The renewal of ``permit`` (its slot fence's), and the port it runs on."""
        fence = self._fence_of(permit)
        token = cast(Permit, permit).token
        return self._counting(cast(Permit, permit), fence._renew_flow(token, ttl)), fence._calls

    def _release(self, permit: object) -> tuple[Flow[Op, None], Port]:
        """The release of ``permit`` (its slot fence's), and the port it runs on."""
        fence = self._fence_of(permit)
        token = cast(Permit, permit).token
        flow = self._counting(cast(Permit, permit), fence._release_flow(token), released=True)
        return flow, fence._calls

    def _counting(
        self, permit: Permit, flow: Flow[Op, None], released: bool = False
    ) -> Flow[Op, None]:
        """``flow`` on ``permit``'s lease; a permit it finds lost, or releases, is no
        longer counted as held (``fencing.permits.used``)."""
        try:
            yield from flow
        except LeaseLost:
            self._ended(permit)
            raise
        if released:
            self._ended(permit)

    def _fence_of(self, permit: object) -> F:
        """The slot fence of ``permit``; ``TypeError``/``ValueError`` for anything that is not
        a permit of this semaphore (checked before any I/O)."""
        if not isinstance(permit, Permit):
            raise TypeError(
                f"expected a Permit of semaphore {self.name!r}, not {type(permit).__name__}"
            )
        if permit.semaphore != self.name:
            raise ValueError(
                f"permit of semaphore {permit.semaphore!r} passed to semaphore {self.name!r}"
            )
        if not 0 <= permit.slot < self.permits:
            raise ValueError(
                f"permit of slot {permit.slot}: semaphore {self.name!r} has slots 0 to "
                f"{self.permits - 1} (permits={self.permits})"
            )
        return self.fences[permit.slot]


class Semaphore(BaseSemaphore[Fence]):
    """N permits on a blocking issuer; each permit a lease of one slot, with that slot's
    strictly increasing token (see the module docstring and docs/limits.md).

    ``Semaphore(issuer, "jobs", permits=3, ttl=10)``, or ``backend.semaphore(...)`` on what
    ``fencing.connect`` returns. Every holder of a name should use the same ``permits``:
    a semaphore with fewer lets no new holder in until fewer than its count are held.
    """

    def __init__(
        self,
        issuer: Issuer,
        name: str,
        permits: int,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name, permits, ttl, lambda slot: Fence(issuer, slot, ttl, clock=clock))
        if self._wake_group is not None:  # its slots' releases wake the waiters
            release = cast(WakesSlots, issuer).release_slot
            for k, fence in enumerate(self.fences):
                fence._calls.releaser = slot_release(release, self._wake_group, k)
        self._slots = Slots([fence._calls for fence in self.fences], self._group, self.permits)

    def acquire(self, timeout: float | None = None) -> Permit:
        """Take a free slot and return its permit.

        ``timeout`` as for a fence: ``0`` tries every slot once, ``None`` waits for ever, a
        number waits at most that long, then ``AcquireTimeout``.
        """
        holder, wait = new_holder_id(), check_timeout(timeout)
        with waiting("semaphore", self._issuer, self.name):
            slot, token = run_sync(self._acquire_flow(holder, wait), self._slots)
        return self._permit(slot, token, holder)

    def renew(self, permit: Permit, ttl: float | None = None) -> None:
        """Extend ``permit``'s lease; ``LeaseLost`` if it is no longer held."""
        run_sync(*self._renewal(permit, ttl))

    def release(self, permit: Permit) -> None:
        """Give ``permit`` back; ``LeaseLost`` if it had already expired or moved on."""
        run_sync(*self._release(permit))

    def hold(self, timeout: float | None = None) -> SemaphoreHold:
        """Acquire a permit, renew it every ttl/3 in a background thread, release on exit.

        ``with semaphore.hold() as permit:``; the ``SemaphoreHold`` has its own ``lost``
        (leaving the block raises ``LeaseLost`` once a renewal found the permit gone).
        """
        return SemaphoreHold(self, timeout)


class AsyncSemaphore(BaseSemaphore[AsyncFence], Owner):
    """The asyncio ``Semaphore`` (``fencing.aio.Semaphore``): the same slots, leases and
    tokens as a blocking semaphore of that name on the same issuer; ``aclose`` as
    ``AsyncFence.aclose``."""

    def __init__(
        self,
        issuer: AsyncIssuer,
        name: str,
        permits: int,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(
            name, permits, ttl, lambda slot: AsyncFence(issuer, slot, ttl, clock=clock)
        )
        if self._wake_group is not None:  # its slots' releases wake the waiters
            release = cast(AsyncWakesSlots, issuer).release_slot
            for k, fence in enumerate(self.fences):
                fence._calls.releaser = slot_release(release, self._wake_group, k)
        self._slots = Slots([fence._calls for fence in self.fences], self._group, self.permits)

    async def acquire(self, timeout: float | None = None) -> Permit:
        """Take a free slot and return its permit (see ``Semaphore.acquire``)."""
        holder, wait = new_holder_id(), check_timeout(timeout)
        with waiting("semaphore", self._issuer, self.name):
            slot, token = await run_async(self._acquire_flow(holder, wait), self._slots)
        return self._permit(slot, token, holder)

    async def renew(self, permit: Permit, ttl: float | None = None) -> None:
        """See ``Semaphore.renew``."""
        await run_async(*self._renewal(permit, ttl))

    async def release(self, permit: Permit) -> None:
        """See ``Semaphore.release``."""
        await run_async(*self._release(permit))

    def hold(self, timeout: float | None = None) -> AsyncSemaphoreHold:
        """``async with semaphore.hold() as permit:`` (see ``Semaphore.hold``)."""
        return AsyncSemaphoreHold(self, timeout)


class PermitHold:
    """What both semaphore holds add to a hold: the permit, counted until the hold ends."""

    _semaphore: BaseSemaphore[Any]
    _permit: Permit | None = None

    @property
    def permit(self) -> Permit | None:
        """The permit of this hold once entered, else ``None``."""
        return self._permit

    def _over(self) -> None:
        if self._permit is not None:  # released, or found lost: no longer held
            self._semaphore._ended(self._permit)


class SemaphoreHold(PermitHold, Holding[Permit]):
    """One ``semaphore.hold()``: gives the permit, renews it, with its own ``lost``,
    ``on_lost`` callbacks and ``wait_lost`` (a ``Hold`` on the permit's slot)."""

    _semaphore: Semaphore

    def __init__(self, semaphore: Semaphore, timeout: float | None) -> None:
        super().__init__(timeout, True, None, semaphore.clock)
        self._semaphore = semaphore

    def _take(self) -> tuple[Fence, FenceToken, Permit]:
        permit = self._permit = self._semaphore.acquire(self._timeout)
        return self._semaphore.fences[permit.slot], permit.token, permit


class AsyncSemaphoreHold(PermitHold, AsyncHolding[Permit]):
    """One ``async with semaphore.hold()``: gives the permit (see ``SemaphoreHold``)."""

    _semaphore: AsyncSemaphore

    def __init__(self, semaphore: AsyncSemaphore, timeout: float | None) -> None:
        super().__init__(timeout, True, semaphore.clock)
        self._semaphore = semaphore

    async def _take(self) -> tuple[AsyncFence, FenceToken, Permit]:
        permit = self._permit = await self._semaphore.acquire(self._timeout)
        return self._semaphore.fences[permit.slot], permit.token, permit
