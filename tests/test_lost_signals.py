"""Lost-lease signals of a hold (issue 22): ``on_lost``, ``wait_lost``, ``cancel_on_loss``.

The contract (``test_hold_signals_a_lost_lease``, ``test_hold_cancels_its_body_when_the_
lease_is_lost``) checks them on every backend; these are the cases around them, on the
memory issuer: a loss presumed because the issuer stayed unreachable (virtual time), a
loss found on leaving, a crashed renewal, callbacks that raise, waiters woken by a clean
end, and bad input.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from waiting import PATIENCE, joined, wait_until

import fencing
import fencing.aio
from fencing._base.flow import run_sync
from fencing.testing.simulation import VirtualClock


def test_an_issuer_unreachable_past_the_lease_runs_the_callbacks() -> None:
    """The renewal flow on virtual time: the issuer is down for more than a ttl, so the
    lease is presumed lost; the callback gets a ``LeaseLost`` caused by the outage."""
    clock = VirtualClock()

    class Down(fencing.MemoryIssuer):
        def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
            raise fencing.FenceUnavailable("backend down")

    fence = fencing.Fence(Down(clock), "down", ttl=0.09, clock=clock)
    hold = fence.hold(auto_renew=False)
    got: list[fencing.LeaseLost] = []
    hold.on_lost(got.append)
    state = fence._hold_started(fence.acquire(), hold._signal)

    def sleep(seconds: float) -> bool:
        clock.advance(seconds)
        return False

    run_sync(fence._renewal_flow(state), fence._calls.with_sleep(sleep))
    assert hold.lost and len(got) == 1
    assert got[0].token == state.token and "unreachable" in str(got[0])
    assert isinstance(got[0].__cause__, fencing.FenceUnavailable)


def test_a_loss_found_on_leaving_runs_the_callbacks_there() -> None:
    """Without a renewer the loss is found by the release on leaving: the callbacks run
    then, in the thread that leaves, before ``LeaseLost`` is raised."""
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("leaving", ttl=30, issuer=issuer)
    threads: list[threading.Thread] = []
    hold = fence.hold(
        auto_renew=False, on_lost=lambda _: threads.append(threading.current_thread())
    )
    with pytest.raises(fencing.LeaseLost), hold:
        issuer.force_release("leaving")
        assert not hold.wait_lost(0)  # nobody has looked yet
    assert hold.lost and threads == [threading.current_thread()]


def test_a_crashed_renewal_runs_the_callbacks() -> None:
    class Crashing(fencing.MemoryIssuer):
        def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
            raise RuntimeError("a bug in the issuer")

    fence = fencing.MemoryFence("crash", ttl=0.3, issuer=Crashing())
    got: list[fencing.LeaseLost] = []
    hold = fence.hold(on_lost=got.append)
    with pytest.raises(fencing.LeaseLost), hold:
        assert hold.wait_lost(PATIENCE)
    assert len(got) == 1 and "unexpected error" in str(got[0])


def test_a_failing_callback_is_logged_and_the_others_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("raising", ttl=0.3, issuer=issuer)
    got: list[fencing.LeaseLost] = []

    def broken(error: fencing.LeaseLost) -> None:
        raise ValueError("a bug in the callback")

    hold = fence.hold(on_lost=broken)
    hold.on_lost(got.append)
    with caplog.at_level(logging.ERROR, "fencing.lost"), pytest.raises(fencing.LeaseLost), hold:
        issuer.force_release("raising")
        assert hold.wait_lost(PATIENCE)
    assert len(got) == 1
    assert any("on_lost callback" in r.getMessage() for r in caplog.records)


def test_wait_lost_returns_false_on_a_timeout_and_when_the_hold_ends() -> None:
    """A watchdog thread waiting with no limit is woken when the hold ends cleanly."""
    fence = fencing.MemoryFence("clean", ttl=30, issuer=fencing.MemoryIssuer())
    hold = fence.hold()
    answers: list[bool] = []
    watchdog = threading.Thread(target=lambda: answers.append(hold.wait_lost()))
    watchdog.start()  # before the hold is entered: it waits all the same
    with hold:
        assert hold.wait_lost(0) is False
        assert hold.wait_lost(0.01) is False
    joined(watchdog)
    assert answers == [False] and not hold.lost


async def test_async_wait_lost_wakes_other_tasks() -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.aio.MemoryFence("tasks", ttl=0.3, issuer=issuer)
    hold = fence.hold()
    watcher = asyncio.create_task(hold.wait_lost())
    with pytest.raises(fencing.LeaseLost):
        async with hold:
            issuer.force_release("tasks")
            assert await asyncio.wait_for(watcher, PATIENCE) is True
    clean = fencing.aio.MemoryFence("clean", ttl=30, issuer=issuer).hold()
    waiting = asyncio.create_task(clean.wait_lost())
    async with clean:
        assert await clean.wait_lost(0) is False
        assert await clean.wait_lost(0.01) is False
    assert await asyncio.wait_for(waiting, PATIENCE) is False


async def test_cancel_on_loss_leaves_a_kept_lease_alone() -> None:
    """A body that ends while the lease is held is never cancelled, also inside a
    deadline of its own."""
    fence = fencing.aio.MemoryFence("kept", ttl=30, issuer=fencing.MemoryIssuer())
    hold = fence.hold(cancel_on_loss=True)

    async def body() -> int:
        async with hold as token:
            await asyncio.sleep(0)
        return token

    token = await asyncio.wait_for(body(), PATIENCE)
    assert token >= 1 and not hold.lost and not await hold.wait_lost(0)


async def test_an_outside_cancellation_is_not_turned_into_lease_lost() -> None:
    """A body cancelled from outside stays cancelled (the hold releases its lease)."""
    issuer = fencing.MemoryIssuer()
    fence = fencing.aio.MemoryFence("outside", ttl=30, issuer=issuer)
    entered = asyncio.Event()

    async def body() -> None:
        async with fence.hold(cancel_on_loss=True):
            entered.set()
            await asyncio.sleep(PATIENCE)

    task = asyncio.create_task(body())
    await asyncio.wait_for(entered.wait(), PATIENCE)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not issuer.status("outside").held


def test_bad_input_is_refused_before_any_io() -> None:
    issuer = fencing.MemoryIssuer()
    fence = fencing.MemoryFence("bad", ttl=30, issuer=issuer)
    with pytest.raises(TypeError):
        fence.hold(on_lost="not callable")  # type: ignore[arg-type]
    hold = fence.hold()
    with pytest.raises(TypeError):
        hold.on_lost(None)  # type: ignore[arg-type]
    for timeout, error in [(-1, ValueError), (float("nan"), ValueError), ("1", TypeError)]:
        with pytest.raises(error):
            hold.wait_lost(timeout)  # type: ignore[arg-type]
    afence = fencing.aio.MemoryFence("bad", ttl=30, issuer=issuer)
    with pytest.raises(TypeError):
        afence.hold(cancel_on_loss=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        afence.hold(on_lost=5)  # type: ignore[arg-type]
    assert not issuer.status("bad").held  # nothing was taken


def test_a_lease_gone_before_the_hold_began_starts_the_hold_lost() -> None:
    """An acquire whose reply came back after its lease's end (virtual time: the reply
    took longer than the ttl): the hold's first renewal, made at once because the
    acquire took more than a third of the ttl, finds the lease gone. The body is still
    entered (the acquire succeeded), with the loss already signalled, and leaving
    raises ``LeaseLost`` with nothing released."""
    clock = VirtualClock()

    class SlowReply(fencing.MemoryIssuer):
        def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | fencing.Busy:
            granted = super().try_acquire(name, holder, ttl_ms)
            clock.advance(2 * ttl_ms / 1000)  # the reply arrives after the lease's end
            return granted

    issuer = SlowReply(clock.monotonic)
    fence = fencing.Fence(issuer, "slow-reply", ttl=0.3, clock=clock)
    got: list[fencing.LeaseLost] = []
    hold = fence.hold(auto_renew=False, on_lost=got.append)
    with pytest.raises(fencing.LeaseLost) as info, hold as token:
        assert hold.lost and hold.wait_lost(0)
        assert got and got[0].token == token
    assert info.value.token == token
    assert issuer.status("slow-reply").holder is None  # nobody holds it: nothing to release


def test_a_lease_presumed_lost_is_released_once_the_issuer_answers() -> None:
    """The issuer keeps its leases with no expiry of its own (its clock stands still, as
    a ZooKeeper session's ephemeral znode that lived through an outage) and does not
    answer for a while: the blocking hold presumes its lease lost at its deadline and
    ends; once the issuer answers again, the lease is released behind it, so another
    holder can take it. (Before, a presumed-lost lease stayed held as long as the issuer
    kept it.)"""
    down = threading.Event()

    class Outage(fencing.MemoryIssuer):
        def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
            if down.is_set():
                raise fencing.FenceUnavailable("issuer unreachable")
            return super().renew(name, token, holder, ttl_ms)

        def release(self, name: str, token: int, holder: str) -> bool:
            if down.is_set():
                raise fencing.FenceUnavailable("issuer unreachable")
            return super().release(name, token, holder)

    issuer = Outage(VirtualClock().monotonic)  # a clock that stands still
    name = "presumed"
    fence = fencing.Fence(issuer, name, ttl=1.0)  # the release is tried for two ttls
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost), hold as token:
        down.set()
        assert hold.wait_lost(PATIENCE)
    held = issuer.status(name)
    assert (held.token, held.holder is not None) == (token, True)  # still held there
    down.clear()
    wait_until(lambda: issuer.status(name).holder is None, "the release behind the hold")


def test_a_release_the_issuer_did_not_answer_is_tried_again_behind_the_hold() -> None:
    """Leaving a hold while the issuer does not answer raises ``FenceUnavailable``; the
    lease (which this issuer never expires: its clock stands still) is released behind
    the hold once the issuer answers again, and a term's ``resign`` raises nothing."""
    down = threading.Event()

    class Outage(fencing.MemoryIssuer):
        def release(self, name: str, token: int, holder: str) -> bool:
            if down.is_set():
                raise fencing.FenceUnavailable("issuer unreachable")
            return super().release(name, token, holder)

    issuer = Outage(VirtualClock().monotonic)
    with pytest.raises(fencing.FenceUnavailable), fencing.Fence(issuer, "gone", 1.0).hold():
        down.set()
    term = fencing.Election(issuer, "term", 1.0).campaign("a")
    term.resign()  # the issuer is still down: handed over later, no error now
    assert issuer.status("gone").holder is not None and issuer.status("term").holder
    down.clear()
    wait_until(lambda: issuer.status("gone").holder is None, "the release behind the hold")
    wait_until(lambda: issuer.status("term").holder is None, "the release behind the term")
