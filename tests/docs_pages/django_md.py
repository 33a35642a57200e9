# Generated from docs/django.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/django.md:17

import tempfile
from pathlib import Path

import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=["fencing.django"],  # and your apps
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(tempfile.mkdtemp()) / "db.sqlite3"),
        }
    },
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()

from django.core.management import call_command
from django.db import connection, models

import fencing
from fencing.django import fence, fenced_get
from fencing.django.models import FencedModel


class Account(FencedModel):  # adds fence_token = BigIntegerField(default=0)
    owner = models.CharField(max_length=100)
    balance = models.IntegerField(default=0)

    class Meta:
        app_label = "billing"  # in a project, the app of models.py


call_command("migrate", verbosity=0)  # manage.py migrate: the fences' table
with connection.schema_editor() as editor:  # in a project: makemigrations + migrate
    editor.create_model(Account)
Account(owner="alice", balance=100).save()  # a plain save() of a new row: an INSERT

lease = fence("account:1", ttl=30)  # issued by Django's own database: no Redis needed
old = lease.acquire()  # holder 1 takes the lease...
lease.release(old)  # ...and loses it (say it was paused past its ttl)

with lease.hold() as token:  # holder 2: a newer token, renewed while the block runs
    account = fenced_get(Account, token, pk=1)  # claim, then load: one transaction
    account.balance += 10  # computed from what was claimed
    account.fence_token = token  # stamp the token...
    account.save()  # ...and save: UPDATE ... WHERE fence_token <= token

late = Account.objects.get(pk=1)  # holder 1 wakes up and writes with its old token
late.balance = 0
late.fence_token = old
try:
    late.save()
except fencing.StaleTokenError as exc:  # fencing.django.StaleRowError
    print(f"refused: {exc}")  # nothing written
print(Account.objects.get(pk=1).balance)  # 110

# docs/django.md:85

# settings.py
INSTALLED_APPS = [
    # ...
    "fencing.django",
    "billing",
]
