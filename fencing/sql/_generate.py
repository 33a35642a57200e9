"""``python -m fencing.sql._generate``: write ``fencing/django/_sql.py``, the SQL text of
the SQL issuers' statements for Django's cursors, compiled from this package's
SQLAlchemy constructs (``_issuer_statements``).

Why generated and committed: ``fencing.django``'s issuer runs the very statements of
``fencing.sql``'s, but a Django project need not install SQLAlchemy. The constructs stay
the one source of the SQL; their text, compiled for SQLite, PostgreSQL and MySQL (whose
text MariaDB runs too: Django's vendor ``mysql`` is both) with Django's ``%s``
placeholders, ships as a plain module, and tests/test_django_sql.py renders it
again and fails when the committed file differs (run this module after changing a
statement). The file is written by path: ``fencing.sql`` does not import
``fencing.django``.

Imports the statements, the schema's clock and SQLAlchemy's three dialects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from sqlalchemy import ClauseElement
from sqlalchemy.dialects.mysql.base import MySQLDialect
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

from ._issuer_statements import statements
from ._schema import db_now

#: Where the text goes, next to its one reader, fencing.django's issuer.
TARGET = Path(__file__).resolve().parents[1] / "django" / "_sql.py"

#: The dialect that writes each Django vendor's SQL, with Django's ``%s`` placeholders
#: (Django turns them into SQLite's ``?``). MySQL's, not MariaDB's: Django's vendor
#: ``mysql`` is both servers, and SQLAlchemy's MariaDB dialect adds a ``RETURNING`` that
#: MySQL lacks to an upsert. (PGDialect's constructor is untyped.)
DIALECTS: dict[str, Dialect] = {
    "sqlite": SQLiteDialect(paramstyle="format"),
    "postgresql": PGDialect(paramstyle="format"),  # type: ignore[no-untyped-call]
    "mysql": MySQLDialect(paramstyle="format"),
}

_HEADER = '''"""The SQL issuers' statements as text for Django's cursors. GENERATED: do not edit.

Written by ``python -m fencing.sql._generate`` from ``fencing.sql``'s SQLAlchemy
constructs (``fencing/sql/_issuer_statements.py``), the one source of this SQL;
tests/test_django_sql.py fails when this file is not what they compile to now.

``STATEMENTS[vendor][name]`` (names: ``fencing._sql.flows.STATEMENTS``) is the statement's
steps, run in order in the flow's transaction, its reply the last one's (one step, but
on MySQL, which has no ``RETURNING``, an upsert and the read of what it wrote). A step
is the SQL with ``%s`` placeholders, the name of the value of each placeholder in
order, and the constants among them (values written in the construct, such as the
``1`` of ``token + 1``); the flow gives the others. ``CLOCK[vendor]`` is the database's
clock in seconds since the epoch, the one the leases' expiries are on.

Imports nothing.
"""

from __future__ import annotations

'''


def _literal(value: Any) -> str:
    """``value`` as Python source in double quotes (JSON's string syntax is Python's)."""
    return "None" if value is None else json.dumps(value)


def _compile(vendor: str, element: ClauseElement) -> SQLCompiler:
    dialect = DIALECTS[vendor]
    return dialect.statement_compiler(dialect, element)


def _step(vendor: str, element: ClauseElement) -> list[str]:
    compiled = _compile(vendor, element)
    keys = tuple(compiled.positiontup or ())
    constants = {key: compiled.binds[key].value for key in keys if not compiled.binds[key].required}
    return [
        "            (",
        f"                {_literal(compiled.string)},",
        f"                ({''.join(f'{_literal(key)}, ' for key in keys).rstrip()}),",
        "                {"
        + ", ".join(f"{_literal(key)}: {_literal(value)}" for key, value in constants.items())
        + "},",
        "            ),",
    ]


def _statement(vendor: str, name: str) -> list[str]:
    statement = statements(vendor)[name]
    # every step is an insert, update, delete or select: a ClauseElement
    steps = statement if isinstance(statement, tuple) else (statement,)
    lines = [f"        {_literal(name)}: ("]
    for step in steps:
        lines += _step(vendor, cast(ClauseElement, step))
    return [*lines, "        ),"]


def render() -> str:
    """The text of ``fencing/django/_sql.py`` for the constructs of this checkout."""
    lines = [
        _HEADER.rstrip("\n"),
        "",
        "Step = tuple[str, tuple[str, ...], dict[str, object]]",
        "",
        "STATEMENTS: dict[str, dict[str, tuple[Step, ...]]] = {",
    ]
    for vendor in DIALECTS:
        lines.append(f"    {_literal(vendor)}: {{")
        for name in statements(vendor):
            lines.extend(_statement(vendor, name))
        lines.append("    },")
    lines += ["}", "", "CLOCK: dict[str, str] = {"]
    for vendor in DIALECTS:
        clock = _compile(vendor, db_now(vendor))
        if clock.positiontup:  # RawSQL in the admin binds nothing
            raise ValueError(f"the clock of {vendor} has parameters: {clock.positiontup}")
        lines.append(f"    {_literal(vendor)}: {_literal(clock.string)},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    TARGET.write_text(render())
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
