"""The SDK's Alembic environment, the app-side op helpers, and `fencing migrate` from a wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import (
    ClauseElement,
    Column,
    Engine,
    Integer,
    MetaData,
    Table,
    create_engine,
    inspect,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import fencing
from fencing import cli
from fencing.alembic import add_fence_column, drop_fence_column
from fencing.sql import FencedMixin, SqlFence, downgrade, upgrade
from fencing.sql._issuer_statements import statements
from fencing.sql._migrate import current_revision, head_revision
from fencing.sql._schema import VERSION_TABLE, include_object, metadata

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: a new SQLite file, or a new database on the session's PostgreSQL
    or MariaDB."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    yield request.getfixturevalue(
        "empty_mariadb_url" if request.param == "mariadb" else "empty_pg_url"
    )


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def _sdk_diff(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "version_table": VERSION_TABLE,
                "include_object": include_object(conn.dialect.name),
                "compare_type": True,
            },
        )
        return list(compare_metadata(context, metadata))


def test_upgrade_downgrade_upgrade_and_no_autogenerate_difference(fresh_url: str) -> None:
    engine = create_engine(fresh_url)
    upgrade(engine)
    assert {"fencing_leases", "fencing_admissions", "fencing_rw_leases", VERSION_TABLE} <= _tables(
        engine
    )
    assert "alembic_version" not in _tables(engine)  # never the application's table
    assert _sdk_diff(engine) == []
    pattern = "fencing_leases_name_pattern"
    indexes = {i["name"] for i in inspect(engine).get_indexes("fencing_leases")}
    assert (pattern in indexes) == (engine.dialect.name == "postgresql")
    downgrade(engine, "0003")
    assert "fencing_rw_leases" not in _tables(engine)
    downgrade(engine, "0002")
    assert pattern not in {i["name"] for i in inspect(engine).get_indexes("fencing_leases")}
    downgrade(engine, "0001")
    assert "fencing_admissions" not in _tables(engine)
    assert "fencing_leases" in _tables(engine)
    downgrade(engine, "base")
    assert "fencing_leases" not in _tables(engine)
    upgrade(fresh_url)
    with engine.connect() as conn:
        assert current_revision(conn) == head_revision() == "0004"
    assert _sdk_diff(engine) == []
    engine.dispose()


def test_postgresql_counts_a_semaphores_slots_on_the_name_pattern_index(
    empty_pg_url: str,
) -> None:
    """The plan of a slot's take, generic as a prepared statement's after five runs: on
    10,000 other fences its count reads the index of migration 0003; without it
    (control: the database at 0002) the statement still plans, as a scan of the table."""
    engine = create_engine(empty_pg_url)
    upgrade(engine)
    take = cast(ClauseElement, statements("postgresql")["slot_acquire"]).compile(engine)
    values = {"fence": "jobs1", "holder_id": "h", "ttl": 30.0, "group": "jobs"}
    params = take.construct_params({**values, "first": "jobs0", "after": "jobs:", "permits": 3})

    def plan() -> str:
        with engine.begin() as conn:
            conn.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
            rows = conn.exec_driver_sql(f"EXPLAIN {take}", params)
            return "\n".join(row[0] for row in rows)

    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO fencing_leases (name, token) "
                "SELECT 'f' || g, 1 FROM generate_series(1, 10000) g"
            )
        )
        conn.execute(text("ANALYZE fencing_leases"))
    assert "fencing_leases_name_pattern" in plan()
    downgrade(engine, "0002")
    unindexed = plan()
    assert "fencing_leases_name_pattern" not in unindexed
    assert "Seq Scan on fencing_leases" in unindexed
    engine.dispose()


def test_cli_migrate_and_downgrade(fresh_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["migrate", "--url", fresh_url]) == 0
    engine = create_engine(fresh_url)
    assert "fencing_leases" in _tables(engine)
    assert cli.main(["migrate", "--url", fresh_url, "--downgrade", "--revision", "base"]) == 0
    assert "fencing_leases" not in _tables(engine)
    engine.dispose()
    assert "upgraded to head" in capsys.readouterr().out
    assert cli.main(["migrate", "--url", fresh_url, "--downgrade"]) == 2
    assert cli.main(["migrate", "--url", "mssql://u@h/db"]) == 2


def test_cli_prints_sql_offline(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["migrate", "--url", "sqlite:///unused.db", "--sql"]) == 0
    assert "CREATE TABLE fencing_leases" in capsys.readouterr().out
    assert not Path("unused.db").exists()


def test_sqlite_fence_migrates_its_file_on_first_use(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'auto.db'}"
    fence = SqlFence(url, "auto")
    assert fence.acquire(timeout=0) >= 1
    engine = create_engine(url)
    with engine.connect() as conn:
        assert current_revision(conn) == head_revision()
    upgrade(engine)  # `fencing migrate` afterwards is a no-op, not a collision
    engine.dispose()


def test_app_op_helpers_match_the_mixin_for_autogenerate(fresh_url: str) -> None:
    class Base(DeclarativeBase):
        pass

    class Invoice(FencedMixin, Base):
        __tablename__ = "app_invoices"
        id: Mapped[int] = mapped_column(primary_key=True)
        total: Mapped[int]

    before = MetaData()  # the app's table as it was before it was fenced
    Table("app_invoices", before, Column("id", Integer, primary_key=True))
    before.tables["app_invoices"].append_column(Column("total", Integer, nullable=False))
    engine = create_engine(fresh_url)
    before.create_all(engine)
    with engine.begin() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        with Operations.context(context):
            add_fence_column("app_invoices")
        assert compare_metadata(context, Base.metadata) == []
        with Operations.context(context):
            drop_fence_column("app_invoices")
        diff = compare_metadata(context, Base.metadata)
        assert [d[0] for d in diff] == ["add_column"] and diff[0][3].name == "fence_token"
    before.drop_all(engine)
    engine.dispose()


def test_packaging_lists_every_package_of_the_tree() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    tree = {
        ".".join(path.parent.relative_to(REPO).parts)
        for path in (REPO / "fencing").rglob("__init__.py")
        if "__pycache__" not in path.parts
    }
    assert tree <= listed
    assert {"fencing.migrations", "fencing.migrations.versions"} <= listed


@pytest.mark.wheel
def test_fencing_migrate_from_an_installed_wheel(tmp_path: Path) -> None:
    """Build the wheel, install it with its sql extra into a clean venv, run `fencing migrate`."""
    source = tmp_path / "src"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "benchmarks"
        ),
    )
    dist = tmp_path / "dist"
    # uv (installed into the venv by the setup) builds in an isolated environment from
    # [build-system] as `python -m build` does, and it and its installer take seconds
    # where build and pip took about 20 s of a CPU-bound suite.
    uv = [sys.executable, "-m", "uv", "-q"]
    run = [*uv, "build", "--wheel", "--out-dir", str(dist), str(source)]
    subprocess.run(run, check=True, capture_output=True, timeout=300)
    wheel = next(dist.glob("fencing-*.whl"))
    assert wheel.name.startswith(f"fencing-{fencing.__version__}-")  # the one version
    venv = tmp_path / "venv"
    subprocess.run([*uv, "venv", str(venv)], check=True, capture_output=True, timeout=120)
    install = [*uv, "pip", "install", "--python", str(venv / "bin" / "python"), f"{wheel}[sql]"]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    database = tmp_path / "from-wheel.db"
    done = subprocess.run(
        [str(venv / "bin" / "fencing"), "migrate", "--url", f"sqlite:///{database}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # not the source tree: the installed package must carry migrations/
    )
    assert done.returncode == 0, done.stderr
    engine = create_engine(f"sqlite:///{database}")
    assert {"fencing_leases", VERSION_TABLE} <= _tables(engine)
    engine.dispose()
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import fencing.sql as s; print(s.migrations_dir())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert str(venv) in where.stdout
