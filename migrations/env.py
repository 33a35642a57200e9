"""Alembic environment of the fencing SDK's tables; see ``fencing.sql._migrate``.

Online mode reuses the caller's connection (``config.attributes["connection"]``), else
connects to ``sqlalchemy.url``; offline mode prints SQL. Only the SDK's own tables, and
their indexes that the database's dialect has, are considered (``include_object``), and
the version table is ``fencing_alembic_version``, so an application's own migrations and
tables are never touched. On MySQL and MariaDB the SDK's tables must be InnoDB: a run that
leaves one of another engine fails with ``FenceSetupError``.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, create_engine, make_url, pool

from fencing.sql._errors import check_innodb
from fencing.sql._schema import MYSQL, VERSION_TABLE, include_object, metadata

config = context.config


def _configure(dialect_name: str, **kw: Any) -> None:
    context.configure(
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_object=include_object(dialect_name),
        compare_type=True,
        **kw,
    )


def run_offline() -> None:
    url = make_url(config.get_main_option("sqlalchemy.url") or "")
    _configure(url.get_backend_name(), url=url, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    dialect = connection.dialect.name
    _configure(dialect, connection=connection, render_as_batch=dialect == "sqlite")
    with context.begin_transaction():
        context.run_migrations()
    if dialect in MYSQL:
        check_innodb(connection)  # a table made by hand, or by a server without InnoDB


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
        conn.commit()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
