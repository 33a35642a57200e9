"""The SQL guard inside SQLAlchemy: flush UPDATE/DELETE of fenced rows, checked in the database.

Why this mechanism (evaluated against the alternatives)
-------------------------------------------------------
The guard must be ``WHERE <primary key> AND fence_token <= :new_token`` in the very
statement the flush emits, with the row count verified, and without a second statement.

* ``version_id_col`` alone puts ``fence_token = :loaded_token`` in the WHERE clause:
  optimistic concurrency, not fencing (a holder of the *newest* token would be refused
  because an older holder wrote after it read the row).
* Emitting our own UPDATEs in ``before_flush`` would bypass the unit of work: inserts
  it depends on, relationship foreign keys, ``onupdate`` defaults, inheritance.
* Rewriting SQL strings in ``before_cursor_execute`` depends on each dialect's text.

So we keep SQLAlchemy's own flush and change one comparison. ``FencedMixin`` makes
``fence_token`` the mapper's ``version_id_col`` (with ``version_id_generator=False``: the
application, not SQLAlchemy, chooses the value). That makes the flush (1) put the
comparison ``fence_token = :<bind>`` into every UPDATE and DELETE of the row, (2) emit
one statement per row, whose row count every dialect reports, and (3) treat a
mismatch as a ``StaleDataError`` and roll the session back. A ``before_execute``
listener then turns that one comparison into ``fence_token <= :<bind>`` (a structural
rewrite of the statement's WHERE criteria, memoized per criteria tuple;
compiled-statement caching still works) and binds the *new* token to it when the row's
token is being set. An ``after_execute`` listener checks the row count: a mismatch
reads the row's token (a diagnostic read after the failed write) and raises
``StaleRowError``; a driver that cannot report the row count raises
``RowcountUnavailable``.

Core statements built by ``guarded_update``/``guarded_delete`` carry a ``fencing_guard``
execution option and are verified by the same ``after_execute`` listener. Any other
UPDATE/DELETE construct on a fenced table is refused with ``UnfencedWriteError`` unless
it has the ``fencing_unfenced=True`` execution option.

Imports the core errors and validation, this package's errors, and SQLAlchemy.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Column, Delete, Engine, Update, and_, event, func, select
from sqlalchemy.sql import operators, visitors
from sqlalchemy.sql.elements import BinaryExpression, BindParameter

from .._errors import UnfencedWriteError
from .._log import guard_log
from ._errors import RowcountUnavailable, StaleRowError

#: Option of an UPDATE/DELETE that writes a fenced table on purpose without a guard.
UNFENCED_OPTION = "fencing_unfenced"
#: Option carrying a ``CoreGuard`` (set by ``guarded_update``/``guarded_delete``).
GUARD_OPTION = "fencing_guard"
#: ``Table.info`` key naming the fence column of a fenced table.
INFO_KEY = "fencing_column"


@dataclass(frozen=True)
class FlushGuard:
    """How to read a rewritten flush statement's parameters."""

    column: Column[Any]
    bind: str  # the bind of ``fence_token <= :bind``
    keys: tuple[tuple[Column[Any], str], ...]  # primary key column -> bind name
    is_update: bool


class CoreGuard(NamedTuple):
    """A ``guarded_update``/``guarded_delete``: its fence column and expected row count.

    Independent of the token, so one is built per target and reused (the token and
    row filter are read back from the statement if a write is refused).
    """

    column: Column[Any]
    expect_rows: int | None


def fence_column(table: Any) -> Column[Any] | None:
    """The fence column of a fenced table (one mapped by ``FencedMixin``), else None."""
    info = getattr(table, "info", None)
    name = info.get(INFO_KEY) if isinstance(info, dict) else None
    return None if name is None else table.c[name]


_guards: weakref.WeakKeyDictionary[Any, FlushGuard] = weakref.WeakKeyDictionary()
#: id(where criteria) -> (the criteria, rewritten criteria, guard). The flush reuses one
#: criteria tuple per mapper and table, while the statement around it is often a fresh
#: copy (``return_defaults``), so this is the key that hits. Bounded, see ``_remember``.
_rewrites: dict[int, tuple[Any, tuple[Any, ...], FlushGuard]] = {}
_MAX_REWRITES = 512


def _rewrite_criteria(
    criteria: tuple[Any, ...], column: Column[Any], is_update: bool
) -> tuple[tuple[Any, ...], FlushGuard] | None:
    """``criteria`` with ``fence_token = :b`` turned into ``fence_token <= :b``.

    None when there is no such comparison (it is not a flush statement).
    """
    found: list[str] = []
    keys: list[tuple[Column[Any], str]] = []
    pk = set(column.table.primary_key.columns)

    def replace(element: Any, **kw: Any) -> Any:
        if (
            isinstance(element, BinaryExpression)
            and element.operator is operators.eq
            and isinstance(element.right, BindParameter)
        ):
            left = element.left
            if left is column:
                found.append(element.right.key)
                return left <= element.right
            if left in pk:
                keys.append((left, element.right.key))  # type: ignore[arg-type]
        return None

    rewritten = tuple(visitors.replacement_traverse(c, {}, replace) for c in criteria)
    if len(found) != 1:
        return None
    return rewritten, FlushGuard(column, found[0], tuple(keys), is_update)


