"""PostgreSQL advisory locks as leases (``lease=advisory``): the key derivation.

``advisory_keys`` is public and must never change: the pinned values below are what
psql users reproduce with the SQL in docs/sql.md, and the test runs that SQL on the
session's PostgreSQL to show it gives the same keys.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from fencing.sql import advisory_keys
from fencing.sql._keys import KEYS_SQL
from fencing.testing.servers import PostgresServer

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
