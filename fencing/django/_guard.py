"""The guard of ``FencedModel`` rows: guarded saves and updates, claims, the opt-out.

Every guarded write is one ``UPDATE ... SET ..., fence_token = :token WHERE <rows> AND
fence_token <= :token``. A save of one row is that statement alone (atomic by itself,
like Django's own ``save()``); when it matches no row, nothing was written, and the row's
current token is read for ``StaleRowError``. A write of many rows runs inside
``transaction.atomic``: when it falls short, the rows' current token is read in that
same transaction and ``StaleRowError`` raised, which rolls the atomic block back, so
nothing is written. Imports Django's ORM, never the app's
models (``FencedModel`` is defined in ``fencing.django.models``, which needs the app
registry; the checks here read the model's ``fence_token`` field instead).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections, models, router, transaction
from django.db.models import signals

from .._base.validate import check_mark_token
from ._errors import StaleRowError
from ._statement import guarded_update

#: The column every fenced model has (``FencedModel.fence_token``).
FENCE_FIELD = "fence_token"

_UNFENCED: ContextVar[bool] = ContextVar("fencing_django_unfenced", default=False)


@contextmanager
def unfenced() -> Iterator[None]:
    """Allow plain ``save()``, ``delete()``, ``QuerySet.update()``, ``QuerySet.delete()``
    and ``bulk_update()`` of fenced models inside the block (this thread or task only):
    for data migrations, fixtures, admin."""
    reset = _UNFENCED.set(True)
    try:
        yield
    finally:
        _UNFENCED.reset(reset)


def unfenced_allowed() -> bool:
    """Whether the current thread or task is inside ``unfenced()``."""
    return _UNFENCED.get()


def _fenced(model: Any) -> Any:
    """``model`` (a class) if it is a fenced model, else ``TypeError``."""
    if not (isinstance(model, type) and issubclass(model, models.Model)):
        raise TypeError(f"expected a Django model, got {model!r}")
    return _with_fence_field(model)


@functools.cache
def _with_fence_field(model: Any) -> Any:
    """``model`` if it has the ``fence_token`` column, else ``TypeError`` (an error is
    not cached; an answer is, once per class: every guarded write asks)."""
    meta = getattr(model, "_meta", None)  # None: django.db.models.Model itself
    if meta is None or meta.abstract or FENCE_FIELD not in {f.name for f in meta.concrete_fields}:
        raise TypeError(f"{model.__qualname__} is not a FencedModel (no {FENCE_FIELD} column)")
    return model


def _resource(model: Any, pk: object = None) -> str:
    label: str = model._meta.label
    return label if pk is None else f"{label} pk={pk!r}"


def _write(queryset: Any, **values: Any) -> int:
    """``QuerySet.update`` itself: a ``FencedQuerySet`` refuses its own ``update()``."""
    rows: int = models.QuerySet.update(queryset, **values)
    return rows


def _stamp(rows: Any, pk: Any, value: int, changes: Sequence[tuple[Any, Any]] = ()) -> None:
    """Write ``changes`` (field, value pairs) and the token ``value`` to the row ``pk`` of
    ``rows`` (a model's base queryset on one database) where its token is not above
    ``value``; ``StaleRowError`` with its current token otherwise.

    One ``UPDATE ... WHERE pk = :pk AND fence_token <= :token``, its text built once
    (``_statement``), and a second query, for the current token, only when it is
    refused. What that text cannot carry is written through the ORM, in one
    transaction: a model with parents has its columns in several tables, which Django
    writes by as many statements."""
    model, db = rows.model, rows.db
    connection = connections[db]
    token_field = model._meta.get_field(FENCE_FIELD)
    statement = guarded_update(connection, model, token_field, pk, value, changes)
    if statement is not None:
        with connection.cursor() as cursor:
            cursor.execute(*statement)
            written = cursor.rowcount
    else:
        with transaction.atomic(using=db):
            values = {field.attname: changed for field, changed in changes}
            guarded = rows.filter(pk=pk, fence_token__lte=value)
            written = _write(guarded, fence_token=value, **values)
    if not written:
        current = _now(rows.filter(pk=pk)).values_list(FENCE_FIELD, flat=True).first()
        raise StaleRowError(value, current, _resource(model, pk))


def _now(rows: Any) -> Any:
    """``rows`` (a queryset) read as they are now. On MySQL and MariaDB a plain read in a
    REPEATABLE READ transaction (a project's ``isolation_level``; Django's default is
    READ COMMITTED) shows the snapshot of the transaction's first read, which may miss a
    token raised since: inside a transaction it is read with ``FOR UPDATE``, the newest
    committed rows, as the guarded ``UPDATE`` itself reads them. Elsewhere, and outside a
    transaction (each read is its own, and Django refuses ``select_for_update`` there),
    ``rows`` as they are."""
    connection = connections[rows.db]
    if connection.vendor == "mysql" and connection.in_atomic_block:
        return rows.select_for_update()
    return rows


def _holds(instance: Any, value: int) -> None:
    """Set ``instance``'s token to the one its row now holds: a value loaded, as Django
    loads it (``FencedModel`` counts the program's own assignments as stamps; this is
    none)."""
    instance.__dict__[FENCE_FIELD] = value


def _saved_row(model: Any, target: Any, using: str | None, verb: str) -> Any:
    """The base queryset of ``target``'s model on the database its row is written to;
    ``ValueError`` for an instance never saved (what ``claim`` or ``delete``, ``verb``,
    cannot take)."""
    if target._state.adding or target.pk is None:
        raise ValueError(f"{_resource(model)}: {verb} a saved row, not a new instance")
    db = using or target._state.db or router.db_for_write(model, instance=target)
    return model._base_manager.using(db)


@functools.cache
def _writable(model: Any) -> tuple[Any, ...]:
    """The fields a save of ``model`` writes: its concrete fields but the primary key,
    ``fence_token`` (the guard sets it) and generated columns."""
    return tuple(
        f
        for f in model._meta.concrete_fields
        if not f.primary_key and f.name != FENCE_FIELD and not getattr(f, "generated", False)
    )


def _updated_fields(model: Any, update_fields: Iterable[str] | None) -> Sequence[Any]:
    fields = _writable(model)
    if update_fields is None:
        return fields
    wanted = set(update_fields)
    if isinstance(update_fields, str):
        raise TypeError("update_fields must be an iterable of field names, not a str")
    chosen = [f for f in fields if f.name in wanted or f.attname in wanted]
    unknown = wanted - {f.name for f in chosen} - {f.attname for f in chosen} - {FENCE_FIELD}
    if unknown:
        raise ValueError(f"update_fields: no such updatable fields: {sorted(unknown)}")
    return chosen


def fenced_save(
    instance: Any,
    token: int,
    *,
    using: str | None = None,
    update_fields: Iterable[str] | None = None,
) -> None:
    """Save ``instance`` with ``token``: an existing row is written by one ``UPDATE ...
    WHERE pk = :pk AND fence_token <= :token`` (all its concrete fields, or
    ``update_fields``, and ``fence_token = :token``); a new instance is inserted with
    ``fence_token = token``. ``StaleRowError`` (nothing written) when the row holds a
    newer token (``current``, read just after the refused statement) or no longer
    exists (``current is None``). Sends
    ``pre_save`` and ``post_save`` as ``save()`` does."""
    value = check_mark_token(token)
    model = _fenced(type(instance))
    fields = _updated_fields(model, update_fields)
    db = using or instance._state.db or router.db_for_write(model, instance=instance)
    if instance._state.adding:
        if update_fields is not None:
            raise ValueError("update_fields cannot be used to insert a new row")
        _holds(instance, value)
        models.Model.save(instance, using=db, force_insert=True)
        return
    if instance.pk is None:
        raise ValueError(f"{_resource(model)}: the instance has no primary key")
    names = None if update_fields is None else frozenset([*map(str, update_fields), FENCE_FIELD])
    signals.pre_save.send(sender=model, instance=instance, raw=False, using=db, update_fields=names)
    changes = [(f, f.pre_save(instance, False)) for f in fields]
    # One statement, atomic by itself (as a plain save() is): no transaction around it,
    # which would cost a BEGIN and a COMMIT per save and protect nothing more. Its
    # failure inside atomic() marks that block for rollback, as save()'s does.
    with transaction.mark_for_rollback_on_error(using=db):
        _stamp(model._base_manager.using(db), instance.pk, value, changes)
    _holds(instance, value)
    instance._state.db = db
    signals.post_save.send(
        sender=model, instance=instance, created=False, update_fields=names, raw=False, using=db
    )


def fenced_update(queryset: Any, token: int, **values: Any) -> int:
    """``queryset.update(**values)`` guarded by ``token``, all or nothing: one ``UPDATE ...
    SET ..., fence_token = :token WHERE <queryset> AND fence_token <= :token``, then, in
    the same transaction, a check that no row of ``queryset`` holds a newer token.
    If one does, ``StaleRowError`` (``current``: the newest such token) and nothing is
    written. Returns the number of rows written. With no ``values`` it is a claim."""
    value = check_mark_token(token)
    model = _fenced(queryset.model)
    if FENCE_FIELD in values:
        raise ValueError(f"{FENCE_FIELD} is set by the guard: pass the token as `token`")
    with transaction.atomic(using=queryset.db):
        written = _write(queryset.filter(fence_token__lte=value), fence_token=value, **values)
        # the newest token by ORDER BY, not Max(): Django drops FOR UPDATE from an aggregate
        newer = _now(queryset.filter(fence_token__gt=value)).order_by(f"-{FENCE_FIELD}")
        newest = newer.values_list(FENCE_FIELD, flat=True).first()
        if newest is not None:
            raise StaleRowError(value, newest, _resource(model))
    return written


def claim(target: Any, token: int, *, using: str | None = None) -> int:
    """Raise the token of a row (a ``FencedModel`` instance, then reloaded from the
    database in the same transaction) or of every row of a queryset to ``token``,
    changing no data: from then on every older token is refused. Claim before you read
    what you will write back. ``StaleRowError`` if a row holds a newer token (nothing
    changed) or the instance's row does not exist. Returns the number of rows claimed."""
    if isinstance(target, models.QuerySet):
        if using is not None:
            target = target.using(using)
        return fenced_update(target, token)
    value = check_mark_token(token)
    model = _fenced(type(target))
    rows = _saved_row(model, target, using, "claim")
    with transaction.atomic(using=rows.db):
        _stamp(rows, target.pk, value)
        target.refresh_from_db(using=rows.db)
    return 1


def fenced_get(source: Any, token: int, **lookup: Any) -> Any:
    """Claim the one row of ``source`` (a fenced model or a queryset) matching ``lookup``
    and load it, in one transaction: ``fenced_get(Account, token, pk=1)``. ``None`` if
    no row matches; ``StaleRowError`` if it holds a newer token (nothing changed);
    the model's ``MultipleObjectsReturned`` (nothing changed) if several match."""
    value = check_mark_token(token)
    queryset = _fenced(source)._default_manager.all() if isinstance(source, type) else source
    model = _fenced(queryset.model)
    rows = queryset.filter(**lookup)
    with transaction.atomic(using=rows.db):
        claimed = _write(rows.filter(fence_token__lte=value), fence_token=value)
        if claimed == 0:
            current = _now(rows).values_list(FENCE_FIELD, flat=True).first()
            if current is None:
                return None
            raise StaleRowError(value, current, _resource(model))
        if claimed > 1:
            raise model.MultipleObjectsReturned(
                f"fenced_get({_resource(model)}, {lookup!r}) matched {claimed} rows"
            )
        return rows.get()


def fenced_delete(
    target: Any, token: int, *, using: str | None = None
) -> tuple[int, dict[str, int]]:
    """Delete a row (a ``FencedModel`` instance) or every row of a queryset, guarded by
    ``token``, all or nothing. In one transaction: the rows are claimed (``UPDATE ... SET
    fence_token = :token WHERE <rows> AND fence_token <= :token``, which also locks them
    against every other writer until the end), a row holding a newer token raises
    ``StaleRowError`` (``current``: the newest such token; nothing deleted), and then the
    claimed rows are deleted as ``delete()`` deletes them (``pre_delete``/``post_delete``,
    ``on_delete`` cascades, an instance's ``pk`` set to ``None``). An instance whose row
    no longer exists raises ``StaleRowError`` with ``current=None``; an empty queryset
    deletes nothing. Returns what ``delete()`` returns: ``(total, {label: count})``."""
    if isinstance(target, models.QuerySet):
        model = _fenced(target.model)
        value = check_mark_token(token)
        rows = target if using is None else target.using(using)
        with transaction.atomic(using=rows.db):
            fenced_update(rows, value)  # claims (locks) them all, or raises
            deleted: tuple[int, dict[str, int]] = models.QuerySet.delete(
                rows.filter(fence_token=value)
            )
        return deleted
    model = _fenced(type(target))
    value = check_mark_token(token)
    rows = _saved_row(model, target, using, "delete")
    with transaction.atomic(using=rows.db):
        _stamp(rows, target.pk, value)
        _holds(target, value)
        result: tuple[int, dict[str, int]] = models.Model.delete(target, using=rows.db)
    return result


async def afenced_save(
    instance: Any,
    token: int,
    *,
    using: str | None = None,
    update_fields: Iterable[str] | None = None,
) -> None:
    """``fenced_save`` for asyncio (run as Django's ``asave`` runs ``save``)."""
    await sync_to_async(fenced_save)(instance, token, using=using, update_fields=update_fields)


async def afenced_update(queryset: Any, token: int, **values: Any) -> int:
    """``fenced_update`` for asyncio."""
    written: int = await sync_to_async(fenced_update)(queryset, token, **values)
    return written


async def aclaim(target: Any, token: int, *, using: str | None = None) -> int:
    """``claim`` for asyncio."""
    claimed: int = await sync_to_async(claim)(target, token, using=using)
    return claimed


async def afenced_get(source: Any, token: int, **lookup: Any) -> Any:
    """``fenced_get`` for asyncio."""
    return await sync_to_async(fenced_get)(source, token, **lookup)


async def afenced_delete(
    target: Any, token: int, *, using: str | None = None
) -> tuple[int, dict[str, int]]:
    """``fenced_delete`` for asyncio."""
    deleted: tuple[int, dict[str, int]] = await sync_to_async(fenced_delete)(
        target, token, using=using
    )
    return deleted
