"""PostgreSQL advisory locks as leases (``lease=advisory``): what is theirs beyond the
contract (tests/test_sql_advisory_contract.py): the key derivation, URLs, interop with
raw advisory locks, killed holders, terminated backends, failed acquires.

``advisory_keys`` is public and must never change: the pinned values below are what
psql users reproduce with the SQL in docs/sql.md, and the test runs that SQL on the
session's PostgreSQL to show it gives the same keys.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from pg_advisory import advisory_url, terminate_holder
from sqlalchemy import create_engine
from sqlalchemy.dialects.postgresql import pg8000
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect
from sqlalchemy.ext.asyncio import create_async_engine
from waiting import PATIENCE, wait_until

import fencing
from fencing import cli
from fencing.sql import AdvisoryFence, AdvisoryIssuer, SqlFence, advisory_keys, create_tables
from fencing.sql._advisory_statements import LOCK_ROWS, POSTGRESQL, lock_params
from fencing.sql._backend import SqlBackend
from fencing.sql._driver import compiled
from fencing.sql._keys import KEYS_SQL
from fencing.sql.aio import AdvisoryFence as AsyncAdvisoryFence
from fencing.sql.aio import AdvisoryIssuer as AsyncAdvisoryIssuer
from fencing.testing.servers import MariaDBServer, PostgresServer

__all__ = ["advisory_url"]  # a fixture, imported to be used here

#: name -> keys, pinned: sha256("invoice:42") starts 5cd23eb3 3b1a2549 (hex).
PINNED = {
    "invoice:42": (1557282483, 991569225),
    "job": (1586272514, 544930539),
    "é€😀": (-544069998, 2144694977),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_keys_are_pinned(name: str) -> None:
    assert advisory_keys(name) == PINNED[name]


def test_keys_are_two_signed_int4() -> None:
    for i in range(2000):
        for key in advisory_keys(f"n{i}"):
            assert -(2**31) <= key < 2**31


@pytest.mark.parametrize(
    ("name", "error"),
    [
        (b"job", TypeError),
        (None, TypeError),
        ("", ValueError),
        ("a\x00b", ValueError),
        ("x" * 257, ValueError),
    ],
)
def test_bad_names_are_refused(name: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        advisory_keys(name)


def test_psql_derives_the_same_keys(postgres_server: PostgresServer) -> None:
    dsn = f"host=127.0.0.1 port={postgres_server.port} user=postgres dbname=postgres"
    query = KEYS_SQL.replace(":name", "%(name)s")
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in [*PINNED, "a'b", "x" * 256]:
            row = conn.execute(query, {"name": name}).fetchone()
            assert row == advisory_keys(name), name


# -- lease=advisory: URLs -------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////tmp/fencing.db?lease=advisory",  # advisory locks are PostgreSQL's
        "postgresql://app@db/app?lease=bogus",  # an unknown lease
        "postgresql://app@db/app?lease=",
        "redis://localhost:6379/0?lease=advisory",  # the option is the SQL backend's
        "redis+cluster://127.0.0.1:7000?lease=row",
        "etcd://127.0.0.1:2379?lease=advisory",
    ],
)
def test_bad_lease_option_is_a_value_error(url: str) -> None:
    with pytest.raises(ValueError, match="lease"):
        fencing.connect(url)


def test_lease_option_picks_the_issuer_and_leaves_the_url() -> None:
    advisory = fencing.connect("postgres://app@db/app?sslmode=disable&lease=advisory")
    assert isinstance(advisory, SqlBackend) and advisory.lease == "advisory"
    assert advisory.engine_url == "postgresql://app@db/app?sslmode=disable"
    assert isinstance(advisory.fence("job", ttl=5), AdvisoryFence)
    assert isinstance(advisory.issuer, AdvisoryIssuer)
    for url in ("postgresql://app@db/app?lease=row", "postgresql://app@db/app"):  # the default
        row = fencing.connect(url)
        assert isinstance(row, SqlBackend) and row.lease == "row", url
        assert isinstance(row.fence("job"), SqlFence)


def test_statements_compile_for_named_and_positional_drivers() -> None:
    """The lease statements go to the driver's cursor (``_driver``): psycopg takes them
    by name, pg8000 by position, in the order the compiled SQL uses them."""
    sql, names, positional = compiled(POSTGRESQL.acquire, pg8000.dialect())  # type: ignore[no-untyped-call]
    assert positional and names == ("k1", "k2", "name")
    assert sql.count("%s") == 3 and ":name" not in sql
    sql, names, positional = compiled(POSTGRESQL.acquire, psycopg_dialect.dialect())  # type: ignore[no-untyped-call]
    assert not positional and set(names) == {"k1", "k2", "name"}
    assert "%(name)s" in sql and "%(k1)s" in sql


# -- lease=advisory on a real PostgreSQL ----------------------------------------------


def raw(server: PostgresServer, database: str | None = None) -> psycopg.Connection[Any]:
    """A plain psycopg connection, as psql or another library would hold one."""
    dsn = f"host=127.0.0.1 port={server.port} user=postgres dbname={database or server.database}"
    return psycopg.connect(dsn, autocommit=True)


def try_lock(conn: psycopg.Connection[Any], name: str, unlock: bool = False) -> bool:
    k1, k2 = advisory_keys(name)
    verb = "pg_advisory_unlock" if unlock else "pg_try_advisory_lock"
    row = conn.execute(f"SELECT {verb}(%s, %s)", (k1, k2)).fetchone()
    assert row is not None
    return bool(row[0])


def locked_anywhere(conn: psycopg.Connection[Any], name: str) -> int:
    """How many backends of this database hold the advisory lock of ``name``."""
    query = f"SELECT count(*) FROM pg_locks p WHERE {LOCK_ROWS}"
    row = conn.execute(query.replace(":c1", "%(c1)s").replace(":c2", "%(c2)s"), lock_params(name))
    return int(row.fetchone()[0])  # type: ignore[index]


def unique(what: str) -> str:
    return f"advisory:{what}:{uuid.uuid4().hex}"


@pytest.fixture
def backend(advisory_url: str) -> Iterator[SqlBackend]:
    found = fencing.connect(advisory_url + "?lease=advisory")
    assert isinstance(found, SqlBackend)
    yield found


def test_interop_with_a_raw_advisory_lock_both_ways(
    backend: SqlBackend, postgres_server: PostgresServer
) -> None:
    name = unique("interop")
    fence = backend.fence(name, ttl=30)
    with raw(postgres_server) as other:
        assert try_lock(other, name)  # psql first: the fence is excluded ...
        with pytest.raises(fencing.AcquireTimeout):
            fence.acquire(timeout=0)
        with ThreadPoolExecutor(1) as pool:
            waiter = pool.submit(fence.acquire, timeout=PATIENCE)
            assert try_lock(other, name, unlock=True)  # ... and gets it once psql lets go
            token = waiter.result(PATIENCE)
        assert not try_lock(other, name)  # the fence holds: psql is excluded
        fence.release(token)
        assert try_lock(other, name)
        assert try_lock(other, name, unlock=True)


async def test_interop_asyncio(backend: SqlBackend, postgres_server: PostgresServer) -> None:
    name = unique("interop-aio")
    fence = backend.aio_fence(name, ttl=30)
    try:
        with raw(postgres_server) as other:
            token = await fence.acquire(timeout=0)
            assert not try_lock(other, name)
            blocking = backend.issuer
            assert isinstance(blocking, AdvisoryIssuer)
            issuer = fence.issuer
            assert isinstance(issuer, AsyncAdvisoryIssuer)
            held = await issuer.status(name)  # the same read as the blocking issuer's
            assert held == blocking.status(name) and held.token == token, held
            await fence.release(token)
            free = await issuer.status(name)
            assert not free.held and free.last_token == token, free
            assert try_lock(other, name)
            with pytest.raises(fencing.AcquireTimeout):
                await fence.acquire(timeout=0)
            assert try_lock(other, name, unlock=True)
            assert await fence.acquire(timeout=0) > token
    finally:
        await fence.aclose()


def test_a_users_engine_is_switched_to_autocommit_and_given_back_as_it_was(
    advisory_url: str, postgres_server: PostgresServer
) -> None:
    """On a user's engine (one connection, default isolation) the token commits with the
    lock at once (autocommit at checkout), and the released lease's connection goes back
    to the user's pool in its own isolation level, never kept by the issuer."""
    engine = create_engine(advisory_url, pool_size=1, max_overflow=0, pool_timeout=PATIENCE)
    issuer = AdvisoryIssuer(engine)
    name = unique("user-engine")
    fence = AdvisoryFence(engine, name, ttl=30, issuer=issuer)
    try:
        for _ in range(2):
            token = fence.acquire(timeout=0)
            with raw(postgres_server) as other:
                query = "SELECT token FROM fencing_leases WHERE name = %s"
                assert other.execute(query, (name,)).fetchone() == (int(token),)  # committed
                assert locked_anywhere(other, name) == 1
            fence.release(token)
            with engine.connect() as conn:  # the pool's only connection: given back
                assert conn.get_isolation_level() == engine.dialect.default_isolation_level
                assert not conn.connection.dbapi_connection.autocommit  # type: ignore[union-attr]
    finally:
        issuer.close()
        engine.dispose()  # the user's: the issuer leaves it open


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
async def test_a_users_async_engine_is_switched_and_given_back_as_it_was(
    advisory_url: str, postgres_server: PostgresServer, driver: str
) -> None:
    """The same with an ``AsyncEngine`` (the switch runs in SQLAlchemy's greenlet)."""
    engine = create_async_engine(
        postgres_server.url_for(driver), pool_size=1, max_overflow=0, pool_timeout=PATIENCE
    )
    issuer = AsyncAdvisoryIssuer(engine)
    name = unique("user-async-engine")
    fence = AsyncAdvisoryFence(engine, name, ttl=30, issuer=issuer)
    try:
        for _ in range(2):
            token = await fence.acquire(timeout=0)
            with raw(postgres_server) as other:
                query = "SELECT token FROM fencing_leases WHERE name = %s"
                assert other.execute(query, (name,)).fetchone() == (int(token),)  # committed
            await fence.release(token)
            async with engine.connect() as conn:  # the pool's only connection: given back
                level = await conn.get_isolation_level()
                assert level == engine.dialect.default_isolation_level != "AUTOCOMMIT"
    finally:
        await issuer.aclose()
        await engine.dispose()  # the user's: the issuer leaves it open


