"""The SDK's own tables: ``fencing_leases`` (one row per fence name, never deleted),
``fencing_admissions`` (the rate limiters' windows, see ``admissions``) and
``fencing_rw_leases`` (the read-write locks' leases, see ``rw_leases``).

A row holds the fence's token counter (the last token issued) and its current lease
(holder id and expiry). Release clears the lease but keeps the counter, so tokens never
go back, even across releases, expiries and crashed holders. A row deleted by hand
does not restart its tokens either: like Redis, every token is at least the database's
clock in microseconds (``db_micros``). Expiry is stored as seconds
since the Unix epoch *by the database's clock* (a double), the same way on SQLite and
PostgreSQL, so no client clock is ever compared with another.

The table is created by the migrations (``fencing migrate``); the embedded SQLite
default runs those migrations itself on first use. On PostgreSQL only, ``name_pattern``
indexes the names in byte order for the semaphores' counts. Imports SQLAlchemy only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Double,
    Index,
    MetaData,
    String,
    Table,
    func,
    literal_column,
    text,
)

#: The metadata of the SDK's own tables (used by the migrations' autogenerate check).
metadata = MetaData()

#: Name of the Alembic version table of the SDK's migrations (never the app's).
VERSION_TABLE = "fencing_alembic_version"

leases = Table(
    "fencing_leases",
    metadata,
    Column("name", String(256), primary_key=True),
    Column("token", BigInteger, nullable=False, server_default=text("0")),
    Column("holder", String(64), nullable=True),
    Column("expires_at", Double, nullable=True),
)

#: PostgreSQL only (migration ``0003``): the names in byte order (``text_pattern_ops``),
#: for a semaphore's count of its slots, a range ``name ~>=~ :first AND name ~<~ :after``
#: (the primary key's order is the collation's, which serves no such range). SQLite's
#: primary key is in byte order already.
name_pattern = Index(
    "fencing_leases_name_pattern", leases.c.name, postgresql_ops={"name": "text_pattern_ops"}
).ddl_if(dialect="postgresql")

#: The SDK's indexes that exist on PostgreSQL only.
_POSTGRESQL_ONLY = frozenset({name_pattern.name})

#: The rate limiters' windows: per limiter ``name`` and ``kind`` (its window: ``fixed``
#: or ``sliding``), a lock row ``seq = 0`` (``at``: the time of the last request; every
#: request updates it first, which serializes the requests of one limiter) and one row
#: per admission still counted (``seq >= 1``, ``at``: its time in µs by the database's
#: clock). A sliding window keeps at most ``limit`` admissions younger than ``per``; a
#: fixed window keeps the admissions of its current window (``min(at)`` is its start).
admissions = Table(
    "fencing_admissions",
    metadata,
    Column("name", String(256), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("at", BigInteger, nullable=False),
)


#: The read-write locks' leases (docs/rwlock.md): per lock ``name``, one row per lease or
#: marker, keyed by its ``holder`` id: ``mode`` ``read`` (``token``: the read epoch the
#: readers share), ``write`` (the writer's token) or ``wait`` (a waiting writer's marker,
#: which stops new readers; ``token`` 0). ``expires_at`` as in ``fencing_leases``; a row
#: past it counts as absent and the next acquire deletes it. Tokens come from the
#: counter of the name's row in ``fencing_leases`` (the fence's), whose row lock
#: serializes the operations of one lock.
rw_leases = Table(
    "fencing_rw_leases",
    metadata,
    Column("name", String(256), primary_key=True),
    Column("holder", String(64), primary_key=True),
    Column("mode", String(8), nullable=False),
    Column("token", BigInteger, nullable=False),
    Column("expires_at", Double, nullable=False),
)


def table_options(dialect: Any) -> dict[str, Any]:
    """The options of the SDK's tables on MySQL and MariaDB (none elsewhere): InnoDB (row
    locks and transactions: the issuer's statements rely on both), and UTF-8 names compared
    byte for byte, without padding (``utf8mb4_nopad_bin``, MySQL's ``utf8mb4_0900_bin``):
    the default collations fold case and ignore trailing spaces, which would make ``a``,
    ``A`` and ``a `` one fence. ``dialect``: the connection's SQLAlchemy dialect."""
    if dialect.name not in MYSQL:
        return {}
    collation = "utf8mb4_nopad_bin" if dialect.is_mariadb else "utf8mb4_0900_bin"
    return {
        f"{dialect.name}_{option}": value
        for option, value in (
            ("engine", "InnoDB"),
            ("charset", "utf8mb4"),
            ("collate", collation),
        )
    }


#: The statement that lists the SDK's tables that are not InnoDB, on MySQL and MariaDB.
_NOT_INNODB = text(
    "SELECT table_name, engine FROM information_schema.tables "
    "WHERE table_schema = DATABASE() "
    "AND table_name IN ('fencing_leases', 'fencing_admissions', 'fencing_rw_leases') "
    "AND engine <> 'InnoDB'"
)


def not_innodb(conn: Any) -> list[tuple[str, str]]:
    """The SDK's tables in ``conn``'s MySQL or MariaDB database whose storage engine is not
    InnoDB, as (table, engine): a MyISAM table has neither row locks nor transactions, so
    two acquires could both take one lease."""
    return [(str(name), str(engine)) for name, engine in conn.execute(_NOT_INNODB)]


def include_object(dialect_name: str) -> Callable[[Any, str | None, str, bool, Any], bool]:
    """Alembic's ``include_object`` for a database of ``dialect_name``: the SDK's tables
    only (never the application's), without the indexes that dialect does not have."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, other: Any) -> bool:
        if type_ == "table":
            return name in metadata.tables
        if type_ == "index" and name in _POSTGRESQL_ONLY:
            return dialect_name == "postgresql"
        return True

    return include


#: The MySQL family: SQLAlchemy names MariaDB's dialect ``mariadb`` (``mariadb://``) and
#: MySQL's ``mysql`` (also for a MariaDB server reached by ``mysql://``).
MYSQL = frozenset({"mysql", "mariadb"})

#: The databases with session-level advisory locks (SQLAlchemy's backend names).
ADVISORY_BACKENDS = frozenset({"postgresql", *MYSQL})

#: MySQL and MariaDB: the UTC clock in whole µs since the epoch. ``UTC_TIMESTAMP(6)`` and
#: ``TIMESTAMPDIFF`` are calendar arithmetic, free of the session's time zone (where
#: ``UNIX_TIMESTAMP(NOW(6))`` is not, in the hour a daylight-saving change repeats).
_MYSQL_MICROS = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"


def _epoch(dialect_name: str) -> ColumnElement[Any]:
    """The database's clock in seconds since the epoch, as precise as it comes.

    PostgreSQL: ``clock_timestamp()`` (the real time, not the transaction start), as an
    exact numeric. SQLite: ``julianday('now')`` converted to Unix seconds (millisecond
    resolution; ``unixepoch('subsec')`` needs SQLite 3.42). MySQL and MariaDB: the UTC
    clock in µs (``_MYSQL_MICROS``, the statement's start) over 10^6. Any other dialect
    is refused.
    """
    if dialect_name == "postgresql":
        return func.extract("epoch", func.clock_timestamp())
    if dialect_name == "sqlite":
        return literal_column("((julianday('now') - 2440587.5) * 86400.0)", Double)
    if dialect_name in MYSQL:
        return literal_column(f"({_MYSQL_MICROS} / 1000000.0)", Double)
    raise ValueError(
        f"fencing SQL issuer supports SQLite, PostgreSQL, MySQL and MariaDB, not {dialect_name!r}"
    )


def db_now(dialect_name: str) -> ColumnElement[float]:
    """The database's current time in seconds since the epoch (a double), for expiries."""
    epoch = _epoch(dialect_name)
    # MySQL's CAST has no DOUBLE before 8.0.17 (SQLAlchemy skips it with a warning):
    # its exact quotient mixes with the DOUBLE columns as a DOUBLE
    return epoch if dialect_name in MYSQL else epoch.cast(Double)


def db_micros(dialect_name: str) -> ColumnElement[int]:
    """The database's current time in whole microseconds since the epoch: the token floor.

    Tokens are ``max(last + 1, this)``, so they stay unique and increasing even when
    the clock repeats a value (SQLite's has millisecond resolution).
    """
    if dialect_name in MYSQL:
        return literal_column(_MYSQL_MICROS, BigInteger)
    micros = _epoch(dialect_name) * 1000000
    if dialect_name == "postgresql":  # numeric -> bigint rounds: floor first
        micros = func.floor(micros)
    return micros.cast(BigInteger)  # SQLite: CAST(... AS INTEGER) truncates
