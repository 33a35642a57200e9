"""``fencing.django`` needs no SQLAlchemy, and runs the very SQL of ``fencing.sql``.

- The committed ``fencing/django/_sql.py`` is what ``python -m fencing.sql._generate``
  writes from ``fencing.sql``'s SQLAlchemy constructs now: a statement changed in one
  place and not regenerated fails here, so the two issuers' SQL cannot drift apart.
- In a process where importing ``sqlalchemy`` fails (tests/django_without_sqlalchemy.py),
  Django migrates the app, ``fencing.django.fence`` issues a token, ``manage.py
  fencing status`` reads it, a ``FencedModel`` is saved and updated with it and the
  admin's query runs: ``fencing[django]`` is Django alone. (The import contract
  ``django-without-sqlalchemy`` in pyproject.toml says the same of the imports.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fencing.sql._generate import TARGET, render

TESTS = Path(__file__).parent


def test_the_committed_sql_text_is_generated_from_the_constructs_of_now() -> None:
    assert TARGET.read_text() == render(), (
        "fencing/django/_sql.py is stale: run `python -m fencing.sql._generate`"
    )


def test_fencing_django_runs_where_sqlalchemy_cannot_be_imported(tmp_path: Path) -> None:
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(TESTS / "django_without_sqlalchemy.py"), str(tmp_path / "d.db")],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[-1:] == ["ok"], done.stdout + done.stderr
    assert lines[0] == "sqlalchemy blocked" and "saved" in lines, done.stdout
