"""``RWLockContract``: the promises of a read-write lock (docs/rwlock.md), checked through
``fencing.RWLock`` and, for the sharing of leases, ``fencing.aio.RWLock``.

What is checked: a writer excludes every other holder and gets a new token; readers
that hold together share one token (the read epoch), also two through one ``rw.read``,
each releasing its own lease; the epoch lies above every earlier write token and below
every later one, also for a reader whose lock read before, on a lock changed since by
another client (a write, readers of a new epoch); a waiting writer stops new readers
(writer preference); a crashed reader or writer frees its share at its lease's end;
renew and release act only for the exact lease, also at the issuer; a read token passed
to the write side (and the reverse) or another lock's token is a ``ValueError``; bad
input is refused before any I/O, with nothing taken; ``hold()`` renews and signals a
lease ended behind its back; racing readers and writers never break exclusion nor the
token order; blocking and asyncio locks of one name share leases and tokens.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import pytest

from ... import AcquireTimeout, LeaseLost, MemoryMark, StaleTokenError
from ..._primitives.rwlock import AsyncRWLock, ReadToken, RWLock, Side
from ...issuer import READ, WRITE, OperatesReadWrites, RWStatus
from ._helpers import (
    BAD_NAMES,
    BAD_TIMEOUTS,
    BAD_TOKENS,
    BAD_TTLS,
    _Background,
    _refuses,
    _run_threads,
)
from ._terms import LeaseTerms

#: ``make_rwlock(name, ttl)``: a fresh blocking read-write lock on the backend under test.
MakeRWLock = Callable[[str, float], RWLock]
#: ``make_async_rwlock(name, ttl)``: a fresh asyncio read-write lock on the same backend
#: (called inside the test's event loop).
MakeAsyncRWLock = Callable[[str, float], AsyncRWLock]


class _Inside:
    """What racing readers and writers report as they enter and leave: who is inside
    now, the epoch of the readers inside, and every breach of the rules. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.readers = 0
        self.writers = 0
        self.epoch = 0
        self.highest = 0  # the highest token seen entering so far
        self.entries = 0
        self.breaches: list[str] = []

    def enter(self, token: int, write: bool) -> None:
        with self._lock:
            self.entries += 1
            if self.writers or (write and self.readers):
                self.breaches.append(
                    f"{'writer' if write else 'reader'} {token} entered beside a writer or readers"
                )
            if write and token <= self.highest:
                self.breaches.append(f"write token {token} after {self.highest}")
            if not write and self.readers and token != self.epoch:
                self.breaches.append(f"reader {token} beside readers of epoch {self.epoch}")
            if not write and token < self.highest:
                self.breaches.append(f"read epoch {token} after token {self.highest}")
            self.highest = max(self.highest, token)
            if write:
                self.writers += 1
            else:
                self.readers += 1
                self.epoch = token

    def leave(self, write: bool) -> None:
        with self._lock:
            if write:
                self.writers -= 1
            else:
                self.readers -= 1


