"""The semaphore's proof with real processes (issue 21, "Proof" bullet 2).

N + 2 processes loop acquire, work, release on one Redis semaphore of ``permits=N``;
the test freezes some of them with ``SIGSTOP`` for longer than the ttl. The resource is
one ``FileStore`` per slot, and the overlap detector is inside it: every accepted write
appends ``(token, worker, step)`` to the store's own data, in the order the store applied
them. At most one live lease per slot means, at the resource: once a newer token of a
slot wrote, no older token of that slot writes again (the tokens in a slot's record
never go down).

The staged pause makes the stale write happen in every run: worker 0 freezes itself
with ``SIGSTOP`` between the first and the second write of one lease, and the test
resumes it only once its slot's store holds a write by a newer token of that slot (the
pattern of ``fencing chaos``'s staged pause). Fenced, that write is refused; unfenced
(the same stores, every write passed with token 0), it lands after the newer holder's
and the detector sees the overlap: the control, on every run.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from processes import CONTEXT, stopped
from waiting import wait_until

import fencing
from fencing import FileStore, LeaseLost, StaleTokenError
from fencing.testing.servers import RedisServer

PERMITS = 2
TTL = 0.4  # the holders' leases; the random pauses last 1.5 x this
PAUSES = 2  # random pauses past the ttl in each run, besides the staged one
MIN_RUN = 1.0  # seconds the holders loop at least (the test's clock, only to stop)


def _record(store: FileStore, entry: list[Any], fenced: bool, token: int) -> None:
    """One write of a holder: append ``entry`` to the store's record, guarded by
    ``token`` (fenced) or by nothing (``0``: always at the high-water mark)."""

    def append(current: bytes | None) -> bytes:
        return json.dumps([*json.loads(current or b"[]"), entry]).encode()

    store.update(append, token if fenced else 0)


def _holder(url: str, name: str, worker: int, root: str, fenced: bool) -> None:
    """A client process: acquire a permit, write its slot's store twice (``start``,
    ``end``), release; until the stop file appears. Worker 0 stages its pause once."""
    semaphore = fencing.connect(url).semaphore(name, permits=PERMITS, ttl=TTL)
    base = Path(root)
    stores = [FileStore(base / f"slot{k}") for k in range(PERMITS)]
    log = (base / f"worker{worker}.log").open("a", buffering=1)
    staged = worker != 0
    while not (base / "stop").exists():
        permit = semaphore.acquire(timeout=30)
        token, store = int(permit.token), stores[permit.slot]
        try:
            _record(store, [token, worker, "start"], fenced, token)
            if not staged:
                staged = True
                log.write(json.dumps({"kind": "staged", "slot": permit.slot, "token": token}))
                log.write("\n")
                os.kill(os.getpid(), signal.SIGSTOP)  # resumed once the slot moved on
            time.sleep(random.uniform(0.005, 0.03))  # the work
            _record(store, [token, worker, "end"], fenced, token)
            outcome = "accepted"
        except StaleTokenError:
            outcome = "refused"
        log.write(json.dumps({"kind": "write", "token": token, "outcome": outcome}) + "\n")
        with contextlib.suppress(LeaseLost):  # its lease expired while it was frozen
            semaphore.release(permit)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _slot_record(root: Path, slot: int) -> list[list[Any]]:
    store = FileStore(root / f"slot{slot}")
    try:
        return json.loads(store.read())  # type: ignore[no-any-return]
    except FileNotFoundError:
        return []
    finally:
        store.close()


def _run(url: str, root: Path, fenced: bool) -> dict[str, Any]:
    """Run N + 2 holders with the staged pause and ``PAUSES`` random ones; what the
    resource recorded per slot and what the staged holder's write came to."""
    name = f"proof:{random.random()}"
    workers: list[Any] = [
        CONTEXT.Process(target=_holder, args=(url, name, index, str(root), fenced))
        for index in range(PERMITS + 2)
    ]
    for worker in workers:
        worker.start()

    def alive(condition: Any) -> Any:
        def check() -> object:  # a holder that died fails the run at once, not at the deadline
            dead = [worker.exitcode for worker in workers if worker.exitcode is not None]
            assert not dead, f"a holder exited with {dead[0]}"
            return condition()

        return check

    try:
        staged_pid = workers[0].pid
        wait_until(alive(lambda: _records(root / "worker0.log")), "worker 0 staged its pause")
        staged = _records(root / "worker0.log")[0]
        wait_until(alive(lambda: stopped(staged_pid)), "worker 0 is frozen")

        def overtaken() -> bool:
            record = _slot_record(root, staged["slot"])
            return any(token > staged["token"] for token, _, _ in record)

        started, paused = time.monotonic(), 0
        while paused < PAUSES or time.monotonic() < started + MIN_RUN:
            victim = random.choice(workers[1:]).pid
            os.kill(victim, signal.SIGSTOP)
            time.sleep(1.5 * TTL)  # past the victim's ttl: its slot may move on
            os.kill(victim, signal.SIGCONT)
            paused += 1
        wait_until(alive(overtaken), "a newer token of the staged slot wrote")
        # the holders start slowly on a loaded machine: the run goes on until both
        # slots' resources have been written, whatever the clock says
        wait_until(
            alive(lambda: all(_slot_record(root, k) for k in range(PERMITS))),
            "every slot's resource written",
        )
        os.kill(staged_pid, signal.SIGCONT)
        wait_until(
            alive(lambda: len(_records(root / "worker0.log")) >= 2), "the staged holder's write"
        )
    finally:
        (root / "stop").touch()
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGCONT)
        for worker in workers:
            worker.join(60)
    assert [worker.exitcode for worker in workers] == [0] * len(workers)
    return {
        "slots": {slot: _slot_record(root, slot) for slot in range(PERMITS)},
        "staged": staged,
        "staged_write": _records(root / "worker0.log")[1],
    }


def _overlaps(record: list[list[Any]]) -> int:
    """Writes of a slot's resource made by a token older than one that wrote before."""
    highest, overlaps = 0, 0
    for token, _, _ in record:
        overlaps += token < highest
        highest = max(highest, token)
    return overlaps


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced-control"])
def test_paused_semaphore_holders_never_overlap_at_a_fenced_resource(
    redis_server: RedisServer, tmp_path: Path, fenced: bool
) -> None:
    outcome = _run(f"redis://127.0.0.1:{redis_server.port}", tmp_path, fenced)
    slots, staged = outcome["slots"], outcome["staged"]
    assert all(slots.values()), "every slot was written"
    assert all(0 <= slot < PERMITS for slot in slots)
    tokens = [token for token, _, _ in slots[staged["slot"]]]
    if fenced:
        assert {slot: _overlaps(record) for slot, record in slots.items()} == {0: 0, 1: 0}
        assert outcome["staged_write"] == {
            "kind": "write",
            "token": staged["token"],
            "outcome": "refused",
        }
        assert tokens.count(staged["token"]) == 1  # its start only
    else:  # the control: the frozen holder's write lands after its slot moved on
        assert outcome["staged_write"]["outcome"] == "accepted"
        assert _overlaps(slots[staged["slot"]]) >= 1
        last = max(i for i, token in enumerate(tokens) if token == staged["token"])
        assert any(token > staged["token"] for token in tokens[:last])
