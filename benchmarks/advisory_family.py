"""Family ``advisory``: one uncontended acquire + release of a PostgreSQL advisory lease
(``lease=advisory``, issue 23), against the bare lock it is made of.

- floor: ``SELECT pg_try_advisory_lock(k1, k2)`` then ``SELECT pg_advisory_unlock(k1, k2)``
  on one psycopg connection in autocommit, kept open (what a hand-written advisory lock
  costs); ``A/A`` is the same on a second connection (noise);
- ``statements``: the issuer's own acquire statement (lock and token in one
  ``INSERT ... ON CONFLICT``) and its unlock, sent the same way: what the token costs in
  SQL, with none of fencing's Python;
- ``fencing lease=advisory``: ``AdvisoryFence.acquire(timeout=0)`` + ``release``;
- ``fencing lease=row``: ``SqlFence.acquire(timeout=0)`` + ``release`` on the same server;
- ``sqlalchemy-dlock``: a peer (advisory locks on a SQLAlchemy ``Connection``, no token):
  ``create_sadlock(conn, name)``, ``acquire(block=False)``, ``release()`` on one kept
  connection in autocommit;
- asyncio: the floor on one psycopg ``AsyncConnection``, and
  ``fencing.sql.aio.AdvisoryFence``, compared with that floor (one event loop);
- ``pals``: a peer (advisory locks through SQLAlchemy, no token): ``Locker.lock(name,
  blocking=False)``, ``acquire()``, ``release()`` (a pals ``Lock`` serves one acquire);
- ``django-pglock``: a peer (advisory locks on Django's connection, no token):
  ``pglock.advisory(name, timeout=0)``, ``acquire()``, ``release()``, on a Django set up
  here with only the run's database (``settings.configure``).

Every variant has a fence name of its own, so nothing waits. PostgreSQL is the run's
(``ctx.pg_url()``), pinned with the client.

Imports psycopg, SQLAlchemy, pals, sqlalchemy-dlock, Django and django-pglock, fencing.sql
and the harness.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pals
import psycopg
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy_dlock.factory import create_sadlock

from fencing.sql import AdvisoryFence, AdvisoryIssuer, SqlFence, advisory_keys, create_tables
from fencing.sql import aio as sql_aio
from fencing.sql._advisory_statements import POSTGRESQL
from harness import Context, Table, Variant, atimed, run_rounds, timed

FLOOR = "floor: pg_try_advisory_lock + pg_advisory_unlock"
AA = "A/A: advisory floor, 2nd copy"
STATEMENTS = "the issuer's two statements, bare psycopg"
ADVISORY = "fencing lease=advisory (AdvisoryFence)"
ROW = "fencing lease=row (SqlFence)"
PALS = "pals 0.4 Lock (no token)"
PGLOCK = "django-pglock 1.8 advisory (no token)"
DLOCK = "sqlalchemy-dlock 0.9 (no token)"
FLOOR_ASYNC = "asyncio floor: the same, psycopg AsyncConnection"
ADVISORY_ASYNC = "asyncio lease=advisory (aio.AdvisoryFence)"


def run(ctx: Context) -> list[Table]:
    url = ctx.pg_url()
    if url is None:
        raise RuntimeError("the advisory family needs PostgreSQL")
    engine = create_engine(url)
    create_tables(engine)
    engine.dispose()
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    floor, aa, bare = (psycopg.connect(dsn, autocommit=True) for _ in range(3))
    issuer = AdvisoryIssuer(url)
    advisory = AdvisoryFence(url, "bench:advisory:fence", ttl=30, issuer=issuer)
    row = SqlFence(url, "bench:advisory:row", ttl=30)
    locker = pals.Locker("bench", create_engine_callable=lambda: create_engine(url))
    pglock = _django_pglock(url)
    dlock_engine = create_engine(url, isolation_level="AUTOCOMMIT")
    dlock_conn = dlock_engine.connect()
    loop = asyncio.new_event_loop()
    afloor = loop.run_until_complete(psycopg.AsyncConnection.connect(dsn, autocommit=True))
    aissuer = sql_aio.AdvisoryIssuer(url)
    afence = sql_aio.AdvisoryFence(url, "bench:advisory:aio", ttl=30, issuer=aissuer)
    variants = [
        Variant(FLOOR, timed(_bare(floor, "bench:advisory:floor")), is_floor=True),
        Variant(AA, timed(_bare(aa, "bench:advisory:aa"))),
        Variant(STATEMENTS, timed(_statements(bare, "bench:advisory:statements"))),
        Variant(ADVISORY, timed(_cycle(advisory))),
        Variant(ROW, timed(_cycle(row))),
        Variant(PALS, timed(_pals(locker, "bench:advisory:pals"))),
        Variant(PGLOCK, timed(_pglock(pglock, "bench:advisory:pglock"))),
        Variant(DLOCK, timed(_dlock(dlock_conn, "bench:advisory:dlock"))),
        Variant(FLOOR_ASYNC, atimed(loop, _async_bare(afloor, "bench:advisory:afloor"))),
        Variant(ADVISORY_ASYNC, atimed(loop, _async_cycle(afence))),
    ]
    try:
        stats = run_rounds(
            variants, rounds=ctx.scale(10, 40), per_round=ctx.scale(50, 100), warmup=50
        )
    finally:
        for conn in (floor, aa, bare):
            conn.close()
        issuer.close()
        locker.engine.dispose()
        dlock_conn.close()
        dlock_engine.dispose()
        loop.run_until_complete(afloor.close())
        loop.run_until_complete(aissuer.close())
        loop.close()
    table = Table(
        "advisory",
        "uncontended acquire + release, PostgreSQL advisory lock (own name, one CPU)",
        [stats[v.name] for v in variants],
        floor=FLOOR,
        floor_of={ADVISORY_ASYNC: FLOOR_ASYNC},
    )
    return [table]


def _bare(conn: psycopg.Connection[Any], name: str) -> Callable[[], None]:
    k1, k2 = advisory_keys(name)

    def cycle() -> None:
        got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2)).fetchone()
        assert got is not None and got[0]
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (k1, k2)).fetchone()

    return cycle


def _statements(conn: psycopg.Connection[Any], name: str) -> Callable[[], None]:
    k1, k2 = advisory_keys(name)
    params = {"name": name, "k1": k1, "k2": k2}
    acquire, release = (_psycopg_sql(str(s)) for s in (POSTGRESQL.acquire, POSTGRESQL.release))

    def cycle() -> None:
        got = conn.execute(acquire, params).fetchone()
        assert got is not None
        conn.execute(release, params).fetchone()

    return cycle


def _psycopg_sql(sql: str) -> Any:
    for param in ("name", "k1", "k2"):
        sql = sql.replace(f":{param}", f"%({param})s")
    return sql


def _cycle(fence: AdvisoryFence | SqlFence) -> Callable[[], None]:
    def cycle() -> None:
        fence.release(fence.acquire(timeout=0))

    return cycle


def _pals(locker: Any, name: str) -> Callable[[], None]:
    def cycle() -> None:
        lock = locker.lock(name, blocking=False)
        assert lock.acquire()
        lock.release()

    return cycle


def _django_pglock(url: str) -> Any:
    """django-pglock's module, Django set up on the run's database (once per process)."""
    import django
    from django.conf import settings

    if not settings.configured:
        parsed = make_url(url)
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": parsed.database,
            "USER": parsed.username,
            "HOST": parsed.host,
            "PORT": str(parsed.port),
        }
        settings.configure(DATABASES={"default": database}, INSTALLED_APPS=[], USE_TZ=True)
        django.setup()
    import pglock

    return pglock


def _pglock(pglock: Any, name: str) -> Callable[[], None]:
    def cycle() -> None:
        lock = pglock.advisory(name, timeout=0)
        assert lock.acquire()
        lock.release()

    return cycle


def _dlock(conn: Any, name: str) -> Callable[[], None]:
    def cycle() -> None:
        lock: Any = create_sadlock(conn, name)  # its methods are untyped
        assert lock.acquire(block=False)
        lock.release()

    return cycle


def _async_bare(conn: psycopg.AsyncConnection[Any], name: str) -> Callable[[], Awaitable[None]]:
    k1, k2 = advisory_keys(name)

    async def cycle() -> None:
        got = await (await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2))).fetchone()
        assert got is not None and got[0]
        await (await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (k1, k2))).fetchone()

    return cycle


def _async_cycle(fence: sql_aio.AdvisoryFence) -> Callable[[], Awaitable[None]]:
    async def cycle() -> None:
        await fence.release(await fence.acquire(timeout=0))

    return cycle
