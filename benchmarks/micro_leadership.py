"""Leadership's costs (issue 22): a reentrant acquire and release, and a hand-over.

``python benchmarks/micro_leadership.py``: an isolated micro-benchmark, not part of
``run.py``. Rows:

- a reentrant ``acquire`` and a counted-down ``release`` on a fence that already holds
  its lease (no I/O: the count is in the process), beside ``threading.RLock``'s;
- on a throwaway Redis: from ``term.resign()`` to the waiting candidate's ``campaign``
  returning, against the engine's floor, a plain fence's ``release`` to its waiting
  ``acquire`` returning (one wake-up plus one acquire: the hand-over an election
  builds on). Medians of many hand-overs.

Imports redis-py, fencing and its test servers.
"""

from __future__ import annotations

import statistics
import threading
import time
import timeit
from collections.abc import Callable

import redis

import fencing
from fencing.testing.servers import RedisServer

ROUNDS = 200


def per_call(fn: Callable[[], object], number: int = 200_000) -> float:
    """Microseconds per call of ``fn``, best of three."""
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def reentrancy() -> None:
    fence = fencing.MemoryFence("bench", ttl=60, issuer=fencing.MemoryIssuer(), reentrant=True)
    token = fence.acquire()
    lock = threading.RLock()
    lock.acquire()
    print(f"{'reentrant acquire':<44} {per_call(lambda: fence.acquire(timeout=0)):7.2f} us")
    print(f"{'counted-down release':<44} {per_call(lambda: fence.release(token)):7.2f} us")

    def rlock() -> None:
        lock.acquire()
        lock.release()

    print(f"{'threading.RLock acquire + release':<44} {per_call(rlock):7.2f} us")


class _Waiter(threading.Thread):
    """Takes the lease (or the term) once, noting when it got it."""

    def __init__(self, take: Callable[[], Callable[[], None]]) -> None:
        super().__init__()
        self.take = take
        self.ready = threading.Event()
        self.end = 0.0
        self.give_back: Callable[[], None] = lambda: None

    def run(self) -> None:
        self.ready.set()
        self.give_back = self.take()
        self.end = time.perf_counter()


def hand_overs(take: Callable[[], Callable[[], None]]) -> float:
    """Median milliseconds from giving back what ``take`` took to a waiting thread's
    ``take`` returning."""
    times: list[float] = []
    for _ in range(ROUNDS):
        give_back = take()
        waiter = _Waiter(take)
        waiter.start()
        waiter.ready.wait()
        time.sleep(0.002)  # the waiter is blocked by now
        start = time.perf_counter()
        give_back()
        waiter.join()
        times.append((waiter.end - start) * 1e3)
        waiter.give_back()
    return statistics.median(times)


def handover(url: str) -> None:
    client = redis.Redis.from_url(url)
    fence = fencing.RedisFence(client, "bench:fence", ttl=60)

    def take_lease() -> Callable[[], None]:
        token = fence.acquire()
        return lambda: fence.release(token)

    elect = fencing.Election(fence.issuer, "bench:election", ttl=60)

    def take_term() -> Callable[[], None]:
        return elect.campaign("bench").resign

    floor = hand_overs(take_lease)
    ours = hand_overs(take_term)
    print(f"{'floor: release -> waiting acquire returns':<44} {floor:7.3f} ms")
    print(f"{'resign -> waiting campaign returns':<44} {ours:7.3f} ms")


def main() -> None:
    reentrancy()
    server = RedisServer().start()
    try:
        handover(server.url)
    finally:
        server.close()


if __name__ == "__main__":
    main()
