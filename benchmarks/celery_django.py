"""Issue 24's costs: a ``FencedTask`` per task against a plain task and its peers, and a
fenced ``save()`` against a plain one. ``python benchmarks/celery_django.py [--quick]``:
not part of ``run.py``; about 40 s on an idle 2-vCPU machine (``--quick``: 15 s);
``--saves``: the saves alone (no ``bench`` extra needed).

Tasks: each variant runs through Celery's own call path (``apply_async`` with
``task_always_eager``: the tracer a worker's pool runs, without the broker's round trip,
which would drown the difference), one Redis server for every issuer and peer:

- plain: ``@app.task``, the floor;
- FencedTask: ``fence_key``, the lease on Redis (acquire, release, the renewal timer);
- FencedTask + ``fence_once``: also the record read and written (a ``FileOnceStore``);
- fencekit ``idempotent_task``: its idempotency guard, lock and result memo on Redis;
- celery-once ``QueueOnce``: its Redis lock taken at enqueue, dropped after the run;
- and, not tasks, a ``RedisFence`` acquire + release, and its ``hold()`` (the same plus
  the renewal thread started and stopped): the target's floor (a FencedTask should
  cost one acquire + one release + one renewal timer over a plain task).

Saves: one existing row updated per call through Django's ORM, a plain model's
``save()`` against a ``FencedModel``'s ``save(fence_token=...)`` (the guarded ``UPDATE``,
one statement), on an in-memory SQLite (only Python is timed) and on a
loopback PostgreSQL. Target: fenced <= 1.1x plain.

Variants run interleaved in rounds (the first one rotating), medians of per-call times.
Imports Celery, Django, fencekit and celery-once (``fencing[bench]``), fencing.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import django
from django.conf import settings

from fencing.testing.servers import PostgresServer, RedisServer

Op = Callable[[], Any]


def measure(variants: dict[str, Op], rounds: int, per_round: int) -> dict[str, float]:
    """Median µs per call of each variant, interleaved in rounds."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for name in names:  # warm up
        for _ in range(per_round):
            variants[name]()
    for round_ in range(rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            op = variants[name]
            for _ in range(per_round):
                start = time.perf_counter_ns()
                op()
                samples[name].append((time.perf_counter_ns() - start) / 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def report(title: str, medians: dict[str, float], floor: str) -> None:
    print(f"\n{title}")
    print(f"{'variant':<44} {'median us':>10} {'x ' + floor:>14}")
    for name, value in medians.items():
        print(f"{name:<44} {value:>10.1f} {value / medians[floor]:>14.2f}")


def task_variants(redis_url: str, folder: Path) -> dict[str, Op]:
    import redis
    from celery import Celery
    from celery_once import QueueOnce
    from fencekit.celery import idempotent_task
    from fencekit.idempotency import IdempotencyGuard
    from fencekit.lock import DistributedLock

    import fencing
    from fencing.celery import FencedTask

    app = Celery("bench", broker="memory://", backend="cache+memory://")
    app.conf.update(
        task_always_eager=True,
        task_store_eager_result=False,
        fencing_url=redis_url,
        fencing_once_dir=str(folder / "once"),
        ONCE={"backend": "celery_once.backends.Redis", "settings": {"url": redis_url}},
    )
    client = redis.Redis.from_url(redis_url)
    guard, lock = IdempotencyGuard(client), DistributedLock(client)
    keys = itertools.count()

    @app.task(bind=True)
    def plain(self: Any, n: int) -> int:
        return n

    @app.task(bind=True, base=FencedTask, fence_key="bench:fenced", fence_ttl=30)
    def fenced(self: Any, n: int) -> int:
        return n

    @app.task(bind=True, base=FencedTask, fence_key="bench:once:{n}", fence_ttl=30, fence_once=True)
    def fenced_once(self: Any, n: int) -> int:
        return n

    @app.task(bind=True)
    @idempotent_task(
        guard,
        lock,
        key=lambda n: f"bench:fk:{n}",
        lock_resource=lambda n: "bench:fk-lock",
        idempotency_ttl=timedelta(hours=1),
        lock_ttl=timedelta(seconds=30),
    )
    def fencekit_task(self: Any, n: int) -> int:
        return n

    @app.task(bind=True, base=QueueOnce, once={"graceful": True})
    def once_task(self: Any, n: int) -> int:
        return n

    floor = fencing.RedisFence(client, "bench:floor", ttl=30)

    def acquire_release() -> None:
        floor.release(floor.acquire())

    def hold() -> None:
        with floor.hold():  # acquire, the renewal thread started and stopped, release
            pass

    return {
        "plain task": lambda: plain.apply_async((0,)),
        "fence acquire + release (no task)": acquire_release,
        "fence hold(): + renewal thread (no task)": hold,
        "FencedTask": lambda: fenced.apply_async((0,)),
        "FencedTask, fence_once (file records)": lambda: fenced_once.apply_async((next(keys),)),
        "fencekit idempotent_task": lambda: fencekit_task.apply_async((next(keys),)),
        "celery-once QueueOnce": lambda: once_task.apply_async((0,)),
    }


def save_variants(alias: str) -> dict[str, Op]:
    from django.db import connections, models

    from fencing.django.models import FencedModel

    suffix = alias.replace("-", "_")

    class Plain(models.Model):
        balance = models.IntegerField(default=0)

        class Meta:
            app_label = "__main__"
            db_table = f"bench_plain_{suffix}"

    class Fenced(FencedModel):
        balance = models.IntegerField(default=0)

        class Meta:
            app_label = "__main__"
            db_table = f"bench_fenced_{suffix}"

    with connections[alias].schema_editor() as editor:
        editor.create_model(Plain)
        editor.create_model(Fenced)
    plain = Plain.objects.using(alias).create(balance=0)
    fenced = Fenced(balance=0)
    fenced.save(using=alias)
    tokens = itertools.count(1)

    def plain_save() -> None:
        plain.balance += 1
        plain.save(using=alias)

    def fenced_save() -> None:
        fenced.balance += 1
        fenced.save(fence_token=next(tokens), using=alias)

    return {"plain save()": plain_save, "save(fence_token=...)": fenced_save}


def tasks(redis_url: str, folder: Path, rounds: int, per_round: int) -> None:
    """The tasks' table and the FencedTask overhead line (needs the ``bench`` extra)."""
    medians = measure(task_variants(redis_url, folder), rounds, per_round)
    report("Celery: per task (eager call path, one Redis)", medians, "plain task")
    over = medians["FencedTask"] - medians["plain task"]
    floor = medians["fence acquire + release (no task)"]
    held = medians["fence hold(): + renewal thread (no task)"]
    print(
        f"FencedTask overhead {over:.1f} us; acquire + release alone {floor:.1f} us, "
        f"with the renewal thread {held:.1f} us"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--saves", action="store_true", help="only the Django saves")
    args = parser.parse_args()
    quick = args.quick
    rounds, per_round = (8, 10) if quick else (20, 20)
    folder = Path(tempfile.mkdtemp())
    redis_server, pg = RedisServer().start(), PostgresServer().start()
    try:
        settings.configure(
            INSTALLED_APPS=["fencing.django", "__main__"],
            DATABASES={
                "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
                "pg": {
                    "ENGINE": "django.db.backends.postgresql",
                    "NAME": "postgres",
                    "USER": "postgres",
                    "HOST": "127.0.0.1",
                    "PORT": str(pg.port),
                },
            },
            DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        )
        django.setup()
        print(f"Python {sys.version.split()[0]}, {rounds} rounds x {per_round} calls per variant")
        if not args.saves:
            tasks(redis_server.url, folder, rounds, per_round)
        for alias, label in (("default", "SQLite in memory"), ("pg", "PostgreSQL, loopback")):
            medians = measure(save_variants(alias), rounds, per_round)
            report(f"Django: one row updated per call, {label}", medians, "plain save()")
    finally:
        redis_server.close()
        pg.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