class _Renewals(logging.Handler):
    """Counts the renewals of one name logged on ``fencing.renew``."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.DEBUG)
        self.name = name
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and record.args and record.args[0] == self.name:
            self.count += 1


@contextlib.contextmanager
def _renewals(name: str) -> Iterator[_Renewals]:
    """The renewals of ``name`` counted while in the block (``fencing.renew``, debug)."""
    logger = logging.getLogger("fencing.renew")
    handler, level = _Renewals(name), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _refused(try_acquire: Callable[[], Any]) -> bool:
    """Whether ``try_acquire`` (an ``acquire(timeout=0)``) raises ``AcquireTimeout``."""
    try:
        try_acquire()
    except AcquireTimeout:
        return True
    return False


class RWLockContract(LeaseTerms):
    """The promises of a read-write lock on a backend. Provide ``make_rwlock(name, ttl)``
    returning a fresh ``fencing.RWLock`` and ``make_async_rwlock(name, ttl)`` returning
    a ``fencing.aio.RWLock`` on the same issuer; every call with the same name must reach
    the same lock (as separate processes would)."""

    #: Seconds: the ttl of a lease kept by ``hold()``, renewed every third of it.
    hold_ttl: float = 1.0
    #: The racing check: readers and writers (threads), each entering this often.
    rw_readers: int = 4
    rw_writers: int = 2
    rw_rounds: int = 8

    @pytest.fixture
    def make_rwlock(self) -> MakeRWLock:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_rwlock fixture")

    @pytest.fixture
    def make_async_rwlock(self) -> MakeAsyncRWLock:
        """Provided by the subclass."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_async_rwlock fixture")

    def test_a_writer_excludes_everyone_and_gets_a_new_token(self, make_rwlock: MakeRWLock) -> None:
        name = self.fresh_name("rw-writer")
        rw, other = make_rwlock(name, self.long_ttl), make_rwlock(name, self.long_ttl)
        first = rw.write.acquire(timeout=0)
        assert _refused(lambda: other.write.acquire(timeout=0)), "a second writer got in"
        assert _refused(lambda: other.read.acquire(timeout=0)), "a reader got in beside a writer"
        rw.write.release(first)
        second = other.write.acquire(timeout=0)
        assert second > first, f"write token {second} after {first}"
        other.write.release(second)

    def test_readers_together_share_one_token_and_exclude_writers(
        self, make_rwlock: MakeRWLock
    ) -> None:
        name = self.fresh_name("rw-epoch")
        rw, other = make_rwlock(name, self.long_ttl), make_rwlock(name, self.long_ttl)
        first, second = rw.read.acquire(timeout=0), rw.read.acquire(timeout=0)
        third = other.read.acquire(timeout=0)
        assert first == second == third, f"readers together got {first}, {second}, {third}"
        assert _refused(lambda: other.write.acquire(timeout=0)), "a writer got in beside readers"
        rw.read.release(first)  # each of the two leases of one rw.read is its own
        rw.read.renew(second)
        assert _refused(lambda: other.write.acquire(timeout=0)), "a writer got in beside readers"
        rw.read.release(second)
        other.read.release(third)
        writer = other.write.acquire(timeout=0)  # every read lease ended at the issuer
        assert writer > first, f"write token {writer} after the read epoch {first}"
        other.write.release(writer)

    def test_the_read_epoch_lies_between_writes(self, make_rwlock: MakeRWLock) -> None:
        name = self.fresh_name("rw-order")
        rw = make_rwlock(name, self.long_ttl)
        tokens: list[int] = []
        for _ in range(2):
            write = rw.write.acquire(timeout=0)
            rw.write.release(write)
            read = rw.read.acquire(timeout=0)
            rw.read.release(read)
            tokens += [write, read]
        assert tokens == sorted(set(tokens)), f"write, epoch, write, epoch: {tokens}"

    def test_a_reader_that_read_before_sees_what_others_did_since(
        self, make_rwlock: MakeRWLock
    ) -> None:
        """An issuer that keeps what its last take knew (etcd, ZooKeeper) must learn of
        a write, and of readers of a new epoch, that another client made since."""
        name = self.fresh_name("rw-since")
        rw, other = make_rwlock(name, self.long_ttl), make_rwlock(name, self.long_ttl)
        rw.read.release(rw.read.acquire(timeout=0))
        write = other.write.acquire(timeout=0)
        other.write.release(write)
        after = rw.read.acquire(timeout=0)
        assert after > write, f"read epoch {after} after the write token {write}"
        rw.read.release(after)
        inside = other.read.acquire(timeout=0)
        joined = rw.read.acquire(timeout=0)
        assert joined == inside, f"a reader got {joined} beside readers of epoch {inside}"
        rw.read.release(joined)
        other.read.release(inside)

    def test_a_waiting_writer_stops_new_readers(self, make_rwlock: MakeRWLock) -> None:
        name = self.fresh_name("rw-preference")
        rw, newcomer = make_rwlock(name, self.long_ttl), make_rwlock(name, self.long_ttl)
        reading = rw.read.acquire(timeout=0)
        writer = make_rwlock(name, self.long_ttl).write
        waiting = _Background(lambda: writer.acquire(timeout=self.patience))

        def reader_refused() -> bool:
            try:
                token = newcomer.read.acquire(timeout=0)
            except AcquireTimeout:
                return True
            newcomer.read.release(token)
            return False

        self.wait_until(reader_refused, "a new reader refused while a writer waits")
        rw.read.release(reading)
        token = waiting.result(self.patience)
        assert token > reading, f"write token {token} after the read epoch {reading}"
        writer.release(token)

    def test_a_crashed_reader_or_writer_frees_its_share_at_its_lease_end(
        self, make_rwlock: MakeRWLock
    ) -> None:
        name = self.fresh_name("rw-expiry")
        crashed, live = make_rwlock(name, self.short_ttl), make_rwlock(name, self.long_ttl)
        epoch = crashed.read.acquire(timeout=0)  # never released
        self._crash(crashed.read)
        write = live.write.acquire(timeout=self.patience)
        assert write > epoch, f"write token {write} after the read epoch {epoch}"
        live.write.release(write)
        stale = crashed.write.acquire(timeout=0)  # never released
        self._crash(crashed.write)
        read = live.read.acquire(timeout=self.patience)
        assert read > stale, f"read epoch {read} after the write token {stale}"
        live.read.release(read)
        with pytest.raises(LeaseLost):
            crashed.read.release(epoch)
        with pytest.raises(LeaseLost):
            crashed.write.renew(stale)

    def _crash(self, side: Any) -> None:
        """A holder of ``side`` crashes: its lease expires (``short_ttl``), or where a
        lease lives with its session (``expires_while_held`` False) the session ends."""
        if not self.expires_while_held:
            self.end_session(side)

    def test_renew_and_release_act_only_for_the_exact_lease(self, make_rwlock: MakeRWLock) -> None:
        name = self.fresh_name("rw-holder")
        rw, other = make_rwlock(name, self.long_ttl), make_rwlock(name, self.long_ttl)
        read = rw.read.acquire(timeout=0)
        assert isinstance(read, ReadToken), f"a read acquire gave {read!r}"
        with pytest.raises(ValueError):
            rw.write.release(read)  # a read token to the write side
        with pytest.raises(LeaseLost):
            other.read.release(read)  # not a lease of that object
        side = rw.read.issuer  # the issuer itself compares holder and token
        assert not side.release(name, int(read), "not-the-holder"), "released a stranger's read"
        joined = other.read.acquire(timeout=0)  # a reader joining the epoch, not beginning it
        for reader, token in ((rw, read), (other, joined)):
            assert isinstance(token, ReadToken), f"a read acquire gave {token!r}"
            assert not reader.read.issuer.release(name, int(token) + 1, token.lease), (
                "released a read lease named with another token"
            )
        other.read.release(joined)
        rw.read.release(read)
        with pytest.raises(LeaseLost):
            rw.read.release(read)
        with pytest.raises(LeaseLost):
            rw.read.renew(read)
        write = rw.write.acquire(timeout=0)
        with pytest.raises(ValueError):
            rw.read.release(write)  # a write token to the read side
        assert not rw.write.issuer.release(name, int(write), "not-the-holder"), (
            "a stranger released"
        )
        stranger = make_rwlock(self.fresh_name("rw-stranger"), self.long_ttl)
        foreign = stranger.write.acquire(timeout=0)
        with pytest.raises(ValueError):
            rw.write.release(foreign)  # another lock's token
        stranger.write.release(foreign)
        rw.write.renew(write)
        rw.write.release(write)
        with pytest.raises(LeaseLost):
            rw.write.release(write)

    # Each bad-input check runs its whole table in one test (one fixture for all the
    # values, which fail before any I/O; a failure names the value that got through).

    def test_a_bad_name_is_refused(self, make_rwlock: MakeRWLock) -> None:
        for bad, error in BAD_NAMES:
            with _refuses(error, f"name {bad!r}"):
                make_rwlock(bad, self.long_ttl)

    def test_a_bad_ttl_is_refused_and_nothing_changes(self, make_rwlock: MakeRWLock) -> None:
        name = self.fresh_name("rw-bad-ttl")
        for bad, error in BAD_TTLS:
            with _refuses(error, f"a lock's ttl {bad!r}"):
                make_rwlock(name, bad)
        rw = make_rwlock(name, self.long_ttl)
        for side in (rw.read, rw.write):
            token = side.acquire(timeout=0)
            for bad, error in BAD_TTLS:
                with _refuses(error, f"renew's ttl {bad!r}"):
                    side.renew(token, bad)
            side.release(token)  # still held: the renews changed nothing

    def test_a_bad_timeout_is_refused_and_nothing_is_taken(self, make_rwlock: MakeRWLock) -> None:
        name = self.fresh_name("rw-bad-timeout")
        rw = make_rwlock(name, self.long_ttl)
        for side in (rw.read, rw.write):
            for bad, error in BAD_TIMEOUTS:
                with _refuses(error, f"timeout {bad!r}"):
                    side.acquire(timeout=bad)
        write = rw.write.acquire(timeout=0)  # nothing was taken, no writer marked waiting
        rw.write.release(write)

    def test_a_bad_token_is_refused_and_nothing_is_released(self, make_rwlock: MakeRWLock) -> None:
        rw = make_rwlock(self.fresh_name("rw-bad-token"), self.long_ttl)
        for side in (rw.read, rw.write):
            token = side.acquire(timeout=0)
            for bad, error in BAD_TOKENS:
                with _refuses(error, f"release's token {bad!r}"):
                    side.release(bad)
            side.release(token)

    @pytest.mark.parametrize("mode", ["read", "write"])
    def test_hold_renews_and_signals_a_lease_ended_behind_its_back(
        self, make_rwlock: MakeRWLock, mode: str
    ) -> None:
        name = self.fresh_name(f"rw-hold-{mode}")
        rw, other = make_rwlock(name, self.hold_ttl), make_rwlock(name, self.long_ttl)
        side = rw.read if mode == "read" else rw.write
        with _renewals(name) as renewed, side.hold() as token:
            self.wait_until(lambda: renewed.count >= 3, "three renewals (a whole ttl)")
            assert _refused(lambda: other.write.acquire(timeout=0)), "a writer got in past a hold"
        calls: list[LeaseLost] = []
        hold = side.hold(on_lost=calls.append)
        with pytest.raises(LeaseLost), hold as token:
            holder = token.lease if isinstance(token, ReadToken) else side._holders[int(token)]
            assert side.issuer.release(name, int(token), holder), "the hold's lease was not held"
            assert hold.wait_lost(self.patience), "the hold never found its lease lost"
        assert len(calls) == 1, f"on_lost called {len(calls)} times"

    def test_racing_readers_and_writers_keep_exclusion_and_token_order(
        self, make_rwlock: MakeRWLock
    ) -> None:
        name = self.fresh_name("rw-race")
        inside = _Inside()

        def racer(write: bool) -> Callable[[], None]:
            rw = make_rwlock(name, self.long_ttl)
            side = rw.write if write else rw.read

            def run() -> None:
                for _ in range(self.rw_rounds):
                    token = side.acquire(timeout=self.patience)
                    inside.enter(token, write)
                    inside.leave(write)
                    side.release(token)

            return run

        racers = [racer(False) for _ in range(self.rw_readers)]
        racers += [racer(True) for _ in range(self.rw_writers)]
        errors = _run_threads(racers, self.patience)
        _check(inside, errors, len(racers) * self.rw_rounds)

    def test_an_operator_sees_the_holders_and_force_release_ends_their_leases(
        self, make_rwlock: MakeRWLock
    ) -> None:
        name = self.fresh_name("rw-operate")
        rw, other = make_rwlock(name, self.long_ttl), make_rwlock(name, self.long_ttl)
        operator = cast(Side, rw.read.issuer).issuer
        if not isinstance(operator, OperatesReadWrites):
            pytest.fail(f"{operator!r} has no OperatesReadWrites (fencing status --rwlock)")
        assert not operator.rw_status(name).held, "a lock never used is held"
        assert not operator.rw_force_release(name).held, "released a lock never used"
        first, second = rw.read.acquire(timeout=0), other.read.acquire(timeout=0)
        assert isinstance(first, ReadToken) and isinstance(second, ReadToken)
        seen = operator.rw_status(name)
        _check_status(seen, READ, first, {first.lease, second.lease}, self.long_ttl)
        ended = operator.rw_force_release(name)
        _check_status(ended, READ, first, {first.lease, second.lease}, self.long_ttl)
        assert not operator.rw_status(name).held, f"held after a force release: {seen}"
        assert not operator.rw_force_release(name).held, "a second force release ended a lease"
        with pytest.raises(LeaseLost):
            rw.read.renew(first)
        with pytest.raises(LeaseLost):
            other.read.release(second)
        mark = MemoryMark()  # the resource the evicted readers claimed
        mark.claim(first)
        write = other.write.acquire(timeout=0)  # no reader is left to keep a writer out
        _check_status(operator.rw_status(name), WRITE, write, None, self.long_ttl)
        _check_status(operator.rw_force_release(name), WRITE, write, None, self.long_ttl)
        with pytest.raises(LeaseLost):
            other.write.renew(write)
        after = rw.write.acquire(timeout=0)
        assert after > write > first, f"tokens {first}, {write}, {after} after force releases"
        mark.claim(after)  # the next holder claims: the evicted writer is refused
        with pytest.raises(StaleTokenError):
            mark.claim(write)
        rw.write.release(after)

    async def test_blocking_and_asyncio_share_leases_and_tokens(
        self, make_rwlock: MakeRWLock, make_async_rwlock: MakeAsyncRWLock
    ) -> None:
        name = self.fresh_name("rw-aio")
        blocking, aio = make_rwlock(name, self.long_ttl), make_async_rwlock(name, self.long_ttl)
        write = blocking.write.acquire(timeout=0)
        with pytest.raises(AcquireTimeout):
            await aio.read.acquire(timeout=0)
        blocking.write.release(write)
        read = await aio.read.acquire(timeout=0)
        also = blocking.read.acquire(timeout=0)
        assert read == also > write, f"epochs {read} and {also} after the write token {write}"
        with pytest.raises(AcquireTimeout):
            await aio.write.acquire(timeout=0)
        await aio.read.release(read)
        blocking.read.release(also)
        async with aio.write.hold() as token:
            assert token > read, f"write token {token} after the read epoch {read}"
            assert _refused(lambda: blocking.read.acquire(timeout=0)), "a reader beside a writer"


def _check(inside: _Inside, errors: Sequence[BaseException], entries: int) -> None:
    assert not errors, f"racers failed: {errors!r}"
    assert not inside.breaches, f"the rules broke: {inside.breaches[:5]}"
    assert inside.entries == entries, f"{inside.entries} of {entries} entries"


def _check_status(
    status: RWStatus, mode: str, token: int, holders: set[str] | None, ttl: float
) -> None:
    """``status`` shows live leases of ``mode`` with ``token`` (and, if given, exactly
    ``holders``; else one holder), each with at most ``ttl`` left."""
    assert (status.held, status.mode, status.token) == (True, mode, token), status
    assert set(status.holders) == holders if holders else len(status.holders) == 1, status
    assert all(left is None or 0 < left <= ttl for left in status.holders.values()), status
    assert status.last_token is not None and status.last_token >= token, status
