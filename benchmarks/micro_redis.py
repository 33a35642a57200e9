"""Where an uncontended acquire+release spends its time: client CPU, server CPU, the rest.

``python benchmarks/micro_redis.py [--cycles N]``: an isolated micro-benchmark, not part
of ``run.py``. For each variant it runs N acquire+release cycles, interleaved in rounds,
and splits the wall time of a cycle into
- client CPU: this process's user+sys time (Python, redis-py, fencing, socket calls),
- server CPU: redis-server's user+sys time from /proc (Lua, command dispatch),
- the rest: the scheduler and the loopback between the two (both on one CPU).
It also counts the commands each cycle runs inside Lua (``INFO commandstats``).

Imports redis-py, fencing and the benchmark modules.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import redis

import locks
from fencing.testing.servers import RedisServer
from harness import pin

TICK = os.sysconf("SC_CLK_TCK")


def _server_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _commands(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", default="1")
    args = parser.parse_args()
    print(pin(None if args.cpu == "none" else int(args.cpu)))
    names = [
        locks.FLOOR_LOCK,
        locks.FLOOR_FENCED,
        locks.REDIS_FENCE,
        locks.FENCED_LOCK,
        "redis-py Lock",
    ]
    with RedisServer() as server:
        assert server.process is not None
        pid = server.process.pid
        client = redis.Redis.from_url(server.url)
        cycles: dict[str, Callable[[], None]] = {}
        for name in names:
            cycles[name] = _cycle(locks.KINDS[name].make(client, "micro"))
        totals = {name: [0.0, 0.0, 0.0, 0] for name in cycles}
        calls: dict[str, dict[str, int]] = {}
        for cycle in cycles.values():
            for _ in range(200):
                cycle()
        for r in range(args.rounds):
            for name, cycle in cycles.items():
                before = _commands(client) if r == 0 else {}
                wall, cpu, srv = time.perf_counter(), time.process_time(), _server_cpu(pid)
                for _ in range(args.cycles):
                    cycle()
                t = totals[name]
                t[0] += time.perf_counter() - wall
                t[1] += time.process_time() - cpu
                t[2] += _server_cpu(pid) - srv
                t[3] += args.cycles
                if r == 0:
                    after = _commands(client)
                    calls[name] = {
                        k: after[k] - before.get(k, 0)
                        for k in after
                        if k != "info" and after[k] != before.get(k, 0)
                    }
        print(f"{'variant':<42} {'wall':>8} {'client':>8} {'server':>8} {'rest':>8}  per cycle")
        for name, (wall, cpu, srv, n) in totals.items():
            us = [x / n * 1e6 for x in (wall, cpu, srv, wall - cpu - srv)]
            print(f"{name:<42} " + " ".join(f"{x:>6.0f}us" for x in us))
        print("\ncommands per cycle (INFO commandstats; Lua-internal calls included):")
        for name, counts in calls.items():
            per = ", ".join(f"{k} {v / args.cycles:.1f}" for k, v in sorted(counts.items()))
            print(f"  {name}: {per}")


def _cycle(holder: locks.Holder) -> Callable[[], None]:
    def cycle() -> None:
        holder.acquire()
        holder.release()

    return cycle


if __name__ == "__main__":
    main()