def test_a_released_connection_is_kept_for_the_next_acquire_holding_nothing(
    advisory_url: str, postgres_server: PostgresServer
) -> None:
    """The issuer's own engine: a released lease's connection serves the next acquire
    (the same backend), and holds no lock in between."""
    issuer = AdvisoryIssuer(advisory_url)
    name = unique("kept")
    fence = AdvisoryFence(advisory_url, name, ttl=30, issuer=issuer)
    try:
        first = fence.acquire(timeout=0)
        pid = issuer.status(name).holder
        fence.release(first)
        with raw(postgres_server) as other:
            assert locked_anywhere(other, name) == 0
        second = fence.acquire(timeout=0)
        assert second > first and issuer.status(name).holder == pid
        fence.release(second)
    finally:
        issuer.close()


def sessions(server: PostgresServer, app: str) -> int:
    """How many server sessions connected with ``application_name`` ``app`` are open."""
    with raw(server) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        return int(conn.execute(query, (app,)).fetchone()[0])  # type: ignore[index]


def test_close_disposes_of_the_issuers_own_engine_only(
    advisory_url: str, postgres_server: PostgresServer
) -> None:
    """``close()`` on a user's engine leaves its pool alone (the idle connection the
    lease gave back still serves the user: same backend); on an engine the issuer made
    from a URL, every connection it opened is closed."""
    app = uuid.uuid4().hex
    url = f"{advisory_url}?application_name={app}"
    engine = create_engine(url, pool_size=1, max_overflow=0, pool_timeout=PATIENCE)
    issuer = AdvisoryIssuer(engine)
    fence = AdvisoryFence(engine, unique("close-users"), ttl=30, issuer=issuer)
    fence.release(fence.acquire(timeout=0))
    pid = "SELECT pg_backend_pid()"
    try:
        with engine.connect() as conn:
            before = conn.exec_driver_sql(pid).scalar()
        issuer.close()
        with engine.connect() as conn:
            assert conn.exec_driver_sql(pid).scalar() == before
    finally:
        engine.dispose()
    own = AdvisoryIssuer(url)
    AdvisoryFence(url, unique("close-held"), ttl=30, issuer=own).acquire(timeout=0)  # one held
    fence = AdvisoryFence(url, unique("close-own"), ttl=30, issuer=own)
    fence.release(fence.acquire(timeout=0))  # and one kept
    assert sessions(postgres_server, app) >= 2
    own.close()
    wait_until(lambda: sessions(postgres_server, app) == 0, "the own engine's sessions end")