def _rewrite(statement: Any, column: Column[Any]) -> tuple[Any, FlushGuard] | None:
    """The statement with its guard comparison turned into ``<=``, or None."""
    criteria = statement._where_criteria
    hit = _rewrites.get(id(criteria))
    if hit is None or hit[0] is not criteria:
        found = _rewrite_criteria(criteria, column, isinstance(statement, Update))
        if found is None:
            return None
        if len(_rewrites) >= _MAX_REWRITES:
            _rewrites.clear()
        hit = _rewrites[id(criteria)] = (criteria, *found)
    rewritten = statement._generate()  # a copy; only its WHERE criteria differ
    rewritten._where_criteria = hit[1]
    _guards[rewritten] = hit[2]
    return rewritten, hit[2]


def _with_new_token(params: dict[str, Any], guard: FlushGuard) -> dict[str, Any]:
    key = guard.column.key
    if guard.is_update and key in params:
        return {**params, guard.bind: params[key]}
    return params


def _before_execute(
    conn: Any, element: Any, multiparams: Any, params: Any, options: Any
) -> tuple[Any, Any, Any]:
    if not isinstance(element, (Update, Delete)):
        return element, multiparams, params
    if GUARD_OPTION in options:
        return element, multiparams, params
    column = fence_column(element.table)
    if column is None:
        return element, multiparams, params
    found = _rewrite(element, column)
    if found is None:
        if options.get(UNFENCED_OPTION):
            return element, multiparams, params
        verb = "UPDATE" if isinstance(element, Update) else "DELETE"
        raise UnfencedWriteError(
            f"{verb} of fenced table {column.table.name!r} without "
            "a guard: use fencing.sql.guarded_update/guarded_delete, or add "
            f".execution_options({UNFENCED_OPTION}=True) to write unguarded on purpose"
        )
    rewritten, guard = found
    if multiparams:
        multiparams = [_with_new_token(p, guard) for p in multiparams]
    else:
        params = _with_new_token(params, guard)
    return rewritten, multiparams, params


def _after_execute(
    conn: Any, element: Any, multiparams: Any, params: Any, options: Any, result: Any
) -> None:
    core = options.get(GUARD_OPTION)
    if core is not None:
        flush = None
        expected = core.expect_rows
    else:
        flush = _guards.get(element) if isinstance(element, (Update, Delete)) else None
        if flush is None:
            return
        expected = len(multiparams) or 1
    if expected is None:
        return
    rows = result.rowcount
    if rows is None or rows < 0:
        raise RowcountUnavailable(
            f"{conn.dialect.name} ({conn.dialect.driver}) did not report the row count of a "
            "guarded statement, so the fence guard cannot be verified"
        )
    if rows == expected:
        return
    if flush is not None:
        _raise_flush(conn, flush, multiparams or [params])
    _raise_core(conn, core, element)


def _raise_flush(conn: Any, guard: FlushGuard, rows: list[dict[str, Any]]) -> None:
    column = guard.column
    for params in rows:
        token = params.get(guard.bind)
        key = {c: params[bind] for c, bind in guard.keys}
        where = and_(*(c == value for c, value in key.items()))
        current = conn.execute(select(column).where(where)).scalar()
        if current is None or token is None or current > token:
            where_text = ", ".join(f"{c.name}={v!r}" for c, v in key.items())
            resource = f"{column.table.name} ({where_text})"
            guard_log.warning("stale token %s refused by %s (row has %s)", token, resource, current)
            raise StaleRowError(int(token or 0), current, resource)
    raise StaleRowError(0, None, column.table.name)  # row count off, every row fine: vanished


def _raise_core(conn: Any, guard: CoreGuard, statement: Any) -> None:
    column = guard.column
    token, where = _split_guard(statement._where_criteria, column)
    current = conn.execute(select(func.max(column)).where(*where)).scalar()
    resource = column.table.name
    guard_log.warning("stale token %s refused by %s (rows have %s)", token, resource, current)
    raise StaleRowError(token, current, resource)


def _split_guard(criteria: tuple[Any, ...], column: Column[Any]) -> tuple[int, list[Any]]:
    """The token of ``fence_token <= :token`` among ``criteria``, and the other criteria."""
    token = 0
    where = []
    for criterion in criteria:
        if (
            isinstance(criterion, BinaryExpression)
            and criterion.operator is operators.le
            and criterion.left is column
            and isinstance(criterion.right, BindParameter)
        ):
            value = criterion.right.effective_value
            token = value if isinstance(value, int) else 0
        else:
            where.append(criterion)
    return token, where


def install() -> None:
    """Listen on every engine (sync, and the sync side of async engines); idempotent."""
    if not event.contains(Engine, "before_execute", _before_execute):
        event.listen(Engine, "before_execute", _before_execute, retval=True)
        event.listen(Engine, "after_execute", _after_execute)
