"""PostgreSQL only: ``fencing_leases_name_pattern``, the names in byte order, the index of
a semaphore's count of its slots (``fencing.sql``'s migration ``0003``, the same index:
``IF NOT EXISTS`` on a table that both made). Nothing on SQLite, whose primary key is in
byte order already; the model's state does not change.
"""

from typing import Any, ClassVar

from django.db import migrations

_CREATE = (
    "CREATE INDEX IF NOT EXISTS fencing_leases_name_pattern "
    "ON fencing_leases (name text_pattern_ops)"
)
_DROP = "DROP INDEX IF EXISTS fencing_leases_name_pattern"


def _on_postgresql(sql: str) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("fencing", "0001_initial")]

    operations: ClassVar[list[migrations.operations.base.Operation]] = [
        migrations.RunPython(_on_postgresql(_CREATE), _on_postgresql(_DROP)),
    ]
