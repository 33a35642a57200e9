"""Core helpers: guarded UPDATE and DELETE statements for explicit and bulk writes.

``guarded_update(Invoice, token, Invoice.id == 42).values(total=100)`` is
``UPDATE invoices SET total=100, fence_token=:token WHERE id = 42 AND fence_token <=
:token``: the database applies the guard row by row in the same statement. After
execution the row count is compared with ``expect_rows`` (default 1; ``None`` for a
bulk write whose count you check yourself): a shortfall reads the highest token among
the rows matching ``where`` and raises ``StaleRowError``. Pure functions returning
SQLAlchemy constructs, usable with ``Connection``, ``AsyncConnection`` and sessions.

Imports the core validation, this package's guard, and SQLAlchemy.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, ColumnElement, Delete, Table, Update, delete, inspect, update

from .._validate import check_token
from ._guard import GUARD_OPTION, CoreGuard, fence_column
from ._mixin import COLUMN


def _target(target: Any) -> tuple[Any, Column[Any]]:
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
    return target, column


def _check_expect(expect_rows: object) -> int | None:
    if expect_rows is None:
        return None
    if isinstance(expect_rows, bool) or not isinstance(expect_rows, int) or expect_rows < 0:
        raise ValueError(f"expect_rows must be None or an int >= 0, got {expect_rows!r}")
    return expect_rows


def guarded_update(
    target: Any, token: int, *where: ColumnElement[bool], expect_rows: int | None = 1
) -> Update:
    """UPDATE rows matching ``where`` whose token is <= ``token``, stamping ``token``."""
    value = check_token(token)
    expect = _check_expect(expect_rows)
    table, column = _target(target)
    return (
        update(table)
        .where(*where, column <= value)
        .values({column.key: value})
        .execution_options(**{GUARD_OPTION: CoreGuard(column, value, where, expect)})
    )


def guarded_delete(
    target: Any, token: int, *where: ColumnElement[bool], expect_rows: int | None = 1
) -> Delete:
    """DELETE rows matching ``where`` whose token is <= ``token``."""
    value = check_token(token)
    expect = _check_expect(expect_rows)
    table, column = _target(target)
    return (
        delete(table)
        .where(*where, column <= value)
        .execution_options(**{GUARD_OPTION: CoreGuard(column, value, where, expect)})
    )
