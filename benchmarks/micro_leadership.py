"""Leadership's costs (issue 22): a reentrant acquire and release, and hand-overs.

``python benchmarks/micro_leadership.py [redis] [zookeeper] [etcd]`` (all three when
none is named): an isolated micro-benchmark, not part of ``run.py``. Rows:

- a reentrant ``acquire`` and a counted-down ``release`` on a fence that already holds
  its lease (no I/O: the count is in the process), beside ``threading.RLock``'s;
- per engine, on throwaway servers (one Redis, one ZooKeeper server, a 3-member etcd
  cluster), the median time from a leader giving up to the waiting candidate knowing it
  leads, with the leader and the candidate on clients of their own (two sessions):

  - the floor: a plain fence's ``release`` to its waiting ``acquire`` returning (one
    wake-up plus one acquire: the hand-over an election builds on);
  - ours: ``term.resign()`` to the waiting ``campaign`` returning;
  - ZooKeeper: kazoo's ``Election``, from its leader's function returning (kazoo then
    deletes its lock node) to the next contender's function being called;
  - etcd: etcd's own election (its Go ``concurrency`` package, driven by Debian's
    ``etcdctl elect``): from the leader's SIGINT (it resigns) to the next ``etcdctl
    elect`` printing that it leads. It prints after one more linearizable ``Get`` of its
    key than the others make, and the signal and the pipe cost a little: the row
    beside it, one ``Get`` through ``etcdctl``'s client (the gRPC call's time, as etcd's
    own ``--write-out=json`` does not report it, is taken as our client's ``status``
    read on the same cluster), says how much.

Medians of many hand-overs; the first few of each row are not counted (connections,
caches).

Imports kazoo, fencing and its test servers.
"""

from __future__ import annotations

import itertools
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import timeit
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.election import Election as KazooElection

import fencing
from fencing.testing.servers import EtcdCluster, RedisServer, ZooKeeperServer

#: What a take returns: how to give back what it took, and when (``perf_counter``) the
#: taker knew it had it.
Taken = tuple[Callable[[], None], float]
Take = Callable[[], Taken]

#: Hand-overs not counted at the start of each row.
WARMUP = 3


def per_call(fn: Callable[[], object], number: int = 200_000) -> float:
    """Microseconds per call of ``fn``, best of three."""
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def row(what: str, value: float, unit: str) -> None:
    print(f"{what:<58} {value:8.3f} {unit}", flush=True)


def reentrancy() -> None:
    fence = fencing.MemoryFence("bench", ttl=60, issuer=fencing.MemoryIssuer(), reentrant=True)
    token = fence.acquire()
    lock = threading.RLock()
    lock.acquire()
    row("reentrant acquire", per_call(lambda: fence.acquire(timeout=0)), "us")
    row("counted-down release", per_call(lambda: fence.release(token)), "us")

    def rlock() -> None:
        lock.acquire()
        lock.release()

    row("threading.RLock acquire + release", per_call(rlock), "us")


class _Waiter(threading.Thread):
    """Takes the lease (or the term) once, noting when it got it."""

    def __init__(self, take: Take) -> None:
        super().__init__(daemon=True)
        self.take = take
        self.ready = threading.Event()
        self.end = 0.0
        self.give_back: Callable[[], None] = lambda: None

    def run(self) -> None:
        self.ready.set()
        self.give_back, self.end = self.take()


def hand_overs(take: Take, rounds: int, settle: float = 0.002) -> float:
    """Median milliseconds from giving back what ``take`` took to a waiting thread's
    ``take`` knowing it has it; the waiter gets ``settle`` seconds to be waiting."""
    times: list[float] = []
    give_back, _ = take()
    for _ in range(rounds + WARMUP):
        waiter = _Waiter(take)
        waiter.start()
        waiter.ready.wait()
        time.sleep(settle)  # the waiter is blocked by now
        start = time.perf_counter()
        give_back()
        waiter.join()
        assert waiter.end > start, "the waiter took it before it was given back"
        times.append((waiter.end - start) * 1e3)
        give_back = waiter.give_back
    give_back()
    return statistics.median(times[WARMUP:])


def fence_taker(fences: Sequence[fencing.Fence]) -> Take:
    """Takes a lease of the next fence in turn (each on a client of its own)."""
    turn = itertools.cycle(fences)

    def take() -> Taken:
        fence = next(turn)
        token = fence.acquire()
        return (lambda: fence.release(token)), time.perf_counter()

    return take


