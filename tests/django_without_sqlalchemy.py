"""``fencing.django`` in a process where SQLAlchemy cannot be imported (run by
tests/test_django_sql.py): ``python django_without_sqlalchemy.py DB_FILE``.

A finder first on ``sys.meta_path`` raises ``ImportError`` for ``sqlalchemy`` and
``alembic`` (installed or not), then: Django on the SQLite file ``DB_FILE``
(``django_app.settings``), ``migrate fencing`` (the app's own migration), a token from
``fencing.django.fence``, ``manage.py fencing status`` on it, a ``FencedModel`` saved
with it and a ``fenced_update``, the admin page's query; each prints a line. Exit status
0 and ``ok`` last: all of it ran without SQLAlchemy.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence

BLOCKED = ("sqlalchemy", "alembic")


class Blocker(importlib.abc.MetaPathFinder):
    """Refuses the modules of ``BLOCKED``, as if they were not installed."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] in BLOCKED:
            raise ImportError(f"{fullname} is blocked here", name=fullname)
        return None


def main(db_file: str) -> None:
    sys.meta_path.insert(0, Blocker())
    try:
        import sqlalchemy  # noqa: F401
    except ImportError:
        print("sqlalchemy blocked")
    else:
        raise SystemExit("the blocker let sqlalchemy in")

    os.environ["DJANGO_SETTINGS_MODULE"] = "django_app.settings"
    os.environ["FENCING_TEST_DJANGO_DB"] = db_file
    import django
    from django.conf import settings

    settings.INSTALLED_APPS += ["django.contrib.contenttypes", "django.contrib.auth"]
    settings.INSTALLED_APPS += ["django.contrib.admin"]
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django_app.models import Account

    import fencing.django as fd
    from fencing.django.admin import LeaseAdmin

    call_command("migrate", "fencing", verbosity=0)
    with connection.schema_editor() as editor:
        editor.create_model(Account)
    print("migrated")

    fence = fd.fence("no-sqlalchemy", ttl=30)
    token = fence.acquire(timeout=5)
    print(f"token {token}")
    call_command("fencing", "status", "no-sqlalchemy", "--database", "default")

    account = Account.objects.create(name="a", balance=1)
    account.balance = 2
    account.save(fence_token=token)
    written = fd.fenced_update(Account.objects.filter(pk=account.pk), token, balance=3)
    account.refresh_from_db()
    assert (written, account.balance, account.fence_token) == (1, 3, token), account
    print("saved")

    admin = LeaseAdmin(fd.Lease, None)
    (lease,) = admin.get_queryset(None).filter(name="no-sqlalchemy")
    assert admin.lease_left(lease) != "free", lease
    fence.release(token)
    leaked = sorted(name for name in sys.modules if name.partition(".")[0] in BLOCKED)
    assert not leaked, leaked
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
