"""MySQL and MariaDB only: ``fencing_leases`` as ``fencing migrate`` makes it there, InnoDB
with names compared byte for byte (``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin``
on MySQL 8; ``fencing.sql._schema.table_options``).

Why: the issuer's upsert relies on InnoDB's row locks and transactions (on MyISAM two
acquires could both take one lease), and the default collations fold case and ignore
trailing spaces, which would make ``job``, ``Job`` and ``job `` one fence. Idempotent on
a table that ``fencing migrate`` made; nothing on SQLite and PostgreSQL. The reverse
leaves the table as it is (a binary collation and InnoDB are what it needs anyway).
"""

from typing import Any, ClassVar

from django.db import migrations


def _innodb_binary_names(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    collation = "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"
    schema_editor.execute(
        f"ALTER TABLE fencing_leases ENGINE=InnoDB, "
        f"CONVERT TO CHARACTER SET utf8mb4 COLLATE {collation}"
    )


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("fencing", "0002_lease_name_pattern")]

    operations: ClassVar[list[migrations.operations.base.Operation]] = [
        # not in a transaction: MySQL commits DDL at once, and Django refuses it inside one
        migrations.RunPython(_innodb_binary_names, migrations.RunPython.noop, atomic=False),
    ]
