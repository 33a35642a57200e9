"""Deliberately broken backends: the contract must fail on each (test_contract_broken.py).

Each one breaks a single promise of a real backend and keeps the rest, so the failures
it causes point at that promise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fencing import Admission, MemoryIssuer, MemoryMark
from fencing.issuer import READ, Busy, FenceStatus, RWStatus


class ReusesTokens(MemoryIssuer):
    """Hands out a released token again: after each release the tokens it reports step
    one back, while the leases underneath stay real (so only the tokens are wrong)."""

    def __init__(self) -> None:
        super().__init__()
        self._releases: dict[str, int] = {}
        self._real: dict[tuple[str, int], int] = {}  # (name, reported token) -> real token

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        reply = super().try_acquire(name, holder, ttl_ms)
        if isinstance(reply, Busy):
            return reply
        reported = reply - self._releases.get(name, 0)
        self._real[name, reported] = reply
        return reported

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return super().renew(name, self._real.get((name, token), -1), holder, ttl_ms)

    def release(self, name: str, token: int, holder: str) -> bool:
        released = super().release(name, self._real.get((name, token), -1), holder)
        if released:
            self._releases[name] = self._releases.get(name, 0) + 1
        return released


class LetsTwoHoldersIn(MemoryIssuer):
    """A semaphore of two: when the lease is taken, a second holder gets a lease of its
    own, on a shadow name with a counter of its own."""

    @staticmethod
    def _shadow(name: str) -> str:
        return f"{name}\x00second"

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        reply = super().try_acquire(name, holder, ttl_ms)
        if isinstance(reply, Busy):
            reply = super().try_acquire(self._shadow(name), holder, ttl_ms)
        return reply

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return super().renew(name, token, holder, ttl_ms) or super().renew(
            self._shadow(name), token, holder, ttl_ms
        )

    def release(self, name: str, token: int, holder: str) -> bool:
        return super().release(name, token, holder) or super().release(
            self._shadow(name), token, holder
        )


class IgnoresTheHolder(MemoryIssuer):
    """Renews and releases a lease for whoever names its token: the holder id it is
    given is replaced by the lease's own."""

    def __init__(self) -> None:
        super().__init__()
        self._holders: dict[tuple[str, int], str] = {}

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        reply = super().try_acquire(name, holder, ttl_ms)
        if not isinstance(reply, Busy):
            self._holders[name, reply] = holder
        return reply

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return super().renew(name, token, self._holders.get((name, token), holder), ttl_ms)

    def release(self, name: str, token: int, holder: str) -> bool:
        return super().release(name, token, self._holders.get((name, token), holder))


class AdmitsLowerTokens(MemoryMark):
    """Never refuses: a lower token is admitted (the mark keeps the highest one seen)."""

    @contextmanager
    def admit(self, token: int, resource: str) -> Iterator[None]:
        with super().admit(max(token, self.current or 0), resource):
            yield


class ClaimsNothing(MemoryMark):
    """Guards calls correctly, but its ``claim`` checks the token and never raises the
    mark: the read-then-write window stays open."""

    def claim(self, token: int, resource: str | None = None) -> None:
        before = self._mark
        super().claim(token, resource)
        self._mark = before  # checked, then forgotten


class ForgetsTheCounter(MemoryIssuer):
    """Its force-release drops the name's token counter too: the next token restarts
    at 1, below the evicted holder's, which a guard would then prefer."""

    def force_release(self, name: str) -> FenceStatus:
        ended = super().force_release(name)
        with self._changed:
            self._counters.pop(name, None)
        return ended


#: Broken backends by name, for the contract modules that test_contract_broken.py writes.
class LetsOneMoreIntoSlotZero(LetsTwoHoldersIn):
    """A semaphore of N permits that lets N+1 holders in: its slot 0 (a fence whose name
    ends in ``#slot0``) takes a second holder; every other fence is exclusive."""

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        if name.endswith("#slot0"):
            return super().try_acquire(name, holder, ttl_ms)
        return MemoryIssuer.try_acquire(self, name, holder, ttl_ms)


class GivesReadersDistinctTokens(MemoryIssuer):
    """A read-write lock whose readers each get a token of their own (a fresh one from
    the counter) instead of sharing the read epoch; the leases underneath stay real."""

    def __init__(self) -> None:
        super().__init__()
        self._real: dict[tuple[str, int], int] = {}  # (name, reported token) -> epoch

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        reply = super().rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        if mode != READ or isinstance(reply, Busy):
            return reply
        with self._changed:
            reported = self._next_token(name)
        self._real[name, reported] = reply
        return reported

    def rw_renew(self, name: str, mode: str, token: int, holder: str, ttl_ms: int) -> bool:
        epoch = self._real.get((name, token), token)
        return super().rw_renew(name, mode, epoch, holder, ttl_ms)

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> bool:
        return super().rw_release(name, mode, self._real.get((name, token), token), holder)


class LetsWritersInBesideReaders(MemoryIssuer):
    """A read-write lock whose writers do not wait for the readers inside (a writer still
    excludes readers and writers)."""

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        if mode == READ:
            return super().rw_acquire(name, mode, holder, ttl_ms, queue_ms)
        with self._changed:
            state = self._read_write(name)
            readers, state.readers = state.readers, {}
            try:
                return super().rw_acquire(name, mode, holder, ttl_ms, queue_ms)
            finally:
                state.readers = readers


class StarvesWriters(MemoryIssuer):
    """A read-write lock without writer preference: a waiting writer never marks itself,
    so new readers keep entering ahead of it."""

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> int | Busy:
        return super().rw_acquire(name, mode, holder, ttl_ms, 0)


class ForceReleaseEndsNothing(MemoryIssuer):
    """A read-write lock's force-release (``fencing release --rwlock --force``) that
    reports the leases it should end and ends none."""

    def rw_force_release(self, name: str) -> RWStatus:
        return self.rw_status(name)


class AdmitsOneMore(MemoryIssuer):
    """A rate limiter whose every window admits one request more than its limit."""

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        return super().admit(name, limit + 1, per_ms, window)


ISSUERS: dict[str, type[MemoryIssuer]] = {
    "correct": MemoryIssuer,
    "reuses-tokens": ReusesTokens,
    "two-holders": LetsTwoHoldersIn,
    "ignores-holder": IgnoresTheHolder,
    "forgets-counter": ForgetsTheCounter,
    "one-more-permit": LetsOneMoreIntoSlotZero,
    "distinct-read-tokens": GivesReadersDistinctTokens,
    "writers-beside-readers": LetsWritersInBesideReaders,
    "force-release-ends-nothing": ForceReleaseEndsNothing,
    "starves-writers": StarvesWriters,
    "one-more-admission": AdmitsOneMore,
}
MARKS: dict[str, type[MemoryMark]] = {
    "correct": MemoryMark,
    "admits-lower": AdmitsLowerTokens,
    "claims-nothing": ClaimsNothing,
}