async def test_close_disposes_of_the_async_issuers_own_engine_only(
    advisory_url: str, postgres_server: PostgresServer
) -> None:
    """The same for the asyncio issuer; a blocking ``Engine`` passed to it is only a URL
    (it makes an engine of its own), and is left alone too."""
    app = uuid.uuid4().hex
    url = f"{advisory_url}?application_name={app}"
    engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=PATIENCE)
    issuer = AsyncAdvisoryIssuer(engine)
    fence = AsyncAdvisoryFence(engine, unique("close-users"), ttl=30, issuer=issuer)
    await fence.release(await fence.acquire(timeout=0))
    pid = "SELECT pg_backend_pid()"
    try:
        async with engine.connect() as conn:
            before = (await conn.exec_driver_sql(pid)).scalar()
        await issuer.aclose()
        async with engine.connect() as conn:
            assert (await conn.exec_driver_sql(pid)).scalar() == before
    finally:
        await engine.dispose()
    blocking = create_engine(url, pool_size=1, max_overflow=0, pool_timeout=PATIENCE)
    with blocking.connect() as conn:
        before = conn.exec_driver_sql(pid).scalar()
    own = AsyncAdvisoryIssuer(blocking)
    await AsyncAdvisoryFence(blocking, unique("close-held"), issuer=own).acquire(timeout=0)
    fence = AsyncAdvisoryFence(blocking, unique("close-own"), ttl=30, issuer=own)
    await fence.release(await fence.acquire(timeout=0))  # one held, one kept, the user's
    assert sessions(postgres_server, app) >= 3
    await own.aclose()
    try:
        wait_until(lambda: sessions(postgres_server, app) == 1, "the own engine's sessions end")
        with blocking.connect() as conn:
            assert conn.exec_driver_sql(pid).scalar() == before
    finally:
        blocking.dispose()


