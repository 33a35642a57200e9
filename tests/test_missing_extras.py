"""A missing optional dependency names the extra that brings it (``fencing.MissingExtra``).

Each case runs in a fresh interpreter whose first ``sys.meta_path`` finder refuses the
extra's modules, as if they were not installed (the test environment has every extra),
then does what a user would do first: ``fencing.connect(url)``, ``import fencing.django``,
``fencing demo``... and must fail with a message naming the extra, not a bare
``ModuleNotFoundError``. A control case with nothing blocked succeeds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import fencing
from fencing._base.lazy import EXTRAS

#: Installs the blocker for the comma-separated modules of argv[1], then runs argv[2].
_PRELUDE = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(",")) - {""}

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None

sys.meta_path.insert(0, Blocker())
exec(sys.argv[2])
"""

#: (blocked modules, what the user does, the part that names itself, the extra).
CASES = [
    ("sqlalchemy,alembic", "import fencing; fencing.connect()", "fencing.connect()", "sql"),
    ("redis", "import fencing; fencing.connect('redis://localhost')", "fencing.connect()", "redis"),
    (
        "grpc,aetcd",
        "import fencing; fencing.connect('etcd://localhost:2379')",
        "fencing.connect()",
        "etcd",
    ),
    (
        "kazoo",
        "import fencing; fencing.connect('zookeeper://localhost:2181')",
        "fencing.connect()",
        "zookeeper",
    ),
    (
        "psycopg",
        "import fencing; fencing.connect('postgresql://u@localhost/d').fence('f')",
        "the SQL issuer",
        "postgres",
    ),
    (
        "greenlet",
        "import fencing; fencing.connect('sqlite:///{tmp}/a.db').aio_fence('f')",
        "fencing.sql.aio",
        "async",
    ),
    (
        "aiosqlite",
        "import fencing; fencing.connect('sqlite:///{tmp}/a.db').aio_fence('f')",
        "the asyncio SQL issuer",
        "async",
    ),
    ("redis", "import fencing; fencing.RedisFence", "fencing.RedisFence", "redis"),
    ("django,asgiref", "import fencing.django", "fencing.django", "django"),
    ("celery,kombu", "import fencing.celery", "fencing.celery", "celery"),
    ("httpx", "import fencing.http; fencing.http.FenceAuth", "fencing.http.FenceAuth", "http"),
    (
        "requests",
        "import fencing.http; fencing.http.RequestsFenceAuth",
        "fencing.http.RequestsFenceAuth",
        "http",
    ),
    ("sqlalchemy,alembic", "import fencing.alembic", "fencing.alembic", "sql"),
    (
        "sqlalchemy,alembic",
        "import fencing.cli; sys.exit(fencing.cli.main(['demo']))",
        "fencing demo",
        "sql",
    ),
    (
        "matplotlib",
        "import fencing.cli; sys.exit(fencing.cli.main(['demo', '--plot', '{tmp}/p.png']))",
        "fencing demo",
        "plot",
    ),
    (
        "sqlalchemy,alembic",
        "import fencing.cli; sys.exit(fencing.cli.main(['migrate']))",
        "fencing migrate",
        "sql",
    ),
]


def _run(blocked: str, code: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state")}
    env.pop("FENCING_URL", None)
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE, blocked, code.format(tmp=tmp)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(("blocked", "code", "what", "extra"), CASES, ids=[c[1] for c in CASES])
def test_a_missing_driver_names_its_extra(
    blocked: str, code: str, what: str, extra: str, tmp_path: Path
) -> None:
    done = _run(blocked, code, tmp_path)
    expected = (
        f"{what} needs the {extra!r} extra: pip install -e '.[{extra}]' (or 'fencing[{extra}]')"
    )
    assert done.returncode != 0 and expected in done.stderr, done.stderr
    if "fencing.cli" not in code:  # the command prints one line; the rest raise
        assert "fencing._base.errors.MissingExtra" in done.stderr, done.stderr


def test_the_control_with_nothing_blocked_succeeds(tmp_path: Path) -> None:
    done = _run("", "import fencing; fencing.connect().fence('f'); import fencing.django", tmp_path)
    assert done.returncode == 0, done.stderr


def test_missing_extra_is_a_module_not_found_error_and_a_fencing_error() -> None:
    error = fencing.MissingExtra("fencing.sql", "sql", "sqlalchemy")
    assert isinstance(error, ModuleNotFoundError) and isinstance(error, fencing.FencingError)
    assert (error.name, error.extra, error.what) == ("sqlalchemy", "sql", "fencing.sql")


def test_every_driver_maps_to_an_extra_of_the_project() -> None:
    assert set(EXTRAS.values()) <= set(metadata.metadata("fencing").get_all("Provides-Extra") or ())
