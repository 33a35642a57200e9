"""``lease=advisory`` on MySQL and MariaDB (``GET_LOCK``), what the contract does not say:
the lock's name (a long fence name hashed), interop with a hand-written ``GET_LOCK``,
nothing left locked by a failed acquire, and the direct connection recognised. The
contract itself runs on MariaDB in ``test_sql_advisory_contract``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pymysql
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine
from waiting import PATIENCE, wait_until

import fencing
from fencing.sql import AdvisoryFence, AdvisoryIssuer
from fencing.sql._advisory_flows import is_direct, socket_address
from fencing.sql._advisory_statements import MYSQL_STATEMENTS
from fencing.sql._backend import SqlBackend
from fencing.sql._keys import lock_name
from fencing.sql.aio import AdvisoryIssuer as AsyncAdvisoryIssuer
from fencing.testing.servers import MariaDBServer

LONG = "invoice:" + "x" * 92  # 100 characters: hashed


def unique(what: str) -> str:
    return f"advisory:{what}:{uuid.uuid4().hex}"


def raw(server: MariaDBServer, database: str = "fencing") -> Any:
    """A plain PyMySQL connection, as the mysql client or another library would hold one."""
    return pymysql.connect(
        host="127.0.0.1", port=server.port, user="fencing", database=database, autocommit=True
    )


def one(conn: Any, sql: str, *args: Any) -> Any:
    with conn.cursor() as cursor:
        cursor.execute(sql, args)
        row = cursor.fetchone()
        return None if row is None else row[0]


# -- the lock's name ------------------------------------------------------------------


def test_a_name_of_up_to_64_characters_is_its_own_lock_name_a_longer_one_is_hashed() -> None:
    assert lock_name("invoice:42") == "invoice:42"
    assert lock_name("é" * 64) == "é" * 64  # characters, not bytes
    digest = hashlib.sha256(LONG.encode("utf-8")).hexdigest()
    assert lock_name(LONG) == "fencing:" + digest[:56] and len(lock_name(LONG)) == 64
    assert lock_name("x" * 65) != lock_name("x" * 66)
    assert lock_name("x" * 65).startswith("fencing:")


@pytest.mark.parametrize("name, error", [(b"job", TypeError), ("", ValueError), (7, TypeError)])
def test_bad_names_are_refused(name: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        lock_name(name)


def test_mysql_urls_take_lease_advisory_with_their_sides_drivers() -> None:
    """A MySQL or MariaDB URL is accepted (nothing connects yet); an asyncio driver's URL
    gives the blocking issuer PyMySQL, and a blocking one gives the asyncio issuer aiomysql."""
    backend = fencing.connect("mysql+aiomysql://app@db/app?lease=advisory")
    assert isinstance(backend, SqlBackend) and backend.lease == "advisory"
    assert isinstance(backend.fence("job"), AdvisoryFence)
    assert AdvisoryIssuer("mysql+aiomysql://app@db/app").engine.url.drivername == "mysql+pymysql"
    assert AdvisoryIssuer("mariadb://app@db/app").engine.url.drivername == "mariadb+pymysql"
    issuer = AsyncAdvisoryIssuer("mysql://app@db/app")
    assert issuer.engine.url.drivername == "mysql+aiomysql"


# -- on the session's MariaDB ---------------------------------------------------------


@pytest.fixture
def backend(mariadb_url: str) -> Iterator[SqlBackend]:
    found = fencing.connect(mariadb_url + "?lease=advisory")
    assert isinstance(found, SqlBackend)
    yield found


#: The lock name in SQL, as docs/mysql.md gives it for anyone's own ``GET_LOCK``.
LOCK_NAME_SQL = (
    "SELECT IF(CHAR_LENGTH(%(n)s) <= 64, %(n)s, CONCAT('fencing:', LEFT(SHA2(%(n)s, 256), 56)))"
)


def test_the_documented_sql_derives_the_same_lock_names(mariadb_server: MariaDBServer) -> None:
    with raw(mariadb_server) as conn, conn.cursor() as cursor:
        for name in ("invoice:42", "é" * 64, "é" * 65, LONG, "x" * 256):
            cursor.execute(LOCK_NAME_SQL, {"n": name})
            assert cursor.fetchone()[0] == lock_name(name), name


@pytest.mark.parametrize("size", ["short", "long"])
def test_interop_with_a_raw_get_lock_both_ways(
    backend: SqlBackend, mariadb_server: MariaDBServer, size: str
) -> None:
    """``GET_LOCK(lock_name(name))`` in anyone's SQL excludes the fence, and is excluded
    by it; a long name's lock is its hash's."""
    name = unique("interop") if size == "short" else LONG + uuid.uuid4().hex
    lock = lock_name(name)
    assert (lock == name) is (size == "short")
    fence = backend.fence(name, ttl=30)
    with raw(mariadb_server) as other:
        assert one(other, "SELECT GET_LOCK(%s, 0)", lock) == 1  # the client first ...
        with pytest.raises(fencing.AcquireTimeout):
            fence.acquire(timeout=0)
        with ThreadPoolExecutor(1) as pool:
            waiter = pool.submit(fence.acquire, timeout=PATIENCE)
            assert one(other, "SELECT RELEASE_LOCK(%s)", lock) == 1  # ... the fence then
            token = waiter.result(PATIENCE)
        assert one(other, "SELECT GET_LOCK(%s, 0)", lock) == 0  # the fence holds
        fence.release(token)
        assert one(other, "SELECT GET_LOCK(%s, 0)", lock) == 1
        assert one(other, "SELECT RELEASE_LOCK(%s)", lock) == 1
        assert fence.acquire(timeout=0) > token


def test_failed_acquire_leaves_nothing_locked(
    empty_mariadb_url: str, mariadb_server: MariaDBServer
) -> None:
    """The token's upsert fails after ``GET_LOCK`` took the lock in the same statement (a
    CHECK constraint refuses every token): the lock would outlive the statement, so the
    issuer must close that connection, and nothing stays locked."""
    database = empty_mariadb_url.rsplit("/", 1)[1]
    name = unique("failed")
    with raw(mariadb_server, database) as admin:
        with admin.cursor() as cursor:
            cursor.execute(
                "CREATE TABLE fencing_leases (name varchar(256) PRIMARY KEY, "
                "token bigint NOT NULL DEFAULT 0 CHECK (token < 0), holder varchar(64), "
                "expires_at double) ENGINE=InnoDB"
            )
        issuer = AdvisoryIssuer(empty_mariadb_url)
        fence = AdvisoryFence(empty_mariadb_url, name, ttl=30, issuer=issuer)
        try:
            for _ in range(3):
                with pytest.raises(fencing.FenceUnavailable):
                    fence.acquire(timeout=0)
                wait_until(
                    lambda: one(admin, "SELECT IS_USED_LOCK(%s)", name) is None,
                    "the lock to be freed",
                )
            assert one(admin, "SELECT GET_LOCK(%s, 0)", name) == 1
        finally:
            issuer.close()


def test_missing_table_is_a_setup_error_with_nothing_locked(
    empty_mariadb_url: str, mariadb_server: MariaDBServer
) -> None:
    name = unique("setup")
    issuer = AdvisoryIssuer(empty_mariadb_url)
    try:
        with pytest.raises(fencing.FenceSetupError, match="fencing migrate"):
            AdvisoryFence(empty_mariadb_url, name, issuer=issuer).acquire(timeout=0)
        with raw(mariadb_server) as admin:
            wait_until(lambda: one(admin, "SELECT IS_USED_LOCK(%s)", name) is None, "no lock left")
    finally:
        issuer.close()


def test_a_killed_holder_loses_its_lease_and_the_next_token_is_higher(
    backend: SqlBackend, mariadb_server: MariaDBServer
) -> None:
    """Losing the lease's connection loses the lease: its check fails (``LeaseLost``
    through ``renew``), and the next holder's token is higher."""
    name = unique("killed")
    fence = backend.fence(name, ttl=30)
    token = fence.acquire(timeout=0)
    with raw(mariadb_server) as admin:
        holder = one(admin, "SELECT IS_USED_LOCK(%s)", name)
        assert holder is not None
        with admin.cursor() as cursor:
            cursor.execute("KILL %s", (holder,))
        wait_until(lambda: one(admin, "SELECT IS_USED_LOCK(%s)", name) != holder, "kill")
    with pytest.raises(fencing.LeaseLost):
        fence.renew(token)
    successor = backend.fence(name, ttl=30)
    newer = successor.acquire(timeout=PATIENCE)
    assert newer > token
    successor.release(newer)


@pytest.mark.parametrize("driver", ["pymysql", "aiomysql"])
async def test_a_direct_connection_is_recognised(
    mariadb_server: MariaDBServer, driver: str
) -> None:
    """The server's view of its peer (``PROCESSLIST.HOST``) is this very socket on a
    direct connection: the session is proven without a probe."""
    url = mariadb_server.url_for(driver)
    if driver == "pymysql":
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                _, *peer = conn.execute(text(MYSQL_STATEMENTS.peer.text)).one()
                local = socket_address(conn.connection.driver_connection)
        finally:
            engine.dispose()
    else:
        async_engine = create_async_engine(url)
        try:
            async with async_engine.connect() as aconn:
                _, *peer = (await aconn.execute(MYSQL_STATEMENTS.peer)).one()
                raw_conn = await aconn.get_raw_connection()
                local = socket_address(raw_conn.driver_connection)
        finally:
            await async_engine.dispose()
    assert local is not None
    assert is_direct((peer[0], peer[1]), local), (peer, local)
    assert not is_direct((peer[0], int(peer[1]) + 1), local)  # another socket: not direct
