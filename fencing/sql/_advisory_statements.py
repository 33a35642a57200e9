"""The statements of advisory leases (``lease=advisory``), one set per database: what
differs between PostgreSQL's advisory locks and MySQL's/MariaDB's ``GET_LOCK``. The logic
that runs them is written once, in ``_advisory_flows``.

Every statement is one round trip on a connection in autocommit (one transaction each)
and replies with one row (or none); the rows mean the same on both databases:

- ``acquire``: lock and count in one statement, so a lock is never taken without its
  token, nor a token bumped without the lock: ``(token, session id)``, or ``(token,)``
  where the statement returns no row (MySQL's upsert, whose token is
  ``LAST_INSERT_ID(...)``, read from the driver's reply), or no row when the lock is
  held by someone else. The token is clock-floored as the ``row`` leases', on the same
  counter in ``fencing_leases``.
- ``check``: ``(held by this session?, this session's id)``. ``release``:
  ``(let go?,)``. ``wait``: blocks until the lock is free (``:ms``/``:seconds`` at
  most), and lets it go in the same statement. ``peer``: ``(session id, the peer's
  host, port as the server sees it)``. ``probe``: ``(session id, let go?)``, letting
  the lock go only on the session ``:pid``. ``end_holder``: ends the session ``:pid``
  (it holds the lock). ``status``: ``(last token, holder's session id or NULL,
  application, client)``. ``names``: the fence names starting with ``:prefix``.

A *session id* is PostgreSQL's ``pg_backend_pid()`` and MySQL's ``CONNECTION_ID()``.

Imports the core's SQL-flows helper (``like_prefix``), the keys, the schema's clock and
SQLAlchemy.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.dialects import mysql
from sqlalchemy.exc import DBAPIError

from .._sql.flows import like_prefix
from ._keys import advisory_keys, lock_name
from ._schema import MYSQL, db_micros


@dataclass(frozen=True)
class AdvisoryStatements:
    """One database's advisory-lease statements (see the module docstring)."""

    acquire: TextClause
    check: TextClause
    release: TextClause
    wait: TextClause
    peer: TextClause
    probe: TextClause
    end_holder: TextClause
    status: TextClause
    names: TextClause
    #: What the database calls a session in ``FenceStatus.holder``.
    session: str
    #: SQLSTATE of ``wait`` running out of time (none: ``wait`` returns then).
    lock_timeout: str | None = None

    def is_lock_timeout(self, exc: BaseException) -> bool:
        return (
            self.lock_timeout is not None
            and isinstance(exc, DBAPIError)
            and getattr(exc.orig, "sqlstate", None) == self.lock_timeout
        )


# -- PostgreSQL ------------------------------------------------------------------------

#: The database clock in whole microseconds: the token floor (as ``_schema.db_micros``).
CLOCK = "floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"

#: ``pg_locks`` rows of the advisory lock of (k1, k2) in this database: the two-int4 form
#: shows k1 and k2 as ``classid``/``objid`` (oids, so unsigned) with ``objsubid`` 2.
LOCK_ROWS = (
    "p.locktype = 'advisory' AND p.objsubid = 2 AND p.granted "
    "AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND p.classid::int8 = :c1 AND p.objid::int8 = :c2"
)
_KEYS = "CAST(:k1 AS int4), CAST(:k2 AS int4)"

POSTGRESQL = AdvisoryStatements(
    acquire=text(
        "WITH lock AS MATERIALIZED "
        f"(SELECT pg_try_advisory_lock({_KEYS}) AS got) "
        "INSERT INTO fencing_leases AS l (name, token) "
        f"SELECT :name, {CLOCK} FROM lock WHERE got "
        "ON CONFLICT (name) DO UPDATE "
        f"SET token = greatest(l.token + 1, {CLOCK}) "
        "RETURNING l.token, pg_backend_pid()"
    ),
    check=text(
        f"SELECT EXISTS (SELECT 1 FROM pg_locks p WHERE {LOCK_ROWS} "
        "AND p.pid = pg_backend_pid()), pg_backend_pid()"
    ),
    release=text(f"SELECT pg_advisory_unlock({_KEYS})"),
    # lock_timeout set for this statement's own transaction (autocommit): it applies to
    # the lock taken after it in the same statement
    wait=text(
        "SELECT set_config('lock_timeout', :ms, true), "
        f"pg_advisory_lock({_KEYS}), pg_advisory_unlock({_KEYS})"
    ),
    peer=text("SELECT pg_backend_pid(), host(inet_client_addr()), inet_client_port()"),
    probe=text(
        "SELECT pg_backend_pid(), CASE WHEN pg_backend_pid() = :pid "
        f"THEN pg_advisory_unlock({_KEYS}) ELSE false END"
    ),
    # only if it still holds the lock; waits up to 5 s for the backend to end
    end_holder=text(
        "SELECT pg_terminate_backend(p.pid, 5000) FROM pg_locks p "
        f"WHERE {LOCK_ROWS} AND p.pid = :pid"
    ),
    status=text(
        "SELECT (SELECT token FROM fencing_leases WHERE name = :name), p.pid, "
        "s.application_name, host(s.client_addr) "
        f"FROM (SELECT 1) AS one LEFT JOIN pg_locks p ON {LOCK_ROWS} "
        "LEFT JOIN pg_stat_activity s ON s.pid = p.pid"
    ),
    names=text("SELECT name FROM fencing_leases WHERE starts_with(name, :prefix) ORDER BY name"),
    session="pid",
    lock_timeout="55P03",  # lock_not_available
)


