"""Which etcd leases an issuer holds, and which it keeps for its next acquire.

A lease that carries no key is still a lease: it lives until its TTL runs out. Granting
and revoking one is a consensus round each (a raft proposal that every later write
queues behind), so an issuer keeps such a lease, per fence name and TTL, for its next
acquire of that name instead of revoking it and granting another:

- an attempt that found the key taken keeps the lease it had granted, so a waiter
  starts to watch one round trip sooner and, once woken, does not grant again;
- a release deletes the key in one transaction and keeps the lease it was on, so the
  next holder is not queued behind a revoke.

A kept lease is used only while it is younger than half its TTL (counted from when it
was granted or last kept alive, read before the request left), and the acquire that
uses it keeps it alive at once, so a lease always runs its full TTL from the acquire.
One that is older is revoked; one that is never used expires on the server. Everything
here is memory (no I/O), bounded by ``capacity`` entries per table.

Imports the standard library only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Lease:
    """An etcd lease of ``seconds``, last granted or kept alive at ``since`` (monotonic)."""

    id: int
    seconds: int
    since: float


class LeasePool:
    """The leases of one issuer: those holding a fence's key, and spare ones (see above)."""

    def __init__(self, clock: Callable[[], float], capacity: int = 1024) -> None:
        self.clock = clock
        self.capacity = capacity
        self._held: dict[tuple[str, int], Lease] = {}
        self._spare: dict[tuple[str, int], Lease] = {}
        self._lock = threading.Lock()

    def take(self, name: str, seconds: int) -> tuple[Lease | None, Lease | None]:
        """``(usable, stale)``: the spare lease of ``name`` and ``seconds`` if it is young
        enough, else the stale one to revoke (or neither)."""
        with self._lock:
            spare = self._spare.pop((name, seconds), None)
        if spare is None:
            return None, None
        if self.clock() - spare.since < spare.seconds / 2:
            return spare, None
        return None, spare

    def keep(self, name: str, lease: Lease) -> bool:
        """Keep ``lease`` (no key on it) for the next acquire of ``name``; False when the
        pool is full or holds one already: then revoke it."""
        with self._lock:
            if len(self._spare) >= self.capacity:
                return False
            return self._spare.setdefault((name, lease.seconds), lease) is lease

    def hold(self, name: str, token: int, lease: Lease) -> None:
        """``lease`` now carries the key of ``name`` created at ``token``."""
        with self._lock:
            if len(self._held) >= self.capacity:  # leases that expired unreleased
                self._held.clear()
            self._held[(name, token)] = lease

    def kept_alive(self, name: str, token: int, lease: int, since: float) -> None:
        """A renewal restarted the TTL of the lease of ``name``/``token`` at ``since``."""
        with self._lock:
            held = self._held.get((name, token))
            if held is not None and held.id == lease:
                self._held[(name, token)] = Lease(lease, held.seconds, since)

    def released(self, name: str, token: int, lease: int) -> Lease | None:
        """The lease the released key of ``name``/``token`` was on, if this pool knows it."""
        with self._lock:
            held = self._held.pop((name, token), None)
        return held if held is not None and held.id == lease else None
