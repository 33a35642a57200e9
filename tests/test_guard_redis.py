"""guard with a RedisMark on a real redis-server: atomic check-and-raise shared by racing
processes, script reload, keys that hold something else, FenceUnavailable. What every
mark promises (exact 64-bit comparison, overlapping calls) is the contract's
(tests/test_contract_marks.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from fail_fast import failing_fast
from processes import CONTEXT
from racing import append_line, token_plan
from waiting import joined

from fencing import FenceUnavailable, RedisMark, StaleTokenError, guard
from fencing.testing.servers import RedisServer


def test_script_flush_is_survived(redis_client: redis.Redis) -> None:
    guarded = guard(lambda: None, mark=RedisMark(redis_client, "mark:s"))
    guarded(1)
    redis_client.script_flush()
    guarded(2)
    with pytest.raises(StaleTokenError):
        guarded(1)
    assert redis_client.get("mark:s") == b"2"  # the mark is the key's decimal value


def test_bad_input(redis_client: redis.Redis) -> None:
    with pytest.raises(TypeError):
        RedisMark("redis://localhost", "k")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RedisMark(redis_client, b"k")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RedisMark(redis_client, "")


def test_key_holding_something_else_is_unavailable(redis_client: redis.Redis) -> None:
    calls: list[int] = []
    guarded = guard(calls.append, mark=RedisMark(redis_client, "mark:w"))
    redis_client.set("mark:w", "not a number")
    with pytest.raises(FenceUnavailable, match="does not hold a mark"):
        guarded(5, 5)
    with pytest.raises(FenceUnavailable, match="does not hold a mark"):
        guarded.claim(5)
    assert redis_client.get("mark:w") == b"not a number"  # a claim never overwrites it
    redis_client.delete("mark:w")
    redis_client.rpush("mark:w", "x")
    with pytest.raises(FenceUnavailable):
        guarded(5, 5)
    assert calls == []


def test_redis_stopped_is_unavailable(redis_factory: Callable[..., RedisServer]) -> None:
    server = redis_factory()
    client = failing_fast(server.port, 2)  # the client's retry policy is the user's choice
    calls: list[int] = []
    guarded = guard(calls.append, mark=RedisMark(client, "mark:u"))
    guarded(1, 1)
    server.stop()
    with pytest.raises(FenceUnavailable) as info:
        guarded(2, 2)
    assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
    with pytest.raises(FenceUnavailable) as info:
        guarded.claim(3)  # a claim is the same Lua step: the same error, nothing claimed
    assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
    with pytest.raises(FenceUnavailable):
        _ = guarded.mark.current
    assert calls == [1]
    server.start()  # without persistence: the mark is gone, as documented
    guarded(0, 0)
    assert calls == [1, 0]
    client.close()


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
    joined(*threads)
    client.close()


def test_processes_race_on_one_mark(redis_server: RedisServer, tmp_path: Path) -> None:
    redis.Redis(port=redis_server.port).delete("mark:race")
    log = tmp_path / "log"
    workers, rounds = 2, 40
    racers = workers * 3
    procs = [
        CONTEXT.Process(target=_racer, args=(redis_server.port, str(log), w, racers, rounds))
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
