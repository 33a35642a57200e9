"""``MarkContract``: the promises of a high-water mark, through ``fencing.guard``."""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any, ClassVar

import pytest

from ... import FenceToken, StaleTokenError, guard
from ._helpers import (
    BAD_MARK_TOKENS,
    MakeMark,
    _Background,
    _ids,
    _mark_waits_seen,
    _run_threads,
    racing_tokens,
)


class MarkContract:
    """The promises of a high-water mark, checked through ``fencing.guard``.

    Subclass it and provide the ``make_mark`` fixture: ``make_mark()`` returns a fresh,
    empty mark. Tokens below the mark are refused (``StaleTokenError``, the guarded
    function not called), equal ones accepted, higher ones raise the mark, which stays
    raised when the guarded call fails; bad tokens are refused with nothing changed;
    racing threads never get a lower token admitted after a higher one was. ``claim``
    raises the mark without calling anything, refuses a lower token the same way, is a
    no-op for the mark's own token, and waits for a running guarded call exactly when
    the mark serializes calls.
    """

    #: Capability. True (the default): the mark holds its lock across check, raise and
    #: the guarded call, so guarded calls never overlap and run in token order
    #: (``MemoryMark``, ``FileMark``); such a mark logs ``"<resource>: waits for the
    #: mark"`` (debug, logger ``fencing.guard``) when an admission or claim finds a call
    #: running and waits for it, which the contract waits for as the proof that it did.
    #: False: only check-and-raise is atomic and the call
    #: runs outside it (``RedisMark``); the contract then asserts that model: a newer
    #: token is admitted and its call runs while an older admitted call still runs, and
    #: the older token is refused from then on.
    serializes_calls: ClassVar[bool] = True

    #: The racing check: this many threads each guard this many calls.
    racers: ClassVar[int] = 6
    rounds: ClassVar[int] = 40
    #: Seconds: a limit against hangs, never a timing assertion.
    patience: ClassVar[float] = 30.0

    @pytest.fixture
    def make_mark(self) -> MakeMark:
        """Provided by the subclass: ``make_mark()`` -> a fresh, empty mark."""
        raise NotImplementedError(f"{type(self).__name__} must provide a make_mark fixture")

    def test_fresh_mark_is_empty(self, make_mark: MakeMark) -> None:
        assert make_mark().current is None

    def test_lower_token_is_refused_without_calling(self, make_mark: MakeMark) -> None:
        calls: list[str] = []
        write = guard(calls.append, mark=make_mark(), name="ledger")
        write(34, "fresh")
        with pytest.raises(StaleTokenError) as info:
            write(33, "stale")
        assert (info.value.token, info.value.current, info.value.resource) == (33, 34, "ledger")
        assert calls == ["fresh"], f"the guarded function ran for a stale token: {calls}"
        assert write.mark.current == 34

    def test_equal_token_is_accepted_and_higher_raises_the_mark(self, make_mark: MakeMark) -> None:
        """The same lease may call again; a newer lease's token becomes the mark."""
        calls: list[str] = []
        write = guard(calls.append, mark=make_mark())
        write(0, "first")
        write(5, "a")
        write(5, "same lease again")
        write(FenceToken(6, "fence"), "newer")
        assert calls == ["first", "a", "same lease again", "newer"]
        assert write.mark.current == 6
        with pytest.raises(StaleTokenError):
            write(5, "superseded")
        assert calls[-1] == "newer"

    @pytest.mark.parametrize(
        ("mark", "token", "admitted"),
        [
            (9, 10, True),  # more digits: higher
            (10, 9, False),  # fewer digits: lower, although "9" > "10" as text
            (2**62 + 1, 2**62, False),  # equal as doubles: must compare exactly
            (2**62, 2**62 + 1, True),
            (2**63 - 2, 2**63 - 1, True),
            (2**63 - 1, 2**63 - 1, True),
            (0, 0, True),
        ],
    )
    def test_tokens_compare_exactly(
        self, make_mark: MakeMark, mark: int, token: int, admitted: bool
    ) -> None:
        """Marks compare 64-bit tokens as integers: not as text, not as floats."""
        calls: list[int] = []
        guarded = guard(calls.append, mark=make_mark())
        guarded(mark, mark)
        if admitted:
            guarded(token, token)
            assert calls == [mark, token] and guarded.mark.current == token
        else:
            with pytest.raises(StaleTokenError):
                guarded(token, token)
            assert calls == [mark] and guarded.mark.current == mark

    def test_mark_stays_raised_when_the_call_fails(self, make_mark: MakeMark) -> None:
        """A token is admitted before the call: if the call fails, the same token may
        retry and a lower one stays refused (its lease was superseded anyway)."""
        attempts: list[int] = []

        def flaky(n: int) -> int:
            attempts.append(n)
            if n == 1:
                raise OSError("disk full")
            return n

        guarded = guard(flaky, mark=make_mark())
        guarded(5, 0)
        with pytest.raises(OSError):
            guarded(7, 1)
        assert guarded.mark.current == 7
        assert guarded(7, 2) == 2
        with pytest.raises(StaleTokenError):
            guarded(6, 3)
        assert attempts == [0, 1, 2]

    @pytest.mark.parametrize(("token", "error"), BAD_MARK_TOKENS, ids=_ids(BAD_MARK_TOKENS))
    def test_bad_token_is_refused_with_nothing_changed(
        self, make_mark: MakeMark, token: Any, error: type[Exception]
    ) -> None:
        calls: list[int] = []
        guarded = guard(calls.append, mark=make_mark())
        with pytest.raises(error):
            guarded(token, 1)
        assert calls == [] and guarded.mark.current is None
        guarded(3, 3)
        with pytest.raises(error):
            guarded(token, 2)
        assert calls == [3] and guarded.mark.current == 3

    def test_claim_raises_the_mark_without_calling(self, make_mark: MakeMark) -> None:
        """The read-then-write window: once the new holder has claimed (before reading),
        the old holder's write that would land before the new holder's is refused."""
        calls: list[str] = []
        write = guard(calls.append, mark=make_mark(), name="ledger")
        write(3, "old holder, earlier")
        write.claim(5)
        assert write.mark.current == 5, f"claim(5) left the mark at {write.mark.current}"
        assert calls == ["old holder, earlier"], f"claim called the guarded function: {calls}"
        with pytest.raises(StaleTokenError) as info:
            write(4, "stale, between the read and the write")
        assert (info.value.token, info.value.current, info.value.resource) == (4, 5, "ledger")
        write(5, "new holder, computed from its read")
        assert calls == ["old holder, earlier", "new holder, computed from its read"]

    def test_claim_below_the_mark_is_refused_and_equal_is_a_no_op(
        self, make_mark: MakeMark
    ) -> None:
        mark = make_mark()
        mark.claim(7)
        mark.claim(FenceToken(7, "fence"))  # the same lease again
        assert mark.current == 7
        with pytest.raises(StaleTokenError) as info:
            mark.claim(6, "orders")
        assert (info.value.token, info.value.current, info.value.resource) == (6, 7, "orders")
        assert mark.current == 7, "a refused claim changed the mark"
        mark.claim(2**63 - 1)
        assert mark.current == 2**63 - 1

    @pytest.mark.parametrize(("token", "error"), BAD_MARK_TOKENS, ids=_ids(BAD_MARK_TOKENS))
    def test_claim_with_a_bad_token_changes_nothing(
        self, make_mark: MakeMark, token: Any, error: type[Exception]
    ) -> None:
        mark = make_mark()
        with pytest.raises(error):
            mark.claim(token)
        assert mark.current is None
        mark.claim(3)
        with pytest.raises(error):
            guard(print, mark=mark).claim(token)
        assert mark.current == 3

    def test_claim_waits_for_a_running_call_or_not_as_declared(self, make_mark: MakeMark) -> None:
        """With ``serializes_calls`` a claim is ordered after a guarded call that runs (so
        the claimer's read sees that call's effect); without, it returns at once."""
        started, proceed = threading.Event(), threading.Event()
        order: list[str] = []

        def work() -> None:
            order.append("call starts")
            started.set()
            proceed.wait(self.patience)
            order.append("call ends")

        guarded = guard(work, mark=make_mark())
        call = _Background(lambda: guarded(5))
        assert started.wait(self.patience)

        def claim() -> None:
            guarded.claim(6)
            order.append("claimed")

        with _mark_waits_seen() as waits:
            claiming = _Background(claim)
            if self.serializes_calls:
                assert waits.wait(self.patience), "the claim never waited for the mark"
        if self.serializes_calls:
            assert claiming.running() and order == ["call starts"], "a claim overtook a call"
            proceed.set()
            claiming.result(self.patience)
            assert order == ["call starts", "call ends", "claimed"]
        else:
            claiming.result(self.patience)
            assert order == ["call starts", "claimed"]
            proceed.set()
        call.result(self.patience)
        assert guarded.mark.current == 6

    def test_racing_admissions_keep_token_order(self, make_mark: MakeMark) -> None:
        """Threads guard calls with climbing tokens and replays of old ones: a token
        admitted after another one's call returned is never lower, every refusal names a
        mark that a higher admitted token had set, and the mark ends at the highest."""
        lock = threading.Lock()
        called: list[int] = []

        def record(token: int) -> None:
            with lock:
                called.append(token)

        guarded = guard(record, mark=make_mark(), name="race")
        admitted: list[tuple[int, float, float]] = []  # token, began, returned
        refused: list[tuple[int, int | None, float]] = []  # token, mark, returned

        def racer(me: int) -> None:
            for token in racing_tokens(me, self.racers, self.rounds):
                began = time.monotonic()
                try:
                    guarded(token, token)
                except StaleTokenError as exc:
                    refused.append((token, exc.current, time.monotonic()))
                else:
                    admitted.append((token, began, time.monotonic()))

        assert not _run_threads([partial(racer, me) for me in range(self.racers)], self.patience)
        assert len(admitted) + len(refused) == self.racers * self.rounds
        assert refused, "replayed tokens must be refused at least sometimes"
        for earlier, _, returned in admitted:
            for later, began, _ in admitted:
                if returned < began:
                    assert earlier <= later, f"{later} admitted after {earlier}"
        for token, mark, returned in refused:
            assert mark is not None and mark > token, f"{token} refused by the mark {mark}"
            assert any(t >= mark and began < returned for t, began, _ in admitted), (
                f"{token} refused by {mark}, which no admitted token had set"
            )
        assert sorted(called) == sorted(t for t, _, _ in admitted)
        if self.serializes_calls:
            assert called == sorted(called), "serialized calls ran out of token order"
        assert guarded.mark.current == max(t for t, _, _ in admitted)

    def test_guarded_calls_serialize_or_overlap_as_declared(self, make_mark: MakeMark) -> None:
        """With ``serializes_calls``: a second call waits until the first returns. Without:
        a newer token's call runs while an older admitted call is still running, and the
        older token is refused from then on."""
        started, proceed = threading.Event(), threading.Event()
        order: list[str] = []

        def work(label: str) -> None:
            order.append(f"start {label}")
            if label == "old":
                started.set()
                proceed.wait(self.patience)
            order.append(f"end {label}")

        guarded = guard(work, mark=make_mark())
        old = _Background(lambda: guarded(5, "old"))
        assert started.wait(self.patience)
        if self.serializes_calls:
            with _mark_waits_seen() as waits:
                new = _Background(lambda: guarded(6, "new"))
                assert waits.wait(self.patience), "the second call never waited for the mark"
            assert new.running() and order == ["start old"], "a call overlapped another one"
            proceed.set()
            old.result(self.patience)
            new.result(self.patience)
            assert order == ["start old", "end old", "start new", "end new"]
        else:
            guarded(6, "new")  # not held up by the running older call
            with pytest.raises(StaleTokenError):
                guarded(5, "old again")
            proceed.set()
            old.result(self.patience)
            assert order == ["start old", "start new", "end new", "end old"]
