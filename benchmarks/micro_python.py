"""The Python cost of one acquire+release, without any I/O: where RedisFence's time goes.

``python benchmarks/micro_python.py``: an isolated micro-benchmark, not part of
``run.py``. The Redis client's connection is replaced by one without a socket that
answers at once (a token for the acquire script, 1 for the release script), so what is
timed is only Python: fencing's and redis-py's (argument encoding, command packing).
Rows:

- the fenced-script floor (two bare ``evalsha`` calls);
- ``RedisIssuer.try_acquire`` + ``release`` called directly (the issuer alone);
- ``FencedLock`` (the same scripts behind redis-py's ``Lock`` API);
- ``RedisFence`` as shipped (the uncontended acquire and the release call the issuer
  directly; flows run only when the lease is busy): what the fence adds to the issuer.

``--otel`` measures the cost of fencing's OpenTelemetry instruments (docs/observability.md):
``off`` (default: OpenTelemetry never imported), ``api`` (the API imported, no SDK set),
``sdk`` (an SDK meter provider set, read by an in-memory reader), ``traces`` (also an SDK
tracer provider, every span sampled). Run it once per mode and compare the rows.

Imports redis-py, fencing's Redis modules and the benchmark floors (the OpenTelemetry
API and SDK only with ``--otel``).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import timeit
import uuid
from collections.abc import Callable
from typing import Any

import redis
from redis.connection import Connection

from fencing import FencedLock, RedisFence
from fencing.redis._scripts import ACQUIRE
from floors import FencedFloor


class NoNetwork(Connection):
    """A connection without a socket: it packs each command as redis-py would send it
    (so argument encoding is counted) and answers at once: a fresh token for ACQUIRE,
    1 for anything else."""

    tokens = itertools.count(1)
    acquire_shas = (ACQUIRE.sha, ACQUIRE.sha_arg)
    reply: Any = None

    def connect(self) -> None:
        pass

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        pass

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        pack: Callable[..., Any] = self.pack_command  # untyped in redis-py
        pack(*args)
        acquires = args[0] == "EVALSHA" and args[1] in self.acquire_shas
        self.reply = next(self.tokens) if acquires else 1

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        return self.reply


def set_up_otel(mode: str) -> None:
    """Import OpenTelemetry and set global providers as ``--otel mode`` says."""
    if mode == "off":
        return
    from opentelemetry import metrics, trace

    if mode in ("sdk", "traces"):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    if mode == "traces":
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--otel", choices=("off", "api", "sdk", "traces"), default="off")
    args = parser.parse_args()
    set_up_otel(args.otel)
    print(f"OpenTelemetry: {args.otel} (imported: {'opentelemetry' in sys.modules})")
    client = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=NoNetwork))
    floor = FencedFloor(client, "floor")
    fence = RedisFence(client, "fence", 10)
    issuer = fence.issuer
    lock = client.lock("lock", timeout=10, lock_class=FencedLock)

    def issuer_only() -> None:
        issuer.release("fence", issuer.try_acquire("fence", "h", 10_000), "h")  # type: ignore[arg-type]

    cycles: dict[str, Callable[[], Any]] = {
        "fenced-script floor (2 bare evalsha)": lambda: (floor.acquire(), floor.release()),  # type: ignore[func-returns-value]
        "RedisIssuer calls only": issuer_only,
        "FencedLock": lambda: (lock.acquire(), lock.release()),
        "RedisFence as shipped": lambda: fence.release(fence.acquire()),
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