def test_a_forked_child_never_uses_its_parents_kept_connection(
    advisory_url: str, postgres_server: PostgresServer
) -> None:
    """A connection kept for the next acquire is a socket: a forked child that took it
    would run its leases on its parent's server session. The child opens its own (and
    leaves the issuer's pool, the parent's sockets too, alone), and cannot release a
    lease its parent holds."""
    issuer = AdvisoryIssuer(advisory_url)
    name = unique("fork")
    fence = AdvisoryFence(advisory_url, name, ttl=30, issuer=issuer)
    try:
        held = AdvisoryFence(advisory_url, name + ":held", ttl=30, issuer=issuer)
        kept = held.acquire(timeout=0)  # held across the fork: the parent's lease
        token = fence.acquire(timeout=0)
        parents = issuer.status(name).holder
        fence.release(token)  # its connection is kept
        with raw(postgres_server) as other:  # every backend there is before the fork
            before = {row[0] for row in other.execute("SELECT pid FROM pg_stat_activity")}
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover (the child reports through the pipe)
            try:
                with contextlib.suppress(fencing.LeaseLost):
                    held.release(kept)  # not the child's to release
                newer = fence.acquire(timeout=0)
                os.write(write, f"{int(newer)}|{issuer.status(name).holder}".encode())
                fence.release(newer)
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            reported, holder = pipe.read().split("|")
        assert os.waitpid(child, 0)[1] == 0
        assert int(reported) > token
        assert int(holder.split(",")[0].removeprefix("pid ")) not in before  # a new backend
        again = fence.acquire(timeout=0)  # the parent's kept connection still works
        assert again > int(reported) and issuer.status(name).holder == parents
        fence.release(again)
        held.renew(kept)  # the child left the parent's lease alone
        held.release(kept)
    finally:
        issuer.close()


_AT_EXIT = """
import atexit, gc, sys, weakref
import psycopg

made = []  # every connection opened, weakly
opened = psycopg.Connection.__init__
def tracked(self, *args, **kwargs):
    opened(self, *args, **kwargs)
    made.append(weakref.ref(self))
psycopg.Connection.__init__ = tracked

def count_open():  # registered first, so it runs last: after fencing's own at-exit
    gc.collect()
    still = [conn for conn in (ref() for ref in made) if conn is not None and not conn.closed]
    print(len(still), "of", len(made), "open", flush=True)

atexit.register(count_open)
import fencing
for url in sys.argv[1:]:
    fence = fencing.connect(url).fence("at-exit", ttl=30)
    fence.release(fence.acquire(timeout=10))  # the connection is kept, or pooled
"""


