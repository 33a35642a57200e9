"""What is MySQL's and MariaDB's own in the SQL issuer and guards (the contracts run on
MariaDB in tests/test_contract_*.py): the setup errors (a missing table names the
migrate command; a table of another engine than InnoDB is refused), names compared byte
for byte, tokens and leases across a server restart (blocking, and asyncio with its
pool's checkout check), and a guarded write that changes nothing (MySQL counts changed
rows unless the client asks for matched ones).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import aiomysql  # type: ignore[import-untyped]
import pytest
from sqlalchemy import BigInteger, Column, Integer, MetaData, Table, create_engine, select

import fencing
from fencing import FenceSetupError, cli
from fencing.sql import SqlFence, create_tables, guarded_update
from fencing.sql import aio as sql_aio
from fencing.testing.servers import MariaDBServer

#: The command in a missing-table message.
MIGRATE = re.compile(r"`(fencing migrate --url \S+)`")


def unique(prefix: str) -> str:
    return f"{prefix}:{uuid.uuid4().hex}"


def test_a_missing_table_names_the_migrate_command_and_it_makes_innodb_tables(
    empty_mariadb_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fence = SqlFence(empty_mariadb_url, "before-migrate", ttl=5)
    with pytest.raises(FenceSetupError) as info:
        fence.acquire(timeout=0)
    found = MIGRATE.search(str(info.value))
    assert found, str(info.value)
    command = found.group(1).split()
    assert command[3] == empty_mariadb_url
    assert cli.main(command[1:]) == 0
    capsys.readouterr()
    engine = create_engine(empty_mariadb_url)
    with engine.connect() as conn:
        tables = conn.exec_driver_sql(
            "SELECT table_name, engine, table_collation FROM information_schema.tables "
            "WHERE table_schema = DATABASE() "
            "AND table_name IN ('fencing_leases', 'fencing_admissions')"
        ).all()
    engine.dispose()
    assert sorted(tables) == [
        ("fencing_admissions", "InnoDB", "utf8mb4_nopad_bin"),
        ("fencing_leases", "InnoDB", "utf8mb4_nopad_bin"),
    ]
    fence.release(fence.acquire(timeout=0))


def test_tables_of_another_engine_are_refused(empty_mariadb_url: str) -> None:
    """A ``fencing_leases`` of another engine (MEMORY here: no transactions, table locks
    only; MyISAM's keys are too short for the table's) fails the issuer's first call and
    ``fencing migrate``, saying so."""
    engine = create_engine(empty_mariadb_url)
    create_tables(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE fencing_leases ENGINE=MEMORY")
    with pytest.raises(FenceSetupError, match="fencing_leases is MEMORY"):
        SqlFence(empty_mariadb_url, "myisam", ttl=5).acquire(timeout=0)
    with pytest.raises(FenceSetupError, match="InnoDB"):
        create_tables(engine)
    with engine.begin() as conn:  # the control: converted back, the same calls work
        conn.exec_driver_sql("ALTER TABLE fencing_leases ENGINE=InnoDB")
    create_tables(engine)
    fence = SqlFence(empty_mariadb_url, "innodb", ttl=5)
    fence.release(fence.acquire(timeout=0))
    engine.dispose()


def test_names_differing_in_case_or_trailing_spaces_are_different_fences(
    mariadb_url: str,
) -> None:
    """MySQL's default collations would make them one row (case folded, trailing spaces
    ignored); the tables' binary no-pad collation keeps them apart."""
    base = unique("Name")
    fences = [SqlFence(mariadb_url, name, ttl=30) for name in (base, base.lower(), base + " ")]
    tokens = [fence.acquire(timeout=0) for fence in fences]  # none is busy
    backend = fencing.connect(mariadb_url)
    issuer = backend.issuer  # type: ignore[attr-defined]
    assert list(issuer.names(base)) == [base, base + " "]  # a prefix in byte order too
    assert list(issuer.names(base.lower())) == [base.lower()]
    for fence, token in zip(fences, tokens, strict=True):
        fence.release(token)


