"""Redlock read-write locks, written once: ``RedlockRWFlows``, the Redlock fence's flows
(``RedlockFlows``: quorum, validity, commit, give-back, wake-ups) run on the read-write
lock's per-node scripts (``_redlock_rw_scripts.RWScripts``), and the operators' status
and force release over every node. docs/redlock.md ("Read-write locks") has why the
fence's token argument carries over to read epochs.

Imports the Redlock flows, the read-write scripts, the single server's operator scripts
(run on each node) and the issuer protocols.
"""

from __future__ import annotations

from .._base.flow import Flow
from ..issuer import Busy, RWStatus
from ._redlock_flows import Broadcast, RedlockFlows, RedlockStep, answered
from ._redlock_rw_scripts import RWScripts, quorum_rw_status, redlock_rw_keys, rw_operate_keys
from ._rwlock_operate import RW_FORCE_RELEASE, RW_STATUS
from ._scripts import Script


class RedlockRWFlows(RedlockFlows):
    """``RedlockFlows`` with the read-write lock's operations (``ReadWrites``,
    ``OperatesReadWrites``): each is a fence flow on one side's scripts."""

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> Flow[RedlockStep, int | Busy]:
        return self.try_acquire(name, holder, ttl_ms, RWScripts(name, mode, queue_ms))

    def rw_renew(
        self, name: str, mode: str, token: int, holder: str, ttl_ms: int
    ) -> Flow[Broadcast, bool]:
        return self.renew(name, token, holder, ttl_ms, RWScripts(name, mode))

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Flow[Broadcast, bool]:
        return self.release(name, token, holder, RWScripts(name, mode))

    def rw_await(self, name: str, seconds: float) -> Flow[RedlockStep, None]:
        return self.await_release(name, seconds, redlock_rw_keys(name).released)

    def rw_status(self, name: str) -> Flow[Broadcast, RWStatus]:
        """The lock as a majority holds it (``quorum_rw_status``); a majority must
        answer, else ``FenceUnavailable``."""
        return self._rw_operate(name, RW_STATUS, (), "status")

    def rw_force_release(self, name: str) -> Flow[Broadcast, RWStatus]:
        """End every lease of the lock on every node, whoever holds it; each node raises
        its counter to the ended leases' token if it was below. The leases a majority
        held, as ``rw_status`` saw them."""
        return self._rw_operate(name, RW_FORCE_RELEASE, (b"0",), "force release")

    def _rw_operate(
        self, name: str, script: Script, argv: tuple[bytes, ...], what: str
    ) -> Flow[Broadcast, RWStatus]:
        step = self._everywhere((script, rw_operate_keys(name)[: script.numkeys] + argv))
        yield step
        self._raise_bugs(step.result)
        replies = [reply for reply in step.result if answered(reply)]
        if len(replies) < self.quorum:
            raise self._errors(name, step.result, what)
        return quorum_rw_status(name, replies, self.quorum)