def test_connections_that_connect_opened_are_closed_at_exit(
    backend: SqlBackend, pg_url: str
) -> None:
    """``fencing.connect(url)``'s issuers are the process's (one per URL, a pool each):
    nobody else can close them, so they close at exit, instead of being dropped open
    (psycopg's ResourceWarning) as the interpreter ends."""
    urls = [backend.url, pg_url]  # an advisory lease's kept connection; a row's pool
    result = subprocess.run(
        [sys.executable, "-c", _AT_EXIT, *urls], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("0 of "), result.stdout + result.stderr
    assert not result.stdout.startswith("0 of 0 "), result.stdout  # it saw the connections


_HOLDER = """
import sys, time, fencing
fence = fencing.connect(sys.argv[1]).fence(sys.argv[2], ttl=30)
print(int(fence.acquire(timeout=60)), flush=True)
time.sleep(600)
"""


def test_killed_holder_frees_its_lock_and_the_next_token_is_higher(
    backend: SqlBackend, postgres_server: PostgresServer
) -> None:
    name = unique("sigkill")
    command = [sys.executable, "-c", _HOLDER, backend.url, name]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            token = int(child.stdout.readline())
            fence = backend.fence(name, ttl=30)
            with pytest.raises(fencing.AcquireTimeout):
                fence.acquire(timeout=0)
            child.kill()  # SIGKILL: no release, the connection just ends with the process
            child.wait(PATIENCE)
            newer = fence.acquire(timeout=PATIENCE)  # woken when the server frees the lock
            assert newer > token
            fence.release(newer)
        finally:
            child.kill()
            child.wait(PATIENCE)


def test_terminated_backend_makes_the_lease_lost(
    backend: SqlBackend, postgres_server: PostgresServer
) -> None:
    name = unique("terminated")
    fence, other = backend.fence(name, ttl=0.6), backend.fence(name, ttl=30)
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost), hold as token:
        assert terminate_holder(postgres_server, name) == 1
        wait_until(lambda: hold.lost, "hold() to find the lock gone")
        newer = other.acquire(timeout=0)  # the lock went with the connection
    assert newer > token
    other.release(newer)
    evicted = fence.acquire(timeout=0)
    assert terminate_holder(postgres_server, name) == 1
    for act in (fence.renew, fence.release):
        with pytest.raises(fencing.LeaseLost):
            act(evicted)
    last = other.acquire(timeout=0)
    assert last > evicted
    other.release(last)


def test_force_release_terminates_the_holder(
    backend: SqlBackend, postgres_server: PostgresServer
) -> None:
    name = unique("force")
    fence = backend.fence(name, ttl=30)
    token = fence.acquire(timeout=0)
    issuer = backend.issuer
    assert isinstance(issuer, AdvisoryIssuer)
    status = issuer.status(name)
    assert status.held and status.token == token
    assert status.holder is not None and status.holder.startswith("pid ")
    assert "client 127.0.0.1" in status.holder
    ended = issuer.force_release(name)
    assert ended.held and ended.token == token
    with pytest.raises(fencing.LeaseLost):
        fence.renew(token)
    successor = backend.fence(name, ttl=30)
    newer = successor.acquire(timeout=0)
    assert newer > token
    with raw(postgres_server) as other:
        assert locked_anywhere(other, name) == 1  # the successor's, only
    successor.release(newer)


def test_failed_acquire_leaves_nothing_locked(
    empty_pg_url: str, postgres_server: PostgresServer
) -> None:
    """The token's INSERT fails after the lock was taken in the same statement (a
    CHECK constraint refuses every token): the session lock would outlive the rollback,
    so the issuer must close that connection, and nothing stays locked."""
    database = empty_pg_url.rsplit("/", 1)[1]
    with raw(postgres_server, database) as admin:
        admin.execute(
            "CREATE TABLE fencing_leases (name varchar(256) PRIMARY KEY, "
            "token bigint NOT NULL DEFAULT 0 CHECK (token < 0), holder varchar(64), "
            "expires_at double precision)"
        )
        issuer = AdvisoryIssuer(empty_pg_url)
        name = unique("failed")
        fence = AdvisoryFence(empty_pg_url, name, ttl=30, issuer=issuer)
        try:
            for _ in range(3):
                with pytest.raises(fencing.FenceUnavailable):
                    fence.acquire(timeout=0)
                wait_until(lambda: locked_anywhere(admin, name) == 0, "the lock to be freed")
            assert try_lock(admin, name)
            assert try_lock(admin, name, unlock=True)
        finally:
            issuer.close()


