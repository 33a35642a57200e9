"""A custom issuer: leases in a dict, behind a lock, timed by ``time.monotonic``.

An issuer needs three methods (the ``fencing.issuer.Issuer`` protocol); ``fencing.Fence``
adds everything else: argument checks, holder ids, waiting with a deadline, ``hold()``
with background renewal, logs. This one fences the threads of one process; a real one
keeps the same state on a server, where every step below is one atomic operation.
docs/issuers.md shows how to check it with the public contract.

Run: python examples/custom_issuer.py
"""

from __future__ import annotations

import threading
import time

import fencing
from fencing.issuer import Busy


class DictIssuer:
    """name -> (token, holder, expiry) in a dict; per-name counters that never go back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # makes each method one atomic step
        self._leases: dict[str, tuple[int, str, float]] = {}
        self._counters: dict[str, int] = {}

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        """Grant a free or expired lease with the next token, else say how long it stays."""
        with self._lock:
            now = time.monotonic()
            lease = self._leases.get(name)
            if lease is not None and lease[2] > now:
                return Busy(expires_in=lease[2] - now)
            token = self._counters.get(name, 0) + 1  # the counter outlives every lease
            self._counters[name] = token
            self._leases[name] = (token, holder, now + ttl_ms / 1000)
            return token

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        """Extend the lease only if this exact token and holder still hold it."""
        with self._lock:
            if not self._holds(name, token, holder):
                return False
            self._leases[name] = (token, holder, time.monotonic() + ttl_ms / 1000)
            return True

    def release(self, name: str, token: int, holder: str) -> bool:
        """End the lease only if this exact token and holder still hold it."""
        with self._lock:
            if not self._holds(name, token, holder):
                return False
            del self._leases[name]
            return True

    def _holds(self, name: str, token: int, holder: str) -> bool:
        lease = self._leases.get(name)
        return lease is not None and lease[:2] == (token, holder) and lease[2] > time.monotonic()


def main() -> None:
    issuer = DictIssuer()
    first = fencing.Fence(issuer, "report", ttl=5)
    second = fencing.Fence(issuer, "report", ttl=5)

    token = first.acquire()
    print(f"first holder got token {int(token)}")
    try:
        second.acquire(timeout=0.2)
    except fencing.AcquireTimeout:
        print("second holder waited 0.2s and gave up: the lease is taken")
    first.release(token)

    with second.hold() as newer:  # renewed in the background, released on leaving
        print(f"second holder got token {int(newer)}")


if __name__ == "__main__":
    main()