def test_tokens_and_a_held_lease_survive_a_server_restart(
    mariadb_server: MariaDBServer, mariadb_url: str
) -> None:
    """The row is InnoDB's, committed before the acquire returned: after a restart (and
    after a crash, SIGKILL) the lease is still held and the next token is higher."""
    name = unique("restart")
    holder, other = SqlFence(mariadb_url, name, ttl=60), SqlFence(mariadb_url, name, ttl=60)
    token = holder.acquire()
    try:
        mariadb_server.restart()
        with pytest.raises(fencing.AcquireTimeout):
            other.acquire(timeout=0)  # the pool's dead connections are replaced
        holder.release(token)
        second = other.acquire(timeout=0)
        assert second > token
        mariadb_server.kill()
        mariadb_server.start()
        other.release(second)
        assert holder.acquire(timeout=0) > second
    finally:
        if not mariadb_server.running:
            mariadb_server.start()


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """The pings aiomysql sends (each recorded, then sent as always)."""
    sent: list[object] = []
    ping = aiomysql.Connection.ping

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(self)
        return await ping(self, *args, **kwargs)

    monkeypatch.setattr(aiomysql.Connection, "ping", counted)
    yield sent


async def test_the_asyncio_pool_pings_only_a_connection_the_server_closed(
    mariadb_server: MariaDBServer, pings: list[object]
) -> None:
    """The asyncio issuer's pool checks a connection at checkout without a round trip
    (``fencing.sql._pool``): a live one is used as is, no ping. After a restart the
    pooled connection is dead: it is pinged, replaced, and the lease survives (the
    control: had the check missed it, the acquire would fail on the dead connection)."""
    issuer = sql_aio.SqlIssuer(mariadb_server.url_for("aiomysql"))
    name = unique("aio-restart")
    holder = sql_aio.SqlFence(issuer.engine, name, ttl=60, issuer=issuer)
    other = sql_aio.SqlFence(issuer.engine, name, ttl=60, issuer=issuer)
    try:
        await holder.release(await holder.acquire())
        for _ in range(3):
            await holder.release(await holder.acquire())
        assert pings == []  # checked out four times and more: no ping on a live one
        token = await holder.acquire()
        mariadb_server.restart()
        with pytest.raises(fencing.AcquireTimeout):
            await other.acquire(timeout=0)  # the lease survived; the dead one was replaced
        assert pings  # the dead one was pinged at checkout
        await holder.release(token)
        assert await other.acquire(timeout=0) > token
    finally:
        await issuer.aclose()
        if not mariadb_server.running:
            mariadb_server.start()


def test_a_guarded_write_that_changes_nothing_is_not_stale(mariadb_url: str) -> None:
    """The same values again, with the same token: one row matched, none changed. MySQL
    reports changed rows unless the client sets ``CLIENT.FOUND_ROWS`` (SQLAlchemy's MySQL
    drivers do); the guard must count it as written. The control: a lower token is
    refused."""
    rows = MetaData()
    table = Table(
        f"same_{uuid.uuid4().hex[:10]}",
        rows,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("total", Integer, nullable=False),
        Column("fence_token", BigInteger, nullable=False),
    )
    engine = create_engine(mariadb_url)
    rows.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(table.insert().values(id=1, total=5, fence_token=7))
            same = guarded_update(table, 7, table.c.id == 1, values={"total": 5})
            assert conn.execute(same).rowcount == 1
            with pytest.raises(fencing.StaleTokenError):
                conn.execute(guarded_update(table, 6, table.c.id == 1, values={"total": 5}))
        with engine.connect() as conn:
            assert conn.execute(select(table.c.total, table.c.fence_token)).one() == (5, 7)
    finally:
        rows.drop_all(engine)
        engine.dispose()