# -- MySQL and MariaDB -----------------------------------------------------------------

_MYSQL_CLOCK = str(db_micros("mysql").compile(dialect=mysql.dialect()))
#: The server's view of this connection's peer, ``host:port`` (``localhost`` on a socket).
_HOST = "(SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID())"

MYSQL_STATEMENTS = AdvisoryStatements(
    # GET_LOCK in the WHERE of the upsert's one-row SELECT: no row, no bump, when held
    # elsewhere; the token the driver reports as the statement's last insert id
    acquire=text(
        "INSERT INTO fencing_leases (name, token) "
        f"SELECT :name, LAST_INSERT_ID({_MYSQL_CLOCK}) FROM DUAL WHERE GET_LOCK(:lock, 0) = 1 "
        f"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, {_MYSQL_CLOCK}))"
    ),
    check=text("SELECT IS_USED_LOCK(:lock) = CONNECTION_ID(), CONNECTION_ID()"),
    release=text("SELECT RELEASE_LOCK(:lock)"),
    wait=text("SELECT GET_LOCK(:lock, :seconds), RELEASE_LOCK(:lock)"),
    peer=text(
        f"SELECT CONNECTION_ID(), "
        f"IF(LOCATE(':', h.HOST) > 0, SUBSTRING(h.HOST, 1, CHAR_LENGTH(h.HOST) "
        f"- CHAR_LENGTH(SUBSTRING_INDEX(h.HOST, ':', -1)) - 1), NULL), "
        f"IF(LOCATE(':', h.HOST) > 0, SUBSTRING_INDEX(h.HOST, ':', -1), NULL) "
        f"FROM (SELECT {_HOST} AS HOST) AS h"
    ),
    probe=text("SELECT CONNECTION_ID(), IF(CONNECTION_ID() = :pid, RELEASE_LOCK(:lock), 0)"),
    # KILL cannot be conditional: the caller saw :pid hold the lock
    end_holder=text("KILL :pid"),
    status=text(
        "SELECT (SELECT token FROM fencing_leases WHERE name = :name), l.pid, NULL, p.HOST "
        "FROM (SELECT IS_USED_LOCK(:lock) AS pid) AS l "
        "LEFT JOIN information_schema.PROCESSLIST p ON p.ID = l.pid"
    ),
    names=text("SELECT name FROM fencing_leases WHERE name LIKE :pattern ESCAPE '/' ORDER BY name"),
    session="connection",
)


def statements_of(dialect: str) -> AdvisoryStatements:
    """The advisory statements of a SQLAlchemy dialect name (PostgreSQL, MySQL, MariaDB)."""
    return MYSQL_STATEMENTS if dialect in MYSQL else POSTGRESQL


@functools.lru_cache(maxsize=1024)
def lock_params(name: str) -> Mapping[str, Any]:
    """The bound parameters of every statement above for fence ``name`` (cached,
    read-only): its name, its PostgreSQL keys (``k1``, ``k2``, and as ``pg_locks`` shows
    them, ``c1``, ``c2``) and its MySQL lock name (``lock``). A driver sends only the
    ones its statement names."""
    k1, k2 = advisory_keys(name)
    return MappingProxyType(
        {
            "name": name,
            "k1": k1,
            "k2": k2,
            "c1": k1 & 0xFFFFFFFF,
            "c2": k2 & 0xFFFFFFFF,
            "lock": lock_name(name),
        }
    )


def names_params(prefix: str) -> dict[str, str]:
    """The parameters of ``names``: the prefix (PostgreSQL), a ``LIKE`` pattern (MySQL)."""
    return {"prefix": prefix, "pattern": like_prefix(prefix) + "%"}


def wait_params(name: str, seconds: float) -> dict[str, Any]:
    """The parameters of ``wait``: at least 1 ms (PostgreSQL's 0 would mean no limit)."""
    ms = max(1, round(seconds * 1000))
    return {**lock_params(name), "ms": str(ms), "seconds": ms / 1000}
