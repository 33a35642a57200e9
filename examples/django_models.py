"""A Django model whose rows refuse writes with stale fence tokens (fencing.django).

A holder paused past its lease wakes up and saves the row it read: the database refuses
the write, because a newer holder claimed the row (``fenced_get``) and wrote it first.
Plain ``save()`` and ``delete()`` of an existing row are refused too. The leases and
tokens come from Django's own database too (``fencing.django.fence``, its table made by
``migrate``): no Redis, no other server. One file, a SQLite database in a temporary
directory; the read-only admin page of the fences comes with ``django.contrib.admin``.

Run: python examples/django_models.py  (needs ``fencing[django]``)
"""

import tempfile
import time
from pathlib import Path

import django
from django.conf import settings

database = Path(tempfile.mkdtemp()) / "db.sqlite3"
settings.configure(
    INSTALLED_APPS=["fencing.django", "__main__"],  # this file is the app
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(database)}},
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, models  # noqa: E402

import fencing  # noqa: E402
from fencing.django import fence, fenced_delete, fenced_get  # noqa: E402
from fencing.django.models import FencedModel  # noqa: E402


class Account(FencedModel):  # adds fence_token, guards every save of an existing row
    owner = models.CharField(max_length=100)
    balance = models.IntegerField(default=0)

    class Meta:
        app_label = "__main__"


call_command("migrate", verbosity=0)  # `manage.py migrate`: the fences' table
with connection.schema_editor() as editor:  # in a project: makemigrations + migrate
    editor.create_model(Account)

Account(owner="alice", balance=100).save()  # a plain save() of a new row is an INSERT
lease = fence("account:1", ttl=0.2)  # issued by Django's database

# holder 1 takes the lease, claims and reads the row... and is paused past its lease
first = lease.acquire()
mine = fenced_get(Account, first, pk=1)
print(f"holder 1 read balance={mine.balance} with token {first:d}")
time.sleep(0.3)  # holder 1 "pauses" past the TTL: the lease expires behind its back
# (holder 2's acquire below waits for the expiry if this process ran slower than that)

# holder 2 takes the lease with a newer token, claims, reads and writes (a fence of the
# same name: the same lease and tokens; a ttl of its own, with room for its work)
other = fence("account:1", ttl=30)
second = other.acquire()
theirs = fenced_get(Account, second, pk=1)
theirs.balance += 10
theirs.save(fence_token=second)
print(f"holder 2 wrote balance={theirs.balance} with token {second:d}")

# holder 1 wakes up and writes what it computed from its old read
mine.balance += 50
try:
    mine.save(fence_token=first)
except fencing.StaleTokenError as exc:
    print(f"holder 1 refused: {exc}")

try:
    theirs.save()  # no token: refused, never silently unguarded
except fencing.UnfencedWriteError:
    print("a plain save() of an existing row is refused")

print(f"the row: balance={Account.objects.get(pk=1).balance}")
fenced_delete(theirs, second)  # deleted with the current token
print(f"deleted with token {second:d}; rows left: {Account.objects.count()}")
other.release(second)
