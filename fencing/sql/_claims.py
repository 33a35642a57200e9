"""Claims on fenced rows: raise a row's ``fence_token`` to the holder's token, data untouched.

Why: a token orders writes, not reads. A ``FencedMixin`` row loaded by holder B (token 5)
and flushed later is exposed to a stale holder A (token 4) that writes in between: A's
flush passes ``fence_token <= 4`` (nothing newer was written yet), then B's flush passes
``fence_token <= 5`` with data computed from the read before A's write, and A's change
is silently lost::

    A (token 4): read ......... [paused] ......... write      <- accepted
    B (token 5):        read ............................. write  <- accepted: A's change lost

A claim shows B's token to the row before B reads it: ``UPDATE ... SET fence_token =
:token WHERE <key> AND fence_token <= :token``. From then on A's write is refused, so B
reads, computes and writes knowing nothing older can land in between.

- ``claim(session, row, token)``: one row already loaded, refreshed by the same
  statement (``UPDATE ... RETURNING``).
- ``claim_rows(connection, target, token, *where)``: every row matching ``where``.
- ``fenced_get(session, Model, key, token)``: claim and load in one statement
  (``UPDATE ... RETURNING``) where the database has it (PostgreSQL, SQLite >= 3.35),
  else a claim and a ``SELECT``; so "load, change, commit" costs no extra round trip.

A refused claim raises ``StaleRowError`` through the guard's own refusal path (the
guarded UPDATE's row count, ``_guard``), so every SQL refusal is logged and raised in one
place. A successful claim also stamps the row for the session's transaction, so the
holder's changes are flushed guarded by the claimed token without setting
``fence_token`` again.

Imports the core validation, this package's guard, statements and mixin, and SQLAlchemy.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar, cast

from sqlalchemy import ColumnElement, Connection, func, inspect, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from .._base.validate import check_mark_token
from ._guard import CoreGuard, _raise_core, current_read
from ._mixin import FencedMixin, stamp
from ._statements import fence_column_of, guarded_update

M = TypeVar("M", bound=FencedMixin)


def _fenced_class(model: object) -> Any:
    """The mapper of a ``FencedMixin`` model (``TypeError`` for anything else)."""
    if not (isinstance(model, type) and issubclass(model, FencedMixin)):
        raise TypeError(f"expected a FencedMixin model, not {model!r}")
    return inspect(model)


def _key_criteria(mapper: Any, key: object) -> list[ColumnElement[bool]]:
    """``<pk column> == value`` for each primary-key column, from a scalar or a tuple."""
    values = tuple(key) if isinstance(key, (tuple, list)) else (key,)
    columns = mapper.primary_key
    if len(values) != len(columns) or any(v is None for v in values):
        raise ValueError(
            f"{mapper.class_.__name__} has a primary key of {len(columns)} column(s); got {key!r}"
        )
    return [column == value for column, value in zip(columns, values, strict=True)]


def _table(model: Any) -> Any:
    """The table holding a model's fence column. Statements on it run as Core statements
    in a session (no ORM bulk-update synchronization, which would add a SELECT where
    ``RETURNING`` is missing); the claims keep the loaded row in step themselves."""
    return fence_column_of(model).table


def _check_session(session: object) -> Session:
    if not isinstance(session, Session):
        raise TypeError(f"expected a sqlalchemy.orm.Session, not {type(session).__name__}")
    return session


def claim(session: Session, row: FencedMixin, token: int) -> None:
    """Claim a loaded row for ``token``: raise its ``fence_token``, leave its data alone,
    and refresh the row from the database in the same step.

    One statement where the database has ``UPDATE ... RETURNING`` (PostgreSQL, SQLite
    >= 3.35): ``UPDATE <table> SET fence_token = :token WHERE <its primary key> AND
    fence_token <= :token RETURNING *``, in the session's transaction; elsewhere the
    UPDATE then a ``SELECT``. ``StaleRowError`` (a ``StaleTokenError``) if a newer token
    holds the row or it no longer exists: nothing changed. The same token again is a
    no-op in effect. On success the row holds what the database holds now (read after
    the claim, so no older token can change it from here on), ``row.fence_token`` is
    ``token``, and the row is stamped for this transaction: change it and commit, and the
    flush is guarded by ``token``::

        invoice = session.get_one(Invoice, 42)
        claim(session, invoice, token)   # invoice is now current, and claimed
        invoice.total += 10
        session.commit()

    Bad input (a token that is not an int in 0..2**63-1, a row that is not a persistent
    ``FencedMixin`` row of ``session``) raises ``TypeError``/``ValueError`` before any SQL.
    """
    value = check_mark_token(token)
    _check_session(session)
    if not isinstance(row, FencedMixin):
        raise TypeError(f"expected a FencedMixin row, not {type(row).__name__}")
    state = inspect(row)
    if state.identity is None or state.session is not session:
        raise ValueError(f"{type(row).__name__} row is not persistent in this session")
    criteria = _key_criteria(state.mapper, state.identity)
    loaded, statement = _claim_and_load(session, type(row), criteria, value)
    if loaded is None:  # a newer token holds it, or it is gone
        _refuse(session, statement)
    stamp(session, row)


def claim_rows(
    connection: Connection | Session, target: Any, token: int, *where: ColumnElement[bool]
) -> int:
    """Claim every row of ``target`` (a fenced ``Table`` or model) matching ``where``.

    ``UPDATE ... SET fence_token = :token WHERE <where> AND fence_token <= :token``, then
    a check that no matching row holds a newer token (``StaleRowError`` naming the newest
    one if any does). Returns the number of rows claimed. Run it in the transaction that
    then reads and writes them: a refused claim may have claimed some rows before the
    check, and leaving the transaction with the error rolls them back (``with
    engine.begin() as conn:`` does; so does a session's rollback).
    """
    value = check_mark_token(token)
    statement = guarded_update(target, value, *where, expect_rows=None)
    column = fence_column_of(target)
    claimed = _rowcount(connection.execute(statement))
    newest = current_read(_connection(connection), select(func.max(column)).where(*where))
    if newest is not None and newest > value:
        _raise_core(_connection(connection), CoreGuard(column, None), statement)
    return claimed


def _rowcount(result: Any) -> int:
    count: int = cast("CursorResult[Any]", result).rowcount
    return count


def _connection(connection: Connection | Session) -> Connection:
    return connection.connection() if isinstance(connection, Session) else connection


def fenced_get(session: Session, model: type[M], key: Any, token: int) -> M | None:
    """``session.get(model, key)`` that claims the row for ``token`` in the same step.

    On PostgreSQL and SQLite >= 3.35 one statement, ``UPDATE ... SET fence_token =
    :token WHERE <key> AND fence_token <= :token RETURNING *``, loads the row into the
    session (refreshing an instance already there, like ``populate_existing``); on
    databases without ``UPDATE ... RETURNING``, a claim then a ``SELECT``. The row comes
    back stamped for this transaction: change it and commit, the flush is guarded by
    ``token``. ``None`` if no such row; ``StaleRowError`` if a newer token holds it
    (nothing changed). ``key`` is the primary key value, or a tuple of them in the
    mapper's order.
    """
    value = check_mark_token(token)
    _check_session(session)
    criteria = _key_criteria(_fenced_class(model), key)
    row, statement = _claim_and_load(session, model, criteria, value)
    if row is None:
        column = fence_column_of(model)
        conn = session.connection(bind_arguments={"mapper": inspect(model)})
        if current_read(conn, select(column).where(*criteria)) is None:
            return None  # no such row: nothing was claimed
        _refuse(session, statement)
    stamp(session, row)
    return row


def _claim_and_load(
    session: Session, model: type[M], criteria: list[ColumnElement[bool]], token: int
) -> tuple[M | None, Any]:
    """Claim the row matching ``criteria`` and load it (refreshing the session's
    instance); ``None`` if the claim matched no row. Also the claiming statement."""
    table = _table(model)
    statement = guarded_update(table, token, *criteria, expect_rows=None)
    if session.get_bind(inspect(model)).dialect.update_returning:
        # The guard is in the UPDATE's WHERE clause: a row comes back, or none.
        load: Any = select(model).from_statement(statement.returning(*table.c))
    elif _rowcount(session.execute(statement)):
        load = select(model).where(*criteria)
    else:
        return None, statement
    row: M | None = session.scalars(load.execution_options(populate_existing=True)).one_or_none()
    return row, statement


def _refuse(session: Session, statement: Any) -> NoReturn:
    """Raise ``StaleRowError`` for a refused claim, by the guard's own refusal path."""
    _raise_core(session.connection(), CoreGuard(fence_column_of(statement.table), 1), statement)
