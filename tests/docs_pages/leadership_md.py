# Generated from docs/leadership.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/leadership.md:27

import fencing

election = fencing.connect().election("scheduler", ttl=10)  # or fencing.Election(issuer, name, ttl)
state = fencing.FileStore("scheduler-state.json")  # what the leader writes, guarded

with election.campaign("host-1:8080") as term:  # blocks until this candidate leads
    state.write(b"ran at 09:00", term.token)  # the term token guards the leader's writes
    ...  # term.lost / term.on_lost / term.wait_lost
# leaving the block resigns: the next candidate is elected at once

# docs/leadership.md:99

import tempfile
from pathlib import Path

import fencing

issuer = fencing.MemoryIssuer()  # one process here; across hosts: connect(url).election(...)
state = fencing.FileStore(Path(tempfile.mkdtemp()) / "last-run.txt")  # guarded by terms

election = fencing.Election(issuer, "scheduler", ttl=0.6)  # renewed every 0.2 s
old = election.campaign("host-a")
print(f"host-a leads with term {old.token:d}")
state.write(b"ran at 09:00 by host-a", old.token)

issuer.force_release("scheduler")  # host-a froze past its term (here: ended for it)
new = fencing.Election(issuer, "scheduler", ttl=0.6).campaign("host-b", timeout=5)
leader = election.leader()  # any process can ask
print(f"host-b leads with term {new.token:d}; leader() shows {leader and leader.value}")
state.write(b"ran at 09:01 by host-b", new.token)

try:
    state.write(b"ran at 09:01 by host-a", old.token)  # host-a wakes up and writes
except fencing.StaleTokenError as error:
    print(f"host-a refused: {error}")
print(f"host-a's term found lost: {old.wait_lost(timeout=30)}")
old.resign()  # nothing to hand over: a no-op
new.resign()  # hands over at once
print(f"the state: {state.read()!r}; leader now: {election.leader()}")

# docs/leadership.md:154

import fencing

ledger = fencing.FileStore("billing-ledger.json")  # the resource: it checks term tokens


def cancel_side_effects() -> None:
    print("lost the term: cancelling what no guard protects (e-mails, other APIs)")


election = fencing.connect().election("billing-run", ttl=10)
with election.campaign("host-a") as term:
    term.on_lost(lambda error: cancel_side_effects())
    for batch in [b"batch 1", b"batch 2"]:
        if term.lost:  # at the latest 10 s after the last renewal that went through
            break  # stop before host-b's term can begin
        ledger.write(batch, term.token)  # fenced: refused anyway once term 34 exists

# docs/leadership.md:289

import asyncio

import fencing
import fencing.aio

issuer = fencing.MemoryIssuer()  # one process here; every backend signals the same way
fence = fencing.MemoryFence("nightly-report", ttl=0.6, issuer=issuer)


def stop_work(error: fencing.LeaseLost) -> None:
    print(f"on_lost: {error}")  # runs once, in the hold's renewal thread


hold = fence.hold(on_lost=stop_work)
try:
    with hold as token:
        print(f"working with token {token:d}")
        issuer.force_release("nightly-report")  # what `fencing release --force` does
        if hold.wait_lost(timeout=30):  # a real job checks `hold.lost` between steps
            print("the lease is gone: stopping early")
except fencing.LeaseLost as error:
    print(f"leaving the hold raised LeaseLost for token {error.token:d}")


async def main() -> None:
    afence = fencing.aio.MemoryFence("nightly-report", ttl=0.6, issuer=issuer)
    try:
        async with afence.hold(cancel_on_loss=True) as token:
            print(f"the asyncio job works with token {token:d}")
            issuer.force_release("nightly-report")
            await asyncio.sleep(3600)  # cancelled once the renewal finds the lease gone
    except fencing.LeaseLost as error:
        print(f"its body was cancelled: LeaseLost from {type(error.__cause__).__name__}")


asyncio.run(main())

# docs/leadership.md:372

import fencing

fence = fencing.MemoryFence("ledger", ttl=10, reentrant=True)


def post(entry: str) -> None:
    with fence.hold() as token:  # reentered when this thread holds the lease already
        print(f"posted {entry!r} with token {token:d}")


def close_day() -> None:
    with fence.hold() as token:
        print(f"closing the day with token {token:d}")
        post("interest")  # the same lease and the same token: no deadlock, no new lease
        post("fees")


close_day()
token = fence.acquire()
print(f"the next lease gets token {token:d}")
fence.release(token)

# docs/leadership.md:406

import functools
import os

import redis

r = redis.Redis.from_url(os.environ.get("FENCING_URL", "redis://localhost:6379/0"))
lock = r.lock(
    "ledger", timeout=10, lock_class=functools.partial(fencing.FencedLock, reentrant=True)
)
with lock:
    token = lock.fence_token
    with lock:  # the owner again: True at once, no Redis call
        assert lock.fence_token == token  # the same token, counted
    # the inner exit only counted down: the lock is still held
# the outer exit released it in Redis
