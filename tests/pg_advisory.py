"""Helpers of the advisory-lease tests: the database fixture and ending a holder's backend."""

from __future__ import annotations

import psycopg
import pytest

from fencing.sql._advisory_statements import LOCK_ROWS, lock_params
from fencing.testing.servers import PostgresServer

TERMINATE = f"SELECT pg_terminate_backend(p.pid, 30000) FROM pg_locks p WHERE {LOCK_ROWS}".replace(
    ":c1", "%(c1)s"
).replace(":c2", "%(c2)s")


def terminate_holder(server: PostgresServer, name: str) -> int:
    """End the backend holding the advisory lock of ``name`` (waiting until it is gone),
    as an operator, ``idle_session_timeout`` or a dead client would; how many ended."""
    dsn = f"host=127.0.0.1 port={server.port} user=postgres dbname={server.database}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        return len(conn.execute(TERMINATE, lock_params(name)).fetchall())


@pytest.fixture
def advisory_url(pg_tables: PostgresServer) -> str:
    """The session's PostgreSQL (psycopg), with the SDK's tables (``pg_tables``)."""
    return pg_tables.url
