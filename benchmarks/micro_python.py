"""The Python cost of one acquire+release, without any I/O: where RedisFence's time goes.

``python benchmarks/micro_python.py``: an isolated micro-benchmark, not part of
``run.py``. The Redis client is replaced by a stub whose ``evalsha`` answers at once
(a token for the acquire script, 1 for the release script), so what is timed is only
Python: argument building, reply parsing, and the fence's own machinery. Rows:

- the fenced-script floor (two bare ``evalsha`` calls);
- ``RedisIssuer.try_acquire`` + ``release`` called directly (the issuer alone);
- ``FencedLock`` (the same scripts behind redis-py's ``Lock`` API);
- ``RedisFence`` as shipped (flows driven by ``run_sync``);
- a prototype ``RedisFence`` whose uncontended acquire and release call the issuer
  directly (no flow, no ``WaitSchedule``, a counter instead of ``uuid4`` for the holder
  id): what the flow machinery costs on the fast path.

Imports redis-py, fencing's Redis modules and the benchmark floors.
"""

from __future__ import annotations

import itertools
import timeit
import uuid
from collections.abc import Callable
from typing import Any

import redis

from fencing import FencedLock, FenceToken, LeaseLost, RedisFence
from fencing._redis_scripts import ACQUIRE
from floors import FencedFloor


class StubRedis(redis.Redis):
    """Answers EVALSHA at once: a fresh token for ACQUIRE, 1 for anything else."""

    tokens = itertools.count(1)

    def evalsha(self, sha: str, numkeys: int, *args: Any) -> Any:  # type: ignore[override]
        return next(self.tokens) if sha == ACQUIRE.sha else 1

    def script_load(self, script: Any) -> str:  # type: ignore[override]
        return "stub"


_PREFIX = uuid.uuid4().hex[:16]
_SERIAL = itertools.count()


class FastPathFence(RedisFence):
    """Prototype: the uncontended acquire and the release without a flow."""

    def acquire(self, timeout: float | None = None) -> FenceToken:
        holder = f"{_PREFIX}{next(_SERIAL)}"
        reply = self.issuer.try_acquire(self.name, holder, max(1, round(self.ttl * 1000)))
        if not isinstance(reply, int):
            return super().acquire(timeout)
        with self._mutex:
            self._holders[reply] = holder
        return FenceToken(reply, self.name)

    def release(self, token: int) -> None:
        with self._mutex:
            holder = self._holders.pop(int(token), None)
        if holder is None or not self.issuer.release(self.name, int(token), holder):
            raise LeaseLost(self.name, int(token), "not held")


def main() -> None:
    client = StubRedis()
    floor = FencedFloor(client, "floor")
    fence = RedisFence(client, "fence", 10)
    fast = FastPathFence(client, "fast", 10)
    issuer = fence.issuer
    lock = client.lock("lock", timeout=10, lock_class=FencedLock)

    def issuer_only() -> None:
        issuer.release("fence", issuer.try_acquire("fence", "h", 10_000), "h")  # type: ignore[arg-type]

    cycles: dict[str, Callable[[], Any]] = {
        "fenced-script floor (2 bare evalsha)": lambda: (floor.acquire(), floor.release()),
        "RedisIssuer calls only": issuer_only,
        "FencedLock": lambda: (lock.acquire(), lock.release()),
        "RedisFence as shipped": lambda: fence.release(fence.acquire()),
        "RedisFence, fast-path prototype": lambda: fast.release(fast.acquire()),
        "(uuid.uuid4().hex alone)": lambda: uuid.uuid4().hex,
    }
    best: dict[str, float] = dict.fromkeys(cycles, float("inf"))
    for _ in range(7):  # interleaved repeats; keep each one's best
        for name, cycle in cycles.items():
            seconds = timeit.timeit(cycle, number=5000) / 5000
            best[name] = min(best[name], seconds)
    for name, seconds in best.items():
        print(f"{name:<40} {seconds * 1e6:7.2f} us per cycle")


if __name__ == "__main__":
    main()
