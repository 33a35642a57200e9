"""``FenceCore``: everything a fence does that is not I/O, shared by sync and async fences.

It checks arguments, mints holder ids, remembers which leases this object granted,
writes the logs and expresses each operation as a flow (see ``_protocol``). The sync
``Fence`` and the asyncio ``AsyncFence`` only drive those flows.

Imports the errors, token, validation, log and protocol modules.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import cast

from ._errors import FenceUnavailable, LeaseLost
from ._log import acquire_log, lost_log, release_log, renew_log
from ._protocol import Busy, Flow, Renew, Sleep, TryAcquire, first_attempt, wait_flow
from ._token import FenceToken
from ._validate import check_name, check_timeout, check_token_for, check_ttl

DEFAULT_TTL = 10.0


class FenceCore:
    """A named lease plus its token counter, minus the I/O.

    A fence object may be shared by threads like a ``threading.Lock``: it remembers the
    holder id of every lease it granted until that lease is released or found lost, so
    ``renew``/``release`` can name the exact lease (holder id and token are compared by
    the issuer in one atomic step).
    """

    def __init__(self, name: str, ttl: float = DEFAULT_TTL, *, wakes_on_release: bool) -> None:
        self.name = check_name(name)
        self.ttl = check_ttl(ttl)
        self._ttl_ms = _millis(self.ttl)
        self._wakes_on_release = wakes_on_release
        # token -> holder id; single dict operations are atomic, so threads need no lock
        self._holders: dict[int, str] = {}
        self._lost = threading.Event()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, ttl={self.ttl})"

    @property
    def lost(self) -> bool:
        """True once a background renewal of the current ``hold()`` found the lease lost."""
        return self._lost.is_set()

    # -- flows -------------------------------------------------------------------------

    def _first_attempt(self, timeout: object) -> tuple[TryAcquire, float | None]:
        """Check ``timeout``; the first attempt of an acquire, with a fresh holder id."""
        wait = check_timeout(timeout)
        return first_attempt(new_holder_id(), self._ttl_ms, wait, self._wakes_on_release), wait

    def _wait_flow(self, first: TryAcquire, busy: Busy, wait: float | None) -> Flow[int]:
        """The rest of an acquire whose first attempt found the lease busy."""
        return wait_flow(self.name, first, busy, wait, self._wakes_on_release)

    def _granted(self, token: int, first: TryAcquire) -> FenceToken:
        """Remember the lease just granted, so ``renew``/``release`` can name it."""
        self._holders[token] = cast(str, first.holder)  # made by new_holder_id
        acquire_log.debug("fence %r: acquired token %d (ttl %ss)", self.name, token, self.ttl)
        return FenceToken(token, self.name)

    def _renew_flow(self, token: object, ttl: object = None) -> Flow[None]:
        value, holder = self._lease_of(token)
        seconds = self.ttl if ttl is None else check_ttl(ttl)
        if not (yield Renew(value, holder, _millis(seconds))):
            self._forget(value)
            lost_log.warning("fence %r: lease of token %d lost (found at renew)", self.name, value)
            raise LeaseLost(self.name, value, "lease expired or was taken over before renew")
        renew_log.debug("fence %r: renewed token %d for %ss", self.name, value, seconds)

    def _released(self, token: int, released: bool) -> None:
        """Forget the lease of ``token``; ``LeaseLost`` if the release found it gone."""
        self._forget(token)
        if not released:
            lost_log.warning(
                "fence %r: lease of token %d lost (found at release)", self.name, token
            )
            raise LeaseLost(self.name, token, "lease expired or was taken over before release")
        release_log.debug("fence %r: released token %d", self.name, token)

    def _renewal_flow(self, token: FenceToken) -> Flow[None]:
        """Renew every ttl/3 until stopped; on loss set ``lost`` and end.

        A renewal that fails because the issuer is unreachable is retried sooner; once
        a whole ttl has passed since the last success the lease must be presumed lost.
        """
        interval = self.ttl / 3
        last_ok = time.monotonic()
        delay = interval
        while not (yield Sleep(delay)):
            try:
                yield from self._renew_flow(token)
            except LeaseLost:
                self._lost.set()
                return
            except FenceUnavailable as exc:
                left = self.ttl - (time.monotonic() - last_ok)
                if left <= 0:
                    lost_log.warning("fence %r: token %d presumed lost: %s", self.name, token, exc)
                    self._forget(token)
                    self._lost.set()
                    return
                delay = min(interval, left) / 2
                continue
            last_ok = time.monotonic()
            delay = interval

    # -- hold bookkeeping --------------------------------------------------------------

    def _hold_started(self) -> None:
        self._lost.clear()

    def _hold_finished(self, token: FenceToken) -> None:
        """Raise ``LeaseLost`` if renewal lost the lease during the hold."""
        if self._lost.is_set():
            raise LeaseLost(self.name, token, "lease was lost during hold()")

    def _renewal_crashed(self, token: FenceToken) -> None:
        """A renewal died of an unexpected error: the holder must not believe it holds."""
        lost_log.exception("fence %r: renewal of token %d failed", self.name, token)
        self._forget(token)
        self._lost.set()

    # -- helpers -----------------------------------------------------------------------

    def _lease_of(self, token: object) -> tuple[int, str]:
        value = check_token_for(token, self.name)
        holder = self._holders.get(value)
        if holder is None:
            raise LeaseLost(self.name, value, "this fence holds no lease with that token")
        return value, holder

    def _forget(self, token: int) -> None:
        self._holders.pop(token, None)


class _HolderIds:
    """Unique holder ids, cheaply: a random per-process prefix and a serial number.

    The prefix is drawn again in a forked child, so parent and child never share ids.
    """

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self._prefix = os.urandom(12).hex()
        self._serial = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._serial):x}"


#: A fresh holder id per acquisition: it names the exact lease in renew and release.
new_holder_id = _HolderIds()


def _millis(seconds: float) -> int:
    return max(1, round(seconds * 1000))
