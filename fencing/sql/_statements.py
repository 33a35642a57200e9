"""Core helpers: guarded UPDATE and DELETE statements for explicit and bulk writes.

``guarded_update(Invoice, token, Invoice.id == 42, values={"total": 100})`` is
``UPDATE invoices SET total=100, fence_token=:token WHERE id = 42 AND fence_token <=
:token``: the database applies the guard row by row in the same statement. After
execution the row count is compared with ``expect_rows`` (default 1; ``None`` for a
bulk write whose count you check yourself): a shortfall reads the highest token among
the rows matching the statement's other conditions and raises ``StaleRowError``. Pure
functions returning SQLAlchemy constructs, usable with ``Connection``,
``AsyncConnection`` and sessions. Chaining ``.values(...)`` on the result still works;
``values=`` builds the statement in one step, which is measurably cheaper.

What does not depend on the token is built once per target and ``expect_rows``: the
fence column, and an empty UPDATE/DELETE already carrying the guard option (a
``CoreGuard`` holding the column and the expected row count; the token is read back
from the statement's own condition when a write is refused). The token is one bound
parameter, stamped and compared (bound and keyed once). The statements are
``FencedUpdate``/``FencedDelete``, which check their own row count when executed
(see ``_guard``): nothing is installed for them.

Imports the core validation, this package's guard, and SQLAlchemy.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Column, ColumnElement, Delete, Table, Update, inspect
from sqlalchemy.util import immutabledict

from .._base.validate import check_mark_token
from ._guard import GUARD_OPTION, CoreGuard, FencedDelete, FencedUpdate, at_most, fence_column
from ._mixin import COLUMN

#: target -> (fence column, {(verb, expect_rows): empty guarded statement}).
_targets: weakref.WeakKeyDictionary[Any, tuple[Column[Any], dict[Any, Any]]] = (
    weakref.WeakKeyDictionary()
)
_MAX_BASES = 64  # per target; only distinct ``expect_rows`` values add entries


def _resolve(target: Any) -> Column[Any]:
    if isinstance(target, Table):
        column = fence_column(target)
        if column is None and COLUMN in target.c:
            column = target.c[COLUMN]
    else:
        mapper = inspect(target, raiseerr=False)
        if mapper is None or not hasattr(mapper, "local_table"):
            raise TypeError(f"expected a Table or a mapped class, not {type(target).__name__}")
        column = fence_column(mapper.local_table)
    if column is None:
        raise ValueError(f"{target!r} has no {COLUMN} column (use FencedMixin)")
    return column


def _base(target: Any, verb: str, expect: int | None) -> tuple[Any, Column[Any]]:
    """The empty guarded UPDATE/DELETE of ``target`` and its fence column (memoized)."""
    try:
        column, bases = _targets[target]
    except (KeyError, TypeError):  # TypeError: not weak-referenceable (then a clear error)
        column, bases = _resolve(target), {}
        _targets[target] = (column, bases)  # a Table or mapped class: weak-referenceable
    base = bases.get((verb, expect))
    if base is None:
        if len(bases) >= _MAX_BASES:
            bases.clear()
        statement = FencedUpdate(target) if verb == "update" else FencedDelete(target)
        option = {GUARD_OPTION: CoreGuard(column, expect)}
        base = bases[verb, expect] = statement.execution_options(**option)
    return base, column


def fence_column_of(target: Any) -> Column[Any]:
    """The fence column of a fenced ``Table`` or model (memoized with its statements)."""
    return _base(target, "update", None)[1]


def _check_expect(expect_rows: object) -> int | None:
    if expect_rows is None:
        return None
    if isinstance(expect_rows, bool) or not isinstance(expect_rows, int) or expect_rows < 0:
        raise ValueError(f"expect_rows must be None or an int >= 0, got {expect_rows!r}")
    return expect_rows


def _check_values(values: object, column: Column[Any]) -> Mapping[Any, Any]:
    if type(values) is not dict and not isinstance(values, Mapping):  # dict: no ABC check
        raise TypeError(f"values must be a mapping of column to value, not {type(values).__name__}")
    for key in values:
        if key is column or (isinstance(key, str) and key == column.key):
            raise ValueError(f"values must not set {column.key!r}: the token is stamped on it")
    return values


def _guarded(base: Any, where: tuple[Any, ...], guard: Any) -> Any:
    """``base`` filtered by ``where`` (coerced by SQLAlchemy's ``where``), then by the
    guard, appended to the fresh copy ``where`` returned: the guard is built already,
    coercing it again cost a guarded UPDATE a tenth of its construction."""
    statement = base.where(*where)
    statement._where_criteria += (guard,)
    return statement


def guarded_update(
    target: Any,
    token: int,
    *where: ColumnElement[bool],
    values: Mapping[Any, Any] | None = None,
    expect_rows: int | None = 1,
) -> Update:
    """UPDATE rows matching ``where`` whose token is <= ``token``, stamping ``token``.

    ``values`` (column or column name -> value) are the other columns to SET; they may
    also be added by chaining ``.values(...)`` on the result.

    The token is one bound parameter, set and compared (``SET fence_token=:t ... WHERE
    ... fence_token <= :t``): one value to bind, key and send instead of two. It is
    added to the SET clause as SQLAlchemy's ``values`` would store it (the fence column
    -> that parameter), without its coercions, a fifth of a guarded UPDATE's
    construction (``benchmarks/mysql_family.py --instructions``).
    """
    value = check_mark_token(token)
    expect = _check_expect(expect_rows)
    base, column = _base(target, "update", expect)
    guard = at_most(column, value)
    statement = _guarded(base, where, guard)
    if values is not None:
        checked = _check_values(values, column)
        if checked:
            statement = statement.values(checked)
    stamp = {column: guard.right}
    sets = statement._values
    statement._values = sets.union(stamp) if sets else immutabledict(stamp)
    result: Update = statement
    return result


def guarded_delete(
    target: Any, token: int, *where: ColumnElement[bool], expect_rows: int | None = 1
) -> Delete:
    """DELETE rows matching ``where`` whose token is <= ``token``."""
    value = check_mark_token(token)
    expect = _check_expect(expect_rows)
    base, column = _base(target, "delete", expect)
    statement: Delete = _guarded(base, where, at_most(column, value))
    return statement
