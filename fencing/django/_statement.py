"""The guarded write of one row as SQL text, built once per model, columns and backend:
``UPDATE <table> SET <column> = %s, ..., fence_token = %s WHERE <pk> = %s AND
fence_token <= %s``.

Why not the ORM at each call: a fenced ``save()`` is that statement, the one Django's
own ``save()`` runs plus one condition, and building it through a queryset at each call
(the WHERE's two lookups resolved, the query compiled) cost about 1.3x a plain
``save()`` on SQLite, the condition alone a third of a save. Its text depends only on
the table, the columns and the backend's quoting, so it is written once (``_text``);
each call prepares its values as Django's update compiler does
(``Field.get_db_prep_save``; the key with ``get_db_prep_value``) and runs it on the
alias's Django cursor (query logging, ``execute_wrapper`` and ``%s`` placeholders as for
every ORM query).

What the text cannot carry as one ``%s``: a value that is an expression (``F()``, a
subquery) or prepares to SQL, a field with a placeholder of its own (GIS), a model with
parents (multi-table inheritance: its columns are in several tables), a primary key of
several columns. For those ``guarded_update`` returns ``None`` and the caller writes
through the ORM. Imports Django's database layer only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The statement's text per (model, updated fields, token field, backend's operations
#: class): one entry per model and field set that a program saves with. (Two threads
#: may both write one entry: the same text.)
_texts: dict[tuple[Any, ...], str] = {}


def _plain(value: Any) -> bool:
    """Whether ``value`` is bound as a parameter: not SQL of its own, nor a model
    instance (which Django's compiler turns into its key, or refuses)."""
    return not any(
        hasattr(value, name) for name in ("resolve_expression", "as_sql", "prepare_database_save")
    )


def _text(connection: Any, model: Any, fields: tuple[Any, ...], token_field: Any) -> str:
    key = (model, fields, token_field, type(connection.ops))
    text = _texts.get(key)
    if text is None:
        quote = connection.ops.quote_name
        token = quote(token_field.column)
        sets = "".join(f"{quote(field.column)} = %s, " for field in fields)
        text = (
            f"UPDATE {quote(model._meta.db_table)} SET {sets}{token} = %s "
            f"WHERE {quote(model._meta.pk.column)} = %s AND {token} <= %s"
        )
        _texts[key] = text
    return text


def guarded_update(
    connection: Any,
    model: Any,
    token_field: Any,
    pk: Any,
    token: int,
    changes: Sequence[tuple[Any, Any]],
) -> tuple[str, list[Any]] | None:
    """The statement writing ``changes`` (field, value pairs) and ``token`` to the row
    ``pk`` of ``model`` if its token is not above ``token``, with its parameters, for
    ``connection``; ``None`` when it must be built by the ORM (see the module docstring)."""
    meta = model._meta
    if meta.parents or meta.pk.column is None:
        return None
    params = []
    for field, value in changes:
        if not _plain(value) or hasattr(field, "get_placeholder"):
            return None
        prepared = field.get_db_prep_save(value, connection=connection)
        if not _plain(prepared):
            return None
        params.append(prepared)
    key = meta.pk.get_db_prep_value(pk, connection, prepared=False)
    fields = tuple(field for field, _ in changes)
    params += [token, key, token]
    return _text(connection, model, fields, token_field), params
