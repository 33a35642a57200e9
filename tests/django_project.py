"""The Django of the test process, configured once for every test file that needs it
(tests/test_django.py, tests/test_django_fence.py, tests/test_django_admin.py may share
one xdist worker, and Django's settings can be configured only once per process).

``default`` is a SQLite file, ``pg`` a new database on the session's PostgreSQL,
``maria`` one on its MariaDB, through Django's MySQL backend on PyMySQL installed as
``MySQLdb`` (``pymysql.install_as_MySQLdb()``, as a project without mysqlclient's C
build does in its settings). The app's migrations make ``fencing_leases`` on each
(``migrate``, as a project would run it) and the admin's tables on ``default``; the
test app's ``Account`` table is made by the schema editor (the test app has no
migrations). (The Celery workers of
tests/test_celery_workers.py set Django up from tests/django_app/settings.py instead.)
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pymysql
from sqlalchemy.engine import make_url

from fencing.testing.servers import MariaDBServer, PostgresServer

ALIASES = ["default", "pg", "maria"]
#: The test ids of ``ALIASES``: the database each one is.
VENDORS = ["sqlite", "postgresql", "mariadb"]

_configured: dict[str, Any] = {}


def configure(postgres: PostgresServer, maria: MariaDBServer, folder: Path) -> Any:
    """Set Django up (the first call in this process only); the ``Account`` model."""
    if "Account" in _configured:
        return _configured["Account"]
    import django
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    pymysql.install_as_MySQLdb()  # Django's MySQL backend on PyMySQL
    name = f"django_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn(postgres), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    with _maria_admin(maria) as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    _configured["pg_name"] = name
    _configured["maria"] = maria
    settings.configure(
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.admin",
            "django.contrib.messages",
            "fencing.django",
            "django_app",
        ],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(folder / "django.db"),
                "OPTIONS": {"timeout": 60},
            },
            "pg": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": name,
                "USER": "postgres",
                "HOST": "127.0.0.1",
                "PORT": str(postgres.port),
            },
            "maria": {
                "ENGINE": "django.db.backends.mysql",
                "NAME": name,
                "USER": make_url(maria.url).username,
                "HOST": "127.0.0.1",
                "PORT": str(maria.port),
            },
        },
        ROOT_URLCONF="django_app.urls",
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        SESSION_ENGINE="django.contrib.sessions.backends.signed_cookies",
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        SECRET_KEY="tests-only",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
    )
    django.setup()
    from django_app.models import Account

    call_command("migrate", database="default", verbosity=0)
    for alias in ALIASES[1:]:
        call_command("migrate", "fencing", database=alias, verbosity=0)
    for alias in ALIASES:
        with connections[alias].schema_editor() as editor:
            editor.create_model(Account)
    _configured["Account"] = Account
    return Account


def admin_dsn(postgres: PostgresServer) -> str:
    return f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres"


def _maria_admin(maria: MariaDBServer) -> Any:
    return pymysql.connect(host="127.0.0.1", port=maria.port, user=make_url(maria.url).username)


def drop(postgres: PostgresServer) -> None:
    """Close Django's connections and the issuers' and drop the ``pg`` and ``maria``
    databases (once, at the session's end)."""
    name = _configured.pop("pg_name", None)
    if name is None:
        return
    from asgiref.sync import sync_to_async
    from django.db import connections

    import fencing.django as fd

    for alias in ALIASES:  # the pools of fencing.django.fence's issuers
        issuer = fd.fence("closing", using=alias).issuer
        assert isinstance(issuer, fd.DjangoIssuer)
        issuer.close()
    connections.close_all()
    # and those of the thread the async ORM ran its queries in (asgiref's one thread for
    # sync_to_async): each thread has its own, dropped open when that thread ends at exit
    asyncio.run(sync_to_async(connections.close_all)())
    with psycopg.connect(admin_dsn(postgres), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
    with _maria_admin(_configured.pop("maria")) as conn, conn.cursor() as cursor:
        cursor.execute(f"DROP DATABASE {name}")
