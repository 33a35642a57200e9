"""``StaleHolderContract``: Kleppmann's timeline with a real process. A holder process
acquires, is frozen (``SIGSTOP``) past its lease, another holder takes a newer token and
writes through a guard; the frozen one is resumed, still believing it holds the lease, and
its write is refused at the guard, while its unfenced write, the control, lands over the
newer holder's. Its release afterwards ends nothing of the newer holder's.

The holder is a ``multiprocessing`` child (``processes``, a forkserver by default) that
connects with ``fencing.connect(holder_url)``. Linux only: the test reads ``/proc`` to see
the child stopped.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ... import AcquireTimeout, FenceUnavailable, FileStore, LeaseLost, StaleTokenError, connect
from ._helpers import MakeFence, _assert_after, _tries
from ._terms import LeaseTerms


def _frozen_holder(url: str, name: str, ttl: float, guarded: str, plain: str, out: Any) -> None:
    """In the child: acquire, report the token, freeze; once resumed, write through the
    guard and without one, then release; report each outcome."""
    backend = connect(url)
    fence = backend.fence(name, ttl)
    token = fence.acquire(timeout=60)
    out.send(int(token))
    os.kill(os.getpid(), signal.SIGSTOP)  # frozen here, past its lease
    try:
        FileStore(guarded).write(b"stale holder", token)
        out.send("accepted")
    except StaleTokenError:
        out.send("refused")
    Path(plain).write_bytes(b"stale holder")  # the control: nothing checks a token here
    try:
        fence.release(token)
        out.send("released")
    except (LeaseLost, FenceUnavailable) as exc:
        out.send(type(exc).__name__)
    backend.close()


def _stopped(pid: int) -> bool:
    """The process is stopped (state ``T`` in ``/proc``): its ``SIGSTOP`` has landed."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"


class StaleHolderContract(LeaseTerms):
    """The pause scenario on a backend. Provide ``holder_url``, the URL the holder process
    connects with (``fencing.connect``; on ZooKeeper with a short ``session_timeout``, so
    that the freeze outlasts the session), and ``make_fence(name, ttl)`` for the newer
    holder, on the same issuer. Where a frozen holder's lease does not end by itself (a
    PostgreSQL advisory lock lives with its connection), override ``end_frozen_lease``."""

    #: Seconds: the frozen holder's ttl, which the newer holder waits out.
    holder_ttl: ClassVar[float] = 1.0
    #: Where the holder process comes from (``multiprocessing``): a context whose
    #: children can import ``fencing``.
    processes: ClassVar[BaseContext] = multiprocessing.get_context("forkserver")

    @pytest.fixture
    def holder_url(self) -> str:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a holder_url fixture")

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_fence fixture")

    def end_frozen_lease(self, name: str) -> None:
        """Capability hook: end the frozen holder's lease of ``name`` the way the engine
        would for a holder that stopped answering (e.g. terminate its database session).
        By default nothing: the lease ends by its ttl (or its session times out), which
        the newer holder waits for."""

    def _receive(self, pipe: Connection, what: str) -> Any:
        assert pipe.poll(self.patience), f"the holder process never reported {what}"
        return pipe.recv()

    def test_a_holder_frozen_past_its_lease_is_refused_at_the_guard(
        self, holder_url: str, make_fence: MakeFence, tmp_path: Path
    ) -> None:
        name = self.fresh_name("frozen")
        guarded, plain = tmp_path / "guarded", tmp_path / "plain"
        mine, theirs = self.processes.Pipe(duplex=False)
        args = (holder_url, name, self.holder_ttl, str(guarded), str(plain), theirs)
        child = self.processes.Process(target=_frozen_holder, args=args)  # type: ignore[attr-defined]
        child.start()
        assert child.pid is not None
        try:
            old = self._receive(mine, "its token")
            for _ in _tries(self.patience, "the holder process to freeze"):
                assert child.exitcode is None, f"the holder ended ({child.exitcode})"
                if _stopped(child.pid):
                    break
            self.end_frozen_lease(name)
            successor = make_fence(name, self.long_ttl)
            newer = successor.acquire(timeout=self.patience)  # once the frozen lease ended
            _assert_after(newer, old, "the frozen holder's ")
            FileStore(guarded).write(b"newer holder", newer)
            plain.write_bytes(b"newer holder")
            os.kill(child.pid, signal.SIGCONT)
            late = self._receive(mine, "its late write")
            ending = self._receive(mine, "its release")  # after its unfenced write
            control = plain.read_bytes()
            child.join(self.patience)
        finally:
            child.kill()  # SIGKILL ends a stopped process too
            child.join(self.patience)
        assert control == b"stale holder", "the control: the unfenced late write did not land"
        assert late == "refused", f"the frozen holder's late write was {late}"
        assert FileStore(guarded).read_with_token() == (newer, b"newer holder")
        assert ending in ("LeaseLost", "FenceUnavailable"), f"its late release: {ending}"
        with pytest.raises(AcquireTimeout):  # the newer lease is untouched
            make_fence(name, self.long_ttl).acquire(timeout=0)
        successor.release(newer)


__all__ = ["StaleHolderContract"]