def test_missing_table_is_a_setup_error_with_nothing_locked(
    empty_pg_url: str, postgres_server: PostgresServer
) -> None:
    name = unique("setup")
    issuer = AdvisoryIssuer(empty_pg_url)
    try:
        with pytest.raises(fencing.FenceSetupError, match="fencing migrate"):
            AdvisoryFence(empty_pg_url, name, issuer=issuer).acquire(timeout=0)
        with raw(postgres_server, empty_pg_url.rsplit("/", 1)[1]) as admin:
            assert locked_anywhere(admin, name) == 0
    finally:
        issuer.close()


def test_cli_status_and_force_release(
    backend: SqlBackend, advisory_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fencing status`` names the holder's backend (pid, ``application_name``, client
    address, from ``pg_stat_activity``); ``release --force`` ends it."""
    name = unique("cli")
    holder = fencing.connect(advisory_url + "?application_name=worker-7&lease=advisory")
    fence = holder.fence(name, ttl=30)
    token = fence.acquire(timeout=0)
    capsys.readouterr()
    assert cli.main(["status", "--url", backend.url, name]) == 0
    out = capsys.readouterr().out
    assert "held by pid " in out and "application_name 'worker-7'" in out
    assert "client 127.0.0.1" in out and str(int(token)) in out
    assert cli.main(["release", name, "--force", "--url", backend.url]) == 0
    with pytest.raises(fencing.LeaseLost):
        fence.renew(token)
    newer = fence.acquire(timeout=0)
    assert newer > token
    fence.release(newer)


@pytest.mark.parametrize("kind", [PostgresServer, MariaDBServer])
async def test_server_restart_loses_held_leases_then_acquires_go_on(
    kind: type[PostgresServer | MariaDBServer],
) -> None:
    """A private PostgreSQL or MariaDB (the session's are shared) is stopped and started
    again.

    - A lease held across the restart: its lock lived in the server session that the
      shutdown ended, and a session lock never comes back on a new connection, so the
      lease is gone for certain, not merely unknown: renew raises ``LeaseLost`` (not
      ``FenceUnavailable``, which would say "retry, it may still be yours"), during the
      outage and after it alike, and so does release.
    - An acquire while the server is down: ``FenceUnavailable``, nothing half-done.
    - Once it is back, the next acquire works, with a token above the lost lease's: the
      counter is the ``fencing_leases`` row, which the restart kept.
    - Restarted again with nothing tried meanwhile, the pooled connections are dead: an
      acquire and a status read go on, on new connections (the issuer's ``once_more``).

    Blocking and asyncio side by side, on one restart."""
    with kind() as server:
        engine = create_engine(server.url)
        create_tables(engine)
        engine.dispose()
        backend = fencing.connect(server.url + "?lease=advisory")
        assert isinstance(backend, SqlBackend)
        name = unique("restart")
        fence, afence = backend.fence(name, ttl=30), backend.aio_fence(name + ":aio", ttl=30)
        try:
            token, atoken = fence.acquire(timeout=0), await afence.acquire(timeout=0)
            server.stop()
            with pytest.raises(fencing.LeaseLost):
                fence.renew(token)
            with pytest.raises(fencing.LeaseLost):
                await afence.renew(atoken)
            with pytest.raises(fencing.FenceUnavailable):
                backend.fence(name, ttl=30).acquire(timeout=0)
            with pytest.raises(fencing.FenceUnavailable):
                await backend.aio_fence(name + ":aio", ttl=30).acquire(timeout=0)
            server.start()
            with pytest.raises(fencing.LeaseLost):
                fence.release(token)
            with pytest.raises(fencing.LeaseLost):
                await afence.release(atoken)
            newer, anewer = fence.acquire(timeout=0), await afence.acquire(timeout=0)
            assert newer > token and anewer > atoken
            fence.release(newer)
            await afence.release(anewer)
            server.restart()  # nothing tried in between: the pool holds dead connections
            assert issuer_status(backend, name).last_token == newer  # read once more, on a new one
            last, alast = fence.acquire(timeout=0), await afence.acquire(timeout=0)  # and acquires
            assert last > newer and alast > anewer
            fence.release(last)
            await afence.release(alast)
        finally:
            await afence.aclose()
            fence.issuer.close()  # type: ignore[attr-defined]


def issuer_status(backend: SqlBackend, name: str) -> fencing.FenceStatus:
    issuer = backend.issuer
    assert isinstance(issuer, AdvisoryIssuer)
    return issuer.status(name)
