"""guard with a RedisMark on a real redis-server: atomic check-and-raise shared by
processes, exact comparison of 64-bit tokens, script reload, FenceUnavailable."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from racing import append_line, token_plan
from redis.backoff import NoBackoff
from redis.retry import Retry

import fencing
from fencing import FenceUnavailable, RedisMark, StaleTokenError, guard
from fencing.testing.servers import RedisServer


def test_stale_refused_equal_accepted(redis_client: redis.Redis) -> None:
    calls: list[str] = []
    write = guard(calls.append, mark=RedisMark(redis_client, "mark:a"), name="ledger")
    assert write.mark.current is None
    write(34, "fresh")
    with pytest.raises(StaleTokenError) as info:
        write(33, "stale")
    assert (info.value.token, info.value.current, info.value.resource) == (33, 34, "ledger")
    write(34, "again")
    write(fencing.FenceToken(35, "f"), "newer")
    assert calls == ["fresh", "again", "newer"]
    assert redis_client.get("mark:a") == b"35" and write.mark.current == 35


@pytest.mark.parametrize(
    ("mark", "token", "admitted"),
    [
        (9, 10, True),  # longer decimal: higher
        (10, 9, False),  # shorter decimal: lower, although "9" > "10" as strings
        (2**62 + 1, 2**62, False),  # equal as Lua doubles: must compare exactly
        (2**62, 2**62 + 1, True),
        (2**63 - 2, 2**63 - 1, True),
        (2**63 - 1, 2**63 - 1, True),
        (0, 0, True),
    ],
)
def test_tokens_compare_exactly(
    redis_client: redis.Redis, mark: int, token: int, admitted: bool
) -> None:
    guarded = guard(lambda: "ran", mark=RedisMark(redis_client, "mark:x"))
    guarded(mark)
    if admitted:
        assert guarded(token) == "ran"
        assert guarded.mark.current == token
    else:
        with pytest.raises(StaleTokenError):
            guarded(token)
        assert guarded.mark.current == mark


def test_failed_call_keeps_the_mark_raised(redis_client: redis.Redis) -> None:
    def fail() -> None:
        raise OSError("boom")

    guarded = guard(fail, mark=RedisMark(redis_client, "mark:f"))
    with pytest.raises(OSError):
        guarded(7)
    assert guarded.mark.current == 7
    with pytest.raises(StaleTokenError):
        guarded(6)


def test_script_flush_is_survived(redis_client: redis.Redis) -> None:
    guarded = guard(lambda: None, mark=RedisMark(redis_client, "mark:s"))
    guarded(1)
    redis_client.script_flush()
    guarded(2)
    with pytest.raises(StaleTokenError):
        guarded(1)


def test_bad_input(redis_client: redis.Redis) -> None:
    with pytest.raises(TypeError):
        RedisMark("redis://localhost", "k")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RedisMark(redis_client, b"k")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RedisMark(redis_client, "")
    calls: list[int] = []
    guarded = guard(calls.append, mark=RedisMark(redis_client, "mark:b"))
    for token in (True, "5", 5.0, None, -1, 2**63):
        with pytest.raises((TypeError, ValueError)):
            guarded(token, 1)  # type: ignore[arg-type]
    assert calls == [] and redis_client.exists("mark:b") == 0


def test_key_holding_something_else_is_unavailable(redis_client: redis.Redis) -> None:
    calls: list[int] = []
    guarded = guard(calls.append, mark=RedisMark(redis_client, "mark:w"))
    redis_client.set("mark:w", "not a number")
    with pytest.raises(FenceUnavailable, match="does not hold a mark"):
        guarded(5, 5)
    redis_client.delete("mark:w")
    redis_client.rpush("mark:w", "x")
    with pytest.raises(FenceUnavailable):
        guarded(5, 5)
    assert calls == []


def test_redis_stopped_is_unavailable(redis_factory: Callable[..., RedisServer]) -> None:
    server = redis_factory()
    no_retry = Retry(NoBackoff(), 0)  # the client's retry policy is the user's choice
    client = redis.Redis(port=server.port, socket_timeout=2, retry=no_retry)
    calls: list[int] = []
    guarded = guard(calls.append, mark=RedisMark(client, "mark:u"))
    guarded(1, 1)
    server.stop()
    with pytest.raises(FenceUnavailable) as info:
        guarded(2, 2)
    assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
    with pytest.raises(FenceUnavailable):
        _ = guarded.mark.current
    assert calls == [1]
    server.start()  # without persistence: the mark is gone, as documented
    guarded(0, 0)
    assert calls == [1, 0]
    client.close()


def test_admitted_calls_may_overlap(redis_client: redis.Redis) -> None:
    """What RedisMark does NOT promise: the call is outside Redis, so an admitted older
    call can still be running when a newer one runs."""
    inside, release = threading.Event(), threading.Event()
    order: list[str] = []

    def work(label: str) -> None:
        order.append(f"start {label}")
        if label == "old":
            inside.set()
            release.wait(10)
        order.append(f"end {label}")

    guarded = guard(work, mark=RedisMark(redis_client, "mark:o"))
    old = threading.Thread(target=guarded, args=(5, "old"))
    old.start()
    assert inside.wait(10)
    guarded(6, "new")  # not blocked by the running older call
    with pytest.raises(StaleTokenError):
        guarded(5, "old again")  # but a check after 6 was admitted refuses 5
    release.set()
    old.join(10)
    assert order == ["start old", "start new", "end new", "end old"]


# -- racing threads in racing processes ------------------------------------------------


def _racer(port: int, log: str, worker: int, racers: int, rounds: int) -> None:
    """Threads calling one Redis-guarded function; each call logs when it was attempted
    (before the check) and when it was admitted or refused (after the check), on the
    system-wide monotonic clock."""
    client = redis.Redis(port=port)
    guarded = guard(lambda: time.monotonic(), mark=RedisMark(client, "mark:race"))

    def run(thread: int) -> None:
        me = worker * 3 + thread
        for token in token_plan(me, racers, rounds):
            before = time.monotonic()
            try:
                after = guarded(token)
                outcome = "ok"
            except StaleTokenError as exc:
                after = time.monotonic()
                outcome = f"stale:{exc.current}"
            append_line(log, f"{outcome} {token} {before!r} {after!r}\n")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()


def test_processes_race_on_one_mark(redis_server: RedisServer, tmp_path: Path) -> None:
    redis.Redis(port=redis_server.port).delete("mark:race")
    log = tmp_path / "log"
    workers, rounds = 2, 40
    racers = workers * 3
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_racer, args=(redis_server.port, str(log), w, racers, rounds))
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(180)
        assert proc.exitcode == 0
    rows = [line.split() for line in log.read_text().splitlines()]
    assert len(rows) == racers * rounds
    calls = [(kind, int(t), float(a), float(b)) for kind, t, a, b in rows]
    admitted = [c for c in calls if c[0] == "ok"]
    refused = [c for c in calls if c[0] != "ok"]
    assert refused, "replayed tokens must be refused at least sometimes"
    # Admission is atomic: a token admitted strictly after another one was admitted is
    # never lower.
    for _, earlier, _, done in admitted:
        for _, later, began, _ in admitted:
            if done < began:
                assert earlier <= later, f"{later} admitted after {earlier}"
    # Every refusal is justified: a higher token had been admitted before it was refused,
    # and the error reports a mark above the refused token.
    for kind, token, _, done in refused:
        current = int(kind.split(":")[1])
        assert current > token
        assert any(t >= current and began < done for _, t, began, _ in admitted)
    final = redis.Redis(port=redis_server.port).get("mark:race")
    assert final is not None and int(final) == max(t for _, t, _, _ in admitted)