def term_taker(elections: Sequence[fencing.Election]) -> Take:
    """Campaigns on the next election object in turn (each on a client of its own)."""
    turn = itertools.cycle(elections)

    def take() -> Taken:
        term = next(turn).campaign("bench")
        return term.resign, time.perf_counter()

    return take


def ours(backends: Sequence[Any], name: str, rounds: int) -> None:
    """The floor and our hand-over on the backends (two, on clients of their own)."""
    floor = hand_overs(fence_taker([b.fence(f"{name}:fence", ttl=60) for b in backends]), rounds)
    row("floor: release -> waiting acquire returns", floor, "ms")
    terms = term_taker([b.election(f"{name}:election", ttl=60) for b in backends])
    row("ours: resign -> waiting campaign returns", hand_overs(terms, rounds), "ms")


def on_redis(rounds: int) -> None:
    print("Redis (one server)", flush=True)
    with RedisServer() as server:
        backends: list[Any] = [fencing.connect(server.url) for _ in range(2)]
        try:
            ours(backends, "bench", rounds)
        finally:
            for backend in backends:
                backend.close()


def kazoo_taker(clients: Sequence[KazooClient], path: str) -> Take:
    """Runs kazoo's ``Election`` on the next client in turn; the leader's function
    notes when it is called and returns when given back."""
    turn = itertools.cycle(clients)

    def take() -> Taken:
        elected, done = threading.Event(), threading.Event()
        at: list[float] = []

        def lead() -> None:
            at.append(time.perf_counter())
            elected.set()
            done.wait()

        election = KazooElection(next(turn), path, "bench")
        runner = threading.Thread(target=election.run, args=(lead,), daemon=True)
        runner.start()
        elected.wait()

        def give_back() -> None:
            done.set()
            runner.join()

        return give_back, at[0]

    return take


def on_zookeeper(rounds: int) -> None:
    print("ZooKeeper (one server)", flush=True)
    with ZooKeeperServer() as server:
        backends: list[Any] = [fencing.connect(server.url) for _ in range(2)]
        kazoos = [KazooClient(hosts=server.hosts, timeout=30) for _ in range(2)]
        try:
            for client in kazoos:
                client.start(timeout=30)
            ours(backends, "bench", rounds)
            kazoo = hand_overs(kazoo_taker(kazoos, "/bench-kazoo-election"), rounds)
            row("kazoo Election: leader returns -> next one called", kazoo, "ms")
        finally:
            for client in kazoos:
                client.stop()
                client.close()
            for backend in backends:
                backend.close()


def etcdctl(endpoints: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, ETCDCTL_API="3")
    command = ["etcdctl", f"--endpoints={endpoints}", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def etcdctl_taker(endpoints: str, name: str) -> Take:
    """Starts ``etcdctl elect NAME bench``, which prints its key and then ``bench`` once
    it leads, and resigns on SIGINT."""

    def take() -> Taken:
        process = etcdctl(endpoints, "elect", name, "bench")
        assert process.stdout is not None
        while (line := process.stdout.readline()) and line.strip() != "bench":
            pass
        assert line, "etcdctl elect ended before it led"
        at = time.perf_counter()

        def give_back() -> None:
            process.send_signal(signal.SIGINT)
            process.wait()
            assert process.stdout is not None
            process.stdout.close()

        return give_back, at

    return take


def on_etcd(rounds: int) -> None:
    print("etcd (a 3-member cluster)", flush=True)
    with EtcdCluster() as cluster:
        backends: list[Any] = [fencing.connect(cluster.url) for _ in range(2)]
        try:
            ours(backends, "bench", rounds)
            endpoints = ",".join(cluster.endpoints)
            # etcdctl needs a moment to start and campaign: 0.5 s to be waiting
            theirs = hand_overs(etcdctl_taker(endpoints, "bench-etcd"), rounds // 2, 0.5)
            row("etcd election (etcdctl elect): SIGINT -> next prints", theirs, "ms")
            issuer = backends[0].issuer
            read = per_call(lambda: issuer.status("bench:fence"), number=200) / 1e3
            row("  of which one more linearizable read (a status read)", read, "ms")
        finally:
            for backend in backends:
                backend.close()


ENGINES = {"redis": on_redis, "zookeeper": on_zookeeper, "etcd": on_etcd}


def main(argv: Sequence[str]) -> None:
    reentrancy()
    for engine in argv or list(ENGINES):
        ENGINES[engine](rounds=60)


if __name__ == "__main__":
    main(sys.argv[1:])
