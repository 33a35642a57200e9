"""``LeaseTerms``: the capabilities and timings of the engine under test, which the fence
contracts and ``OperationsContract`` read and a subclass overrides."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from typing import ClassVar

from ... import Fence
from ..._lease.async_fence import AsyncFence
from ._drive import BLOCKING
from ._helpers import _in_time, _InTime


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
    #: still work on it, and the next holder gets a higher token after the release; and
    #: where a holder's crash or a lost lease is checked, the subclass's ``end_session``
    #: ends the holder's session, and the lease must end with it.
    expires_while_held: ClassVar[bool] = True

    #: Seconds: the ttl of a lease that a test lets expire (and the wait of the
    #: ``timeout`` checks). Tests wait about twice this long. Where steps need such a
    #: lease to be still live (a renew right after the acquire), a try that the machine
    #: was too slow for (``LeaseLost`` once ``short_ttl`` may have passed) is tried
    #: again, until ``patience``: a slow machine never fails a check.
    short_ttl: ClassVar[float] = 0.3
    #: Seconds: the ttl of a lease that must outlive a test step. Generous: nothing
    #: waits for it to expire (the tests release it), so it costs nothing, and a
    #: machine stalled for seconds between two calls still finds the lease held.
    long_ttl: ClassVar[float] = 30.0
    #: Seconds: the ttl of a lease kept alive by ``hold()``, which renews it every ttl/3.
    #: The hold check waits a little more than twice this long; a renewer that the
    #: machine stalled for 2/3 of it loses the lease, and the check is tried again.
    renewal_ttl: ClassVar[float] = 1.0
    #: How many ``renewal_ttl``s the hold check keeps its lease before another fence
    #: tries to take it: past the ttl by half, when a hold that never renewed, or renewed
    #: once and stopped (at a third of the ttl), has lost it. An engine that grants longer
    #: leases than asked (etcd rounds up to whole seconds) waits past what it grants.
    hold_check_ttls: ClassVar[float] = 1.5
    #: Seconds: how long something that must happen is waited for before the test fails.
    #: A limit against hangs, never a timing assertion.
    patience: ClassVar[float] = 30.0
    #: The racing check: this many threads (or tasks) each take the lease this many times.
    racers: ClassVar[int] = 8
    rounds: ClassVar[int] = 20

    def end_session(self, fence: Fence | AsyncFence) -> None:
        """Capability hook for ``expires_while_held = False``: end the session behind
        ``fence`` the way its holder's crash (or a pause past the session timeout) would,
        without releasing anything; e.g. expire a ZooKeeper session. The contract then
        checks that the lease ended with it: the next holder gets in with a higher token,
        and a ``hold()`` on it is marked lost. Engines whose leases expire by their ttl
        never need it."""
        raise NotImplementedError(
            f"{type(self).__name__} declares expires_while_held = False, so it must "
            "provide end_session(fence)"
        )

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Poll ``condition`` until it holds; fail after ``patience`` (a limit, not a timing)."""
        BLOCKING.run(BLOCKING.until(condition, what, self.patience))

    def in_time(self, what: str) -> Iterator[_InTime]:
        """Tries of steps on a lease of ``short_ttl`` that must be live at their end, each
        in a ``with`` block, until one ran before the lease may have expired::

            for attempt in self.in_time("a renew"):
                with attempt:
                    token = fence.acquire(timeout=0)
                    fence.renew(token, ttl=self.long_ttl)

        Where leases do not expire while held, every try counts."""
        ttl = self.short_ttl if self.expires_while_held else math.inf
        return _in_time(ttl, self.patience, what)

    @staticmethod
    def fresh_name(what: str) -> str:
        """A fence name no other test uses, so state left on a server never interferes."""
        return f"contract:{what}:{uuid.uuid4().hex}"
