"""Running the SDK's Alembic environment (``migrations/``) from Python and the CLI.

The environment lives in the repository's top-level ``migrations/`` folder and is
installed in the wheel as the package ``fencing.migrations``; ``migrations_dir`` finds
either. Its version table is ``fencing_alembic_version``, apart from the application's.
Imports the schema and Alembic.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine

from ._engines import sync_url
from ._schema import VERSION_TABLE


def migrations_dir() -> Path:
    """The Alembic environment: ``fencing/migrations`` (wheel) or ``<repo>/migrations``."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("the fencing migrations are missing from this installation")


def _config(url: str = "") -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _on(target: Engine | Connection | str, action: str, revision: str) -> None:
    if isinstance(target, str):
        engine = create_engine(sync_url(target))
        try:
            _on(engine, action, revision)
        finally:
            engine.dispose()
        return
    if isinstance(target, Engine):
        with target.begin() as conn:
            _on(conn, action, revision)
        return
    config = _config()
    config.attributes["connection"] = target
    getattr(command, action)(config, revision)


def upgrade(target: Engine | Connection | str, revision: str = "head") -> None:
    """Upgrade the SDK's tables in the database of ``target`` (URL, engine or connection)."""
    _on(target, "upgrade", revision)


def downgrade(target: Engine | Connection | str, revision: str) -> None:
    """Downgrade the SDK's tables to ``revision`` (``"base"`` drops them)."""
    _on(target, "downgrade", revision)


def current_revision(target: Connection) -> str | None:
    """The SDK revision applied in ``target``'s database, or None."""
    context = MigrationContext.configure(target, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def create_tables(bind: Engine | Connection) -> None:
    """Create (or bring up to date) the SDK's tables: the migrations, up to head."""
    upgrade(bind)
