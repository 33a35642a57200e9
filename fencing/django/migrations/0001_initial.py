"""``fencing_leases``, the table of ``fencing.django.fence``'s issuer (``manage.py migrate``).

The same table as ``fencing.sql``'s (``fencing migrate``): a database where that one
made it already takes this migration with ``manage.py migrate fencing --fake-initial``.
"""

from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: ClassVar[list[tuple[str, str]]] = []

    operations: ClassVar[list[migrations.operations.base.Operation]] = [
        migrations.CreateModel(
            name="Lease",
            fields=[
                ("name", models.CharField(max_length=256, primary_key=True, serialize=False)),
                ("token", models.BigIntegerField(default=0)),
                ("holder", models.CharField(max_length=64, null=True)),
                ("expires_at", models.FloatField(null=True)),
            ],
            options={"verbose_name": "fence", "db_table": "fencing_leases", "ordering": ("name",)},
        ),
    ]
