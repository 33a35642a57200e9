"""Reentrancy: code that holds a lease can call code that takes the same lease.

Run: python examples/reentrant.py
"""

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
