"""Session-wide real servers: a ``redis-server``, a Redis Cluster (3 masters, a replica
each), a PostgreSQL cluster, a MariaDB server, a 3-member etcd cluster and ZooKeeper (a
standalone server, and a 3-server ensemble for failover tests) on free ports.

A test that needs a server fails (never skips) when the server cannot be started.

``make test`` runs the suite on pytest-xdist workers: each worker starts the servers its
tests need, on ports of its own (``free_port``), and the tests of the servers that are
costly to start (ZooKeeper's JVMs, the etcd and Redis clusters, MariaDB) are grouped on one
worker each (``--dist loadgroup``), so each starts once.
Tests that stop, restart or freeze a server use their own (``redis_factory``), so the
shared one stays up for everyone else.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest
import redis
import redis.cluster
from hypothesis import register_random
from sqlalchemy import create_engine

from fencing._base.waits import JITTER
from fencing.sql import create_tables
from fencing.testing.servers import (
    EtcdCluster,
    MariaDBServer,
    PostgresServer,
    RedisCluster,
    RedisServer,
    SentinelGroup,
    ServerError,
    ZooKeeperEnsemble,
    ZooKeeperServer,
)

T = TypeVar("T")


def _start(make: Callable[[], T]) -> T:
    """Start a server or fail the test (never skip): a missing server is a broken setup."""
    try:
        return make()
    except ServerError as exc:
        pytest.fail(f"cannot start a test server: {exc}")


# Hypothesis seeds the package's random numbers per example, as it does the random
# module's: a state machine's runs (a semaphore's slot choice) stay reproducible
register_random(JITTER)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = _start(lambda: RedisServer().start())
    yield server
    server.close()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    client.script_flush()
    yield client
    client.close()


@pytest.fixture
def redis_factory() -> Iterator[Callable[..., RedisServer]]:
    """Start private redis-servers (``persistent=True`` for AOF; ``faketime="-1h"`` for a
    wall clock an hour back, see ``RedisServer``) that a test may abuse."""
    servers: list[RedisServer] = []

    def make(persistent: bool = False, faketime: str | None = None) -> RedisServer:
        server = _start(lambda: RedisServer(persistent=persistent, faketime=faketime).start())
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


@pytest.fixture
def sentinel_group() -> Iterator[SentinelGroup]:
    """A fresh primary, replica and three Sentinels (``down-after-milliseconds`` 500) that
    a test may fail over; about 0.2 s to start, a failover about 3 s."""
    group = _start(lambda: SentinelGroup(down_after_ms=500).start())
    yield group
    group.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """One Redis Cluster for the session; a test that kills or freezes nodes heals it
    (``RedisCluster.heal``) before it returns."""
    cluster = _start(lambda: RedisCluster(masters=3, replicas=1).start())
    yield cluster
    cluster.close()


@pytest.fixture
def cluster_client(redis_cluster: RedisCluster) -> Iterator[redis.cluster.RedisCluster]:
    """A blocking client of the session's Redis Cluster."""
    client = redis_cluster.client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = _start(lambda: PostgresServer().start())
    yield server
    server.close()


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    """One MariaDB server for the session, its database with the SDK's tables as ``fencing
    migrate`` makes them (about 3 s to start, on each worker whose tests need it).
    Tests that stop, kill or freeze it bring it back before they end."""
    server = _start(lambda: MariaDBServer().start())
    engine = create_engine(server.url)
    create_tables(engine)
    engine.dispose()
    yield server
    server.close()


@pytest.fixture
def mariadb_url(mariadb_server: MariaDBServer) -> str:
    """URL (PyMySQL) of the session's MariaDB database, with the SDK's tables; tests
    clean up their rows."""
    return mariadb_server.url


