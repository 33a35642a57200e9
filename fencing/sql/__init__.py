"""``fencing.sql``: fence tokens on SQL databases (SQLite files and PostgreSQL).

- ``SqlFence`` / ``AsyncSqlFence``: the issuer on a ``fencing_leases`` table.
- ``FencedMixin``: guarded ORM rows (``UPDATE ... WHERE fence_token <= :token``).
- ``guarded_update`` / ``guarded_delete``: the same guard for Core statements.

The asyncio twins live in ``fencing.sql.aio`` (``fencing[async]``, needs greenlet).
Imports SQLAlchemy (install ``fencing[sql]``) and the core; the core never imports this.
"""

from __future__ import annotations

from ._issuer import SqlFence, SqlIssuer
from ._migrate import create_tables
from ._schema import leases

__all__ = [
    "SqlFence",
    "SqlIssuer",
    "create_tables",
    "leases",
]
