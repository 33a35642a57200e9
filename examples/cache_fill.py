"""A dogpile-free cache fill: many processes miss the same key, one recomputes.

Six processes find the cache empty at once. They race for one fence: the winner
recomputes and writes the cache with its token; the others wait and then read it.
Here the first winner is slow (as if paused) and its lease runs out, so a second
process recomputes and writes a newer value. When the slow one finally writes, the
cache refuses its stale token: a paused recomputation never overwrites a newer value.

Run: python examples/cache_fill.py
"""

import contextlib
import multiprocessing
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

import fencing
from fencing.sql import SqlFence

TTL = 0.5


def get_report(url: str, cache_path: Path, slow: "Event | None") -> str:
    cache = fencing.FileStore(cache_path)
    if cache.token is not None:  # a hit: nothing to do
        return "hit"
    fence = SqlFence(url, "cache:report", ttl=TTL)
    token = fence.acquire(timeout=10)  # one process at a time recomputes
    try:
        if cache.token is not None:  # someone filled it while we waited
            return "hit after waiting"
        if slow is not None:
            slow.set()  # tell the others to come (only for this demonstration)
            time.sleep(3 * TTL)  # a long GC pause: our lease expires meanwhile
        value = f"report computed with token {token:d}".encode()
        try:
            cache.write(value, token)
        except fencing.StaleTokenError:
            return f"recomputed with token {token:d}, but the write was refused as stale"
        return f"recomputed with token {token:d} and filled the cache"
    finally:
        with contextlib.suppress(fencing.LeaseLost):  # it expired: the point of the story
            fence.release(token)


def worker(url: str, cache_path: Path, slow: "Event | None", results: "Queue[str]") -> None:
    results.put(get_report(url, cache_path, slow))


if __name__ == "__main__":
    work = Path(tempfile.mkdtemp())
    url = f"sqlite:///{work / 'fences.db'}"  # no server needed: an SQLite file issues tokens
    cache_path = work / "report.cache"
    results: "Queue[str]" = multiprocessing.Queue()
    has_fence = multiprocessing.Event()
    slow = multiprocessing.Process(target=worker, args=(url, cache_path, has_fence, results))
    slow.start()
    has_fence.wait(30)  # the slow one wins the fence; then five more processes miss the key
    others = [
        multiprocessing.Process(target=worker, args=(url, cache_path, None, results))
        for _ in range(5)
    ]
    for process in others:
        process.start()
    outcomes = sorted(results.get(timeout=30) for _ in range(6))
    for process in [slow, *others]:
        process.join()
    for outcome in outcomes:
        print(outcome)
    cache = fencing.FileStore(cache_path)
    print(f"cache holds: {cache.read().decode()!r}")
    sys.exit(0 if sum("filled" in o for o in outcomes) == 1 else 1)
