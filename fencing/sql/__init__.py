"""``fencing.sql``: fence tokens on SQL databases (SQLite files, PostgreSQL, MySQL and
MariaDB).

- ``SqlFence`` / ``SqlIssuer``: the issuer on a ``fencing_leases`` table.
- ``AdvisoryFence`` / ``AdvisoryIssuer``: leases as session-level advisory locks
  (PostgreSQL's, MySQL's and MariaDB's ``GET_LOCK``), tokens from ``fencing_leases``
  (``fencing.connect("postgresql://...?lease=advisory")``); ``advisory_keys``: the two
  int4 keys of a fence name's PostgreSQL lock (docs/sql.md, docs/mysql.md).
- ``advisory_xact``: a token under ``pg_advisory_xact_lock`` in the caller's own
  transaction; both end with it (a rollback undoes the token's bump).
- ``FencedMixin``: guarded ORM rows (``UPDATE ... WHERE fence_token <= :token``).
- ``guarded_update`` / ``guarded_delete``: the same guard for Core statements.
- ``claim`` / ``claim_rows`` / ``fenced_get``: raise rows' tokens before reading them, so a
  stale holder cannot write between this holder's read and its write.

The asyncio twins live in ``fencing.sql.aio`` (``fencing[async]``, needs greenlet).
Importing this package installs nothing on SQLAlchemy; mapping the first ``FencedMixin``
model installs the guard's cursor check and two ``Session`` listeners (see ``_guard``).
Imports SQLAlchemy (install ``fencing[sql]``) and the core; the core never imports this.
Each name is imported from its module on first use (``lazy_names``): Alembic only for
the migrations, SQLAlchemy's ORM only for the guard and the claims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base.lazy import lazy_names, needs_extra

with needs_extra("fencing.sql"):  # say which extra brings a missing driver, at import
    import sqlalchemy  # noqa: F401

if TYPE_CHECKING:  # the lazily loaded names below, for type checkers
    from ._advisory import AdvisoryFence, AdvisoryIssuer
    from ._claims import claim, claim_rows, fenced_get
    from ._guard import UNFENCED_OPTION
    from ._issuer import SqlFence, SqlIssuer
    from ._keys import advisory_keys
    from ._migrate import create_tables, downgrade, migrations_dir, upgrade
    from ._mixin import FencedMixin, allow_unfenced, fenced_mapper_args
    from ._schema import leases
    from ._stale import RowcountUnavailable, StaleRowError
    from ._statements import guarded_delete, guarded_update
    from ._xact import advisory_xact

#: Each public name -> its module, imported on first use: an issuer alone (``connect``,
#: ``fencing status``) loads neither Alembic (``_migrate``) nor SQLAlchemy's ORM (the
#: guard, the claims), about half of this package's import time.
_LAZY: dict[str, str] = {
    **dict.fromkeys(["AdvisoryFence", "AdvisoryIssuer"], "fencing.sql._advisory"),
    **dict.fromkeys(["claim", "claim_rows", "fenced_get"], "fencing.sql._claims"),
    "UNFENCED_OPTION": "fencing.sql._guard",
    **dict.fromkeys(["SqlFence", "SqlIssuer"], "fencing.sql._issuer"),
    "advisory_keys": "fencing.sql._keys",
    **dict.fromkeys(
        ["create_tables", "downgrade", "migrations_dir", "upgrade"], "fencing.sql._migrate"
    ),
    **dict.fromkeys(["FencedMixin", "allow_unfenced", "fenced_mapper_args"], "fencing.sql._mixin"),
    "leases": "fencing.sql._schema",
    **dict.fromkeys(["RowcountUnavailable", "StaleRowError"], "fencing.sql._stale"),
    **dict.fromkeys(["guarded_delete", "guarded_update"], "fencing.sql._statements"),
    "advisory_xact": "fencing.sql._xact",
}

__getattr__ = lazy_names(__name__, _LAZY)

__all__ = [
    "UNFENCED_OPTION",
    "AdvisoryFence",
    "AdvisoryIssuer",
    "FencedMixin",
    "RowcountUnavailable",
    "SqlFence",
    "SqlIssuer",
    "StaleRowError",
    "advisory_keys",
    "advisory_xact",
    "allow_unfenced",
    "claim",
    "claim_rows",
    "create_tables",
    "downgrade",
    "fenced_get",
    "fenced_mapper_args",
    "guarded_delete",
    "guarded_update",
    "leases",
    "migrations_dir",
    "upgrade",
]
