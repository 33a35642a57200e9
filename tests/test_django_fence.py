"""``fencing.django.fence``: the issuer on Django's own database (the ``fencing_leases``
table of the app's migration), on a SQLite file and on PostgreSQL. The public contract
(``fencing.testing.contract``) against it, then what is Django's own: a lease taken
inside the caller's ``atomic()`` is committed at once and outlives that transaction's
rollback, the tokens are clock-floored, a missing table is a setup error, bad input is
refused."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import django_project
import pytest

import fencing
from fencing.testing.contract import FenceContract, MakeFence, OperationsContract


@pytest.fixture(params=django_project.ALIASES, ids=django_project.VENDORS)
def db(request: pytest.FixtureRequest, django_dbs: Any) -> str:
    return str(request.param)


def fences_on(using: str) -> MakeFence:
    import fencing.django as fd

    def make(name: str, ttl: float) -> fencing.Fence:
        return fd.fence(name, ttl, using=using)

    return make


class TestDjangoFence(FenceContract):
    """The contract on the SQLite database and on MariaDB, whose statements are of
    several steps (an upsert, then the read of its token) run one by one on Django's
    cursor. (The statements are fencing.sql's, whose contract runs on PostgreSQL too,
    tests/test_contract_issuers.py; here PostgreSQL runs the operations' contract and
    the tests below, which take every statement through Django's PostgreSQL cursor, at
    a fraction of the full contract's time.)"""

    @pytest.fixture(params=["default", "maria"], ids=["sqlite", "mariadb"])
    def make_fence(self, request: pytest.FixtureRequest, django_dbs: Any) -> MakeFence:
        return fences_on(str(request.param))


class TestDjangoOperations(OperationsContract):
    """``status``, ``names``, ``force_release`` (what the admin page and ``manage.py
    fencing`` show and do), on SQLite and PostgreSQL."""

    @pytest.fixture
    def make_fence(self, db: str) -> MakeFence:
        return fences_on(db)


def name() -> str:
    return f"dj:{uuid.uuid4().hex[:10]}"


def test_a_lease_taken_in_the_callers_transaction_is_committed_at_once(db: str) -> None:
    """A lease taken inside ``atomic()`` is visible to another holder before that
    transaction ends, and its rollback neither frees it nor lowers the next token."""
    from django.db import connections, transaction

    import fencing.django as fd

    fence_name = name()
    fence = fd.fence(fence_name, 30, using=db)
    seen: list[Any] = []

    def read_elsewhere() -> None:  # Django's connection of another thread
        seen.append(fd.Lease.objects.using(db).filter(name=fence_name).first())
        connections[db].close()

    with pytest.raises(RuntimeError, match="rolled back"), transaction.atomic(using=db):
        token = fence.acquire(timeout=0)
        other = threading.Thread(target=read_elsewhere)
        other.start()
        other.join(60)
        raise RuntimeError("rolled back")
    (lease,) = seen
    assert lease is not None and lease.token == token and lease.holder is not None
    assert isinstance(fence.issuer, fd.DjangoIssuer)
    assert fence.issuer.status(fence_name).token == token  # still held
    fence.release(token)
    assert fence.acquire(timeout=0) > token


def test_tokens_are_floored_by_the_databases_clock(db: str) -> None:
    """A fence row deleted by hand does not restart its tokens: every token is at least
    the database's clock in microseconds, as with fencing.sql."""
    import fencing.django as fd

    fence_name = name()
    before = int(time.time() * 1e6) - 60_000_000  # a minute of leeway for clock skew
    first = fd.fence(fence_name, 30, using=db).acquire(timeout=0)
    assert first >= before
    with fd.unfenced():
        fd.Lease.objects.using(db).filter(name=fence_name).delete()
    assert fd.fence(fence_name, 30, using=db).acquire(timeout=0) > first


def test_the_leases_are_rows_of_the_migrated_table(db: str) -> None:
    import fencing.django as fd

    fence_name = name()
    token = fd.fence(fence_name, 30, using=db).acquire(timeout=0)
    lease = fd.Lease.objects.using(db).get(name=fence_name)
    assert (lease.token, lease.holder is not None) == (token, True)


def test_a_missing_table_is_a_setup_error_naming_the_command(db: str) -> None:
    from django.db import connections

    import fencing.django as fd

    issuer = fd.DjangoIssuer(db)
    with connections[db].cursor() as cursor:
        cursor.execute("ALTER TABLE fencing_leases RENAME TO fencing_leases_away")
    try:
        with pytest.raises(fencing.FenceSetupError, match=r"manage\.py migrate fencing"):
            fencing.Fence(issuer, name(), 1).acquire(timeout=0)
    finally:
        with connections[db].cursor() as cursor:
            cursor.execute("ALTER TABLE fencing_leases_away RENAME TO fencing_leases")
        issuer.close()
    assert fencing.Fence(issuer, name(), 1).acquire(timeout=0) > 0  # reconnects
    issuer.close()


def test_bad_input_is_refused(django_dbs: Any) -> None:
    from django.db.utils import ConnectionDoesNotExist

    import fencing.django as fd

    with pytest.raises(TypeError, match="using"):
        fd.DjangoIssuer(3)  # type: ignore[arg-type]
    with pytest.raises(ConnectionDoesNotExist):
        fd.DjangoIssuer("nope")
    with pytest.raises(ValueError):
        fd.fence("", 1)
    with pytest.raises(ValueError):
        fd.fence(name(), -1)


#: Run in a fresh interpreter (a fork of the test process, which has threads of its
#: own, could deadlock in the child): Django on the database of ``FENCING_TEST_DB``, a
#: lease taken in the parent (a pooled connection), then a forked child that takes a
#: lease and closes its pool; the parent's pooled connection must still work.
FORK_SCRIPT = """
import json, os, sys
import django
from django.conf import settings
settings.configure(INSTALLED_APPS=["fencing.django"],
                   DATABASES={"default": json.loads(os.environ["FENCING_TEST_DB"])})
django.setup()
import fencing.django as fd
fence = fd.fence("fork:parent", 30)
fence.release(fence.acquire(timeout=0))
pid = os.fork()
if pid == 0:
    child = fd.fence("fork:child", 30)
    child.acquire(timeout=0)
    child.issuer.close()  # on the parent's connection, this would end the parent's session
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert fence.issuer.status("fork:child").held
fence.release(fence.acquire(timeout=0))
print("ok")
"""


def test_a_forked_child_uses_connections_of_its_own(django_dbs: Any) -> None:
    """A prefork worker's case, on PostgreSQL (a forked SQLite connection shares no
    session with its parent): the child's pool never holds the parent's connections."""
    import json
    import os
    import subprocess
    import sys

    from django.db import connections

    database = dict(connections["pg"].settings_dict)
    database = {key: database[key] for key in ("ENGINE", "NAME", "USER", "HOST", "PORT")}
    done = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT],
        env={**os.environ, "FENCING_TEST_DB": json.dumps(database)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stdout + done.stderr


def test_a_fenced_task_takes_its_leases_on_djangos_database(django_dbs: Any) -> None:
    """``FencedTask(fence_issuer=fencing.django.issuer)``: the run's token comes from the
    project's database (the fence's row shows it) and guards the row the task saves."""
    from celery import Celery

    import fencing.django as fd
    from fencing.celery import FencedTask

    Account = django_dbs
    app = Celery("django-fenced", set_as_current=False, broker="memory://")
    row = Account(name="task", balance=0)
    row.save()

    @app.task(
        shared=False, bind=True, base=FencedTask, fence_key="acct:{pk}", fence_issuer=fd.issuer
    )
    def deposit(self: FencedTask, pk: int) -> int:
        assert self.fence_token is not None
        account = fd.fenced_get(Account, self.fence_token, pk=pk)
        account.balance += 10
        account.save(fence_token=self.fence_token)
        return int(self.fence_token)

    token = deposit(row.pk)
    assert fd.Lease.objects.get(name=f"acct:{row.pk}").token == token
    stored = Account.objects.get(pk=row.pk)
    assert (stored.balance, stored.fence_token) == (10, token)
    app.close()
