"""``fencing migrate``: create or update the SDK's own tables (``fencing_leases``).

``fencing migrate [--url URL] [--revision REV] [--downgrade] [--sql]``; the URL defaults
to ``$FENCING_URL``, else the embedded SQLite default. Imports argparse and, when run,
``fencing.sql`` (SQLAlchemy and Alembic).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "migrate",
        help="create or update the fencing tables in a SQL database",
        description="Run the fencing SDK's own migrations (version table "
        "fencing_alembic_version; your application's migrations are not touched).",
    )
    parser.add_argument("--url", help="database URL (default: $FENCING_URL, else embedded)")
    parser.add_argument("--revision", default=None, help="target revision (default: head)")
    parser.add_argument(
        "--downgrade", action="store_true", help="downgrade to --revision (e.g. base)"
    )
    parser.add_argument("--sql", action="store_true", help="print the SQL instead of running it")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alembic import command
    from sqlalchemy.engine import make_url

    from .._connect import connect
    from ..sql import _migrate

    try:
        url = connect(args.url).url
    except ValueError as exc:
        print(f"fencing migrate: {exc}", file=sys.stderr)
        return 2
    if not url.startswith(("sqlite", "postgresql", "mysql", "mariadb")):
        print(f"fencing migrate: {url!r} is not a SQL database URL", file=sys.stderr)
        return 2
    if args.downgrade and args.revision is None:
        print("fencing migrate: --downgrade needs --revision (e.g. base)", file=sys.stderr)
        return 2
    revision = args.revision or "head"
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        if args.sql:
            config = _migrate._config(url)
            action = command.downgrade if args.downgrade else command.upgrade
            action(
                config,
                f"{_migrate.head_revision()}:{revision}" if args.downgrade else revision,
                sql=True,
            )
            return 0
        if args.downgrade:
            _migrate.downgrade(url, revision)
        else:
            _migrate.upgrade(url, revision)
    except Exception as exc:  # a CLI reports, it does not dump a traceback
        print(f"fencing migrate: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    verb = "downgraded" if args.downgrade else "upgraded"
    print(f"fencing tables {verb} to {revision} on {shown}")
    return 0