@pytest.fixture
def empty_mariadb_url(mariadb_server: MariaDBServer) -> Iterator[str]:
    """A new, empty database on the session's MariaDB (no fencing tables), dropped after."""
    name = f"empty_{uuid.uuid4().hex[:12]}"
    admin = create_engine(mariadb_server.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    yield mariadb_server.url_for(database=name)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE {name}")
    admin.dispose()


@pytest.fixture(scope="session")
def django_dbs(
    postgres_server: PostgresServer,
    mariadb_server: MariaDBServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[object]:
    """Django set up once per process (tests/django_project.py) on SQLite, PostgreSQL and
    MariaDB; the ``Account`` model."""
    import django_project

    folder = tmp_path_factory.mktemp("django")
    yield django_project.configure(postgres_server, mariadb_server, folder)
    django_project.drop(postgres_server)


@pytest.fixture(scope="session")
def etcd_cluster() -> Iterator[EtcdCluster]:
    """One 3-member etcd cluster for the session (about 2 s to start). Tests that kill or
    freeze a member restore it before they end (``restart``/``thaw``)."""
    cluster = _start(lambda: EtcdCluster().start())
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    server = _start(lambda: ZooKeeperServer().start())
    yield server
    server.close()


@pytest.fixture(scope="session")
def zookeeper_ensemble() -> Iterator[ZooKeeperEnsemble]:
    """Three ZooKeeper servers; tests kill and freeze members, so each test that does
    brings the killed ones back (``ZooKeeperEnsemble.heal``) before it ends."""
    ensemble = _start(lambda: ZooKeeperEnsemble().start())
    yield ensemble
    ensemble.close()


@pytest.fixture(scope="session")
def pg_tables(postgres_server: PostgresServer) -> PostgresServer:
    """The session's PostgreSQL with the SDK's tables in its database, made once (as the
    session's MariaDB has them): ``create_tables`` costs a connection and an Alembic run
    (about 10 ms of CPU), which every SQL test on PostgreSQL once paid. No test drops them
    (a test that needs a database without them takes ``empty_pg_url``)."""
    engine = create_engine(postgres_server.url)
    create_tables(engine)
    engine.dispose()
    return postgres_server


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """URL of the session's PostgreSQL database (psycopg driver); tests clean up their tables."""
    return postgres_server.url


@pytest.fixture
def empty_pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A new, empty database on the session's PostgreSQL (no fencing tables), dropped after."""
    name = f"empty_{uuid.uuid4().hex[:12]}"
    admin = f"host=127.0.0.1 port={postgres_server.port} user=postgres dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield f"postgresql+psycopg://postgres@127.0.0.1:{postgres_server.port}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each SQL test runs three times: on a fresh SQLite file, on the session's PostgreSQL
    and on its MariaDB (with the SDK's tables)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fencing.db'}"
    if request.param == "mariadb":
        return str(request.getfixturevalue("mariadb_url"))
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.url


@pytest.fixture
def sql_tables_url(request: pytest.FixtureRequest, sql_url: str) -> str:
    """``sql_url`` with the SDK's tables on PostgreSQL too (``pg_tables``; a SQLite issuer
    makes its own; the session's MariaDB has them)."""
    if sql_url.startswith("postgresql"):
        request.getfixturevalue("pg_tables")
    return sql_url


@pytest.fixture(
    params=["sqlite+aiosqlite", "postgresql+psycopg", "postgresql+asyncpg", "mysql+aiomysql"]
)
def async_sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each asyncio SQL test runs four times: a fresh SQLite file (aiosqlite), the
    session's PostgreSQL with the SDK's tables through psycopg's asyncio side and asyncpg,
    and the session's MariaDB through aiomysql."""
    driver: str = request.param
    if driver.startswith("sqlite"):
        return f"{driver}:///{tmp_path / 'fencing.db'}"
    if driver.startswith("mysql"):
        maria: MariaDBServer = request.getfixturevalue("mariadb_server")
        return maria.url_for(driver.partition("+")[2])
    server: PostgresServer = request.getfixturevalue("pg_tables")
    return server.url_for(driver.partition("+")[2])


@pytest.fixture
def quiet_lost_leases() -> Iterator[None]:
    """Schedules lose leases on purpose; their warnings are noise in the machine tests
    (``pytestmark = pytest.mark.usefixtures("quiet_lost_leases")``)."""
    logger = logging.getLogger("fencing")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@pytest.fixture
def no_local_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis (6.131+) also draws literals it finds in the project's own loaded
    modules; the shrunk schedule would then change with any constant added anywhere in
    the code base. Without them the search depends on the test alone."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    monkeypatch.setattr(providers, "_get_local_constants", Constants)
    providers.CONSTANTS_CACHE.cache.clear()


#: The session fixtures whose tests share one pytest-xdist worker, and their group.
_GROUPS = {
    "zookeeper_server": "zookeeper",
    "zookeeper_ensemble": "zookeeper",
    "etcd_cluster": "etcd",
    "redis_cluster": "redis-cluster",
}
#: Not MariaDB: its server starts in about 2.5 s (1 s of CPU) on each worker that needs
#: it, where its 200-odd tests grouped on one worker made that worker the suite's longest.


def _group(item: pytest.Item) -> str | None:
    fixtures = getattr(item, "fixturenames", ())
    return next((g for name, g in _GROUPS.items() if name in fixtures), None)


#: The modules of long tests that no group keeps together: Hypothesis searches, chaos
#: runs, real programs' start-ups. pytest-xdist hands out the groups first (the largest
#: units), then single tests in collection order; these go first among them, so that the
#: suite ends with short tests spread over every worker rather than with one worker's
#: long search (measured: the statemachine modules, last by name, made a tail of 30 s).
_LONG_FIRST = (
    "test_statemachine_claims",
    "test_statemachine_real",
    "test_statemachine_virtual",
    "test_statemachine_semaphore",
    "test_redlock_model",
    "test_redlock_rw_model",
    "test_rwlock_machine",
    "test_redis_sentinel_chaos",
    "test_redis_cluster_chaos",
    "test_chaos",
    "test_redlock_chaos",
    "test_demo",
    "test_claims_processes",
    "test_examples",
    "test_docs",
    "test_migrations",
    "test_missing_extras",
)


def _long(item: pytest.Item) -> bool:
    return item.path.stem in _LONG_FIRST


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: not _long(item))  # stable: in collection order otherwise


def pytest_collection_finish(session: pytest.Session) -> None:
    """On a pytest-xdist worker under ``--dist loadgroup``, fail at once if xdist did not
    tag the grouped tests (``nodeid@group``): their costly servers would then start on
    every worker, silently (as when the markers came after xdist's hook, or with pytest
    9.2, which ignores the attribute xdist 3.8 sets: hence the pin in pyproject.toml)."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    untagged = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid
    ]
    if untagged:
        raise pytest.UsageError(
            f"pytest-xdist did not put {len(untagged)} grouped tests in their group "
            f"(e.g. {untagged[0]}): this pytest and pytest-xdist do not work together"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "wheel: builds and installs the wheel in a clean venv (slow; part of the suite)"
    )
