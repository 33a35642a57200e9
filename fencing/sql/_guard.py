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
  (The one place that swaps SQL at the cursor, ORM bulk UPDATE by primary key below,
  swaps in the whole statement compiled with ``<=`` for the same dialect, and only when
  its parameters are the same ones in the same order.)

So we keep SQLAlchemy's own flush and change one comparison. ``FencedMixin`` makes
``fence_token`` the mapper's ``version_id_col`` (with ``version_id_generator=False``: the
application, not SQLAlchemy, chooses the value). That makes the flush (1) put the
comparison ``fence_token = :<bind>`` into every UPDATE and DELETE of the row, (2) emit
one statement per row, whose row count every dialect reports, and (3) treat a
mismatch as a ``StaleDataError`` and roll the session back. The statement then turns
that one comparison into ``fence_token <= :<bind>`` (a structural rewrite of its WHERE
criteria, memoized per criteria tuple; compiled-statement caching still works), binds
the *new* token to it when the row's token is being set, runs, and checks the row
count: a mismatch reads the row's token (a diagnostic read after the failed write) and
raises ``StaleRowError``; a driver that cannot report the row count raises
``RowcountUnavailable``. Core statements built by ``guarded_update``/``guarded_delete``
carry a ``fencing_guard`` execution option (the expected row count) and are verified
the same way. Any other UPDATE/DELETE construct on a fenced table is refused with
``UnfencedWriteError`` unless it has the ``fencing_unfenced=True`` execution option.

Where the guard runs, and what it costs statements on other tables
-------------------------------------------------------------------
A listener on ``Engine`` (``before_execute``/``after_execute``), as this module had,
makes SQLAlchemy dispatch its connection events around every transaction of every
engine, whether or not a listener cares, which slows every statement of the process,
on tables fencing does not guard too (docs/performance.md, "Statements on unfenced
tables", measured with ``benchmarks/sql_scope.py``). So the guard is attached to the
fenced statements themselves, and nothing is attached to ``Engine``:

* ``FencedUpdate``/``FencedDelete`` (what ``guarded_update``/``guarded_delete`` build, and
  what a fenced table's own ``update()``/``delete()`` return, which is how the ORM flush
  builds its statements) guard themselves when a connection executes them
  (``_execute_on_connection``, the hook ``Connection.execute`` calls on every
  statement). What they execute carries the ``fencing_checked`` option.
* One cursor check (``do_execute``/``do_executemany``/``do_execute_no_params`` dialect
  events) sees every statement about to reach a driver. For an UPDATE/DELETE of a
  fenced table without ``fencing_checked`` it refuses the write (``UnfencedWriteError``)
  unless it has ``fencing_unfenced=True``, or, for a statement the ORM built like a flush
  (ORM bulk UPDATE by primary key, ``session.execute(update(Model), rows)``, whose
  comparison already binds the new token), runs it with ``<=`` and checks its row
  count; that is the one statement whose SQL changes after SQLAlchemy logged it (its
  echo log and ``before_cursor_execute`` listeners show ``fence_token = ?``). An
  UPDATE/DELETE of a fenced table inside another statement (an ORM
  ``select(Model).from_statement(...)``, a data-modifying CTE) is refused unless it is a
  ``guarded_update``/``guarded_delete`` (``fenced_get`` runs one that way) or the
  statement is unfenced on purpose; so is an upsert (``INSERT ... ON CONFLICT DO
  UPDATE``, MySQL's ``ON DUPLICATE KEY UPDATE``) of a fenced table. Every other
  statement costs the check a few attribute reads and an ``isinstance``; an
  UPDATE/DELETE of an unfenced table one ``Table.info`` lookup more.

Installed when: importing this package installs nothing; ``install()`` adds the cursor
check once per process, when the first ``FencedMixin`` model is mapped (``_mixin``);
``fence_table()`` marks one table. ``COUNTS`` records what the guard handled, for tests
and benchmarks: only statements on fenced tables count (not synchronized between threads).

Imports the core errors and validation, this package's errors, and SQLAlchemy.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn, cast

from sqlalchemy import (
    Boolean,
    Column,
    Delete,
    Engine,
    Insert,
    Table,
    Update,
    and_,
    event,
    func,
    select,
)
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm.context import FromStatement
from sqlalchemy.sql import ClauseElement, operators, visitors
from sqlalchemy.sql.elements import BinaryExpression, BindParameter

from .._base.errors import UnfencedWriteError
from .._base.log import guard_log
from .._base.metrics import write_rejected
from ._schema import MYSQL
from ._stale import RowcountUnavailable, StaleRowError

#: Option of an UPDATE/DELETE that writes a fenced table on purpose without a guard.
UNFENCED_OPTION = "fencing_unfenced"
#: Option carrying a ``CoreGuard`` (set by ``guarded_update``/``guarded_delete``).
GUARD_OPTION = "fencing_guard"
#: Option of what a fenced statement executes after guarding itself (read by the cursor check).
CHECKED_OPTION = "fencing_checked"
#: ``Table.info`` key naming the fence column of a fenced table.
INFO_KEY = "fencing_column"

_DML = (Update, Delete)


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


@dataclass
class Counts:
    """What the guard handled in this process; only statements on fenced tables count."""

    #: Fenced statements that guarded themselves (guarded_update/delete, ORM flushes).
    guarded: int = 0
    #: UPDATE/DELETE statements on fenced tables that the cursor check looked into.
    examined: int = 0
    #: Of those, statements the cursor check ran with ``<=`` (ORM bulk UPDATE by key).
    rewritten_at_cursor: int = 0
    #: Writes refused with ``UnfencedWriteError``.
    refused: int = 0


COUNTS = Counts()


def fence_column(table: Any) -> Column[Any] | None:
    """The fence column of a fenced table (one mapped by ``FencedMixin``), else None."""
    info = getattr(table, "info", None)
    name = info.get(INFO_KEY) if isinstance(info, dict) else None
    return None if name is None else table.c[name]


#: id(where criteria) -> (the criteria, rewritten criteria, guard). The flush reuses one
#: criteria tuple per mapper and table, while the statement around it is often a fresh
#: copy (``return_defaults``), so this is the key that hits. Bounded, see ``_rewrite``.
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
    rewritten = statement._generate()  # a copy of the same class; only its WHERE differs
    rewritten._where_criteria = hit[1]
    return rewritten, hit[2]


_BOOLEAN = Boolean()


def at_most(column: Column[Any], token: int) -> BinaryExpression[bool]:
    """``column <= :token``, the guard's comparison, built directly: what the ``<=``
    operator builds (the same SQL, bind name and cache key), without its coercions, which
    cost a guarded statement's construction a fifth of its time."""
    bind = BindParameter(column.key, token, type_=column.type, unique=True)
    return BinaryExpression(column, bind, operators.le, type_=_BOOLEAN)


def _with_new_token(params: Mapping[str, Any], guard: FlushGuard) -> Mapping[str, Any]:
    key = guard.column.key
    if guard.is_update and key in params:
        return {**params, guard.bind: params[key]}
    return params


# -- the fenced statements -----------------------------------------------------------------


class _GuardsItself:
    """What makes a statement guard itself: SQLAlchemy's per-statement execution hook."""

    def _execute_on_connection(
        self, connection: Any, distilled_params: Any, execution_options: Any
    ) -> CursorResult[Any]:
        return _execute(self, connection, distilled_params, execution_options)


class FencedUpdate(_GuardsItself, Update):
    """An UPDATE of a fenced table that guards itself when a connection executes it."""

    inherit_cache = True  # read from each class's own namespace by SQLAlchemy


class FencedDelete(_GuardsItself, Delete):
    """A DELETE of a fenced table that guards itself when a connection executes it."""

    inherit_cache = True


def _run(statement: Any, connection: Any, params: Any, options: Any) -> CursorResult[Any]:
    """Execute as any statement does (``ClauseElement``'s hook), marked as checked."""
    result = ClauseElement._execute_on_connection(
        statement, connection, params, {**options, CHECKED_OPTION: True}
    )
    return cast("CursorResult[Any]", result)


def _execute(
    statement: Any, connection: Any, params: Sequence[Mapping[str, Any]], options: Any
) -> CursorResult[Any]:
    """Guard ``statement`` (a ``FencedUpdate``/``FencedDelete``), run it, check its rows."""
    COUNTS.guarded += 1
    core = statement._execution_options.get(GUARD_OPTION)
    if core is not None:  # guarded_update/guarded_delete: the guard is in the statement
        result = _run(statement, connection, params, options)
        if core.expect_rows is not None and _rowcount(connection, result) != core.expect_rows:
            _raise_core(connection, core, statement)
        return result
    column = fence_column(statement.table)
    found = None if column is None else _rewrite(statement, column)
    if found is None:  # no fence comparison: refused unless written unguarded on purpose
        merged = statement.get_execution_options().merge_with(
            connection.get_execution_options(), options
        )
        if column is None or merged.get(UNFENCED_OPTION):
            return _run(statement, connection, params, options)
        _refuse(statement, column)
    rewritten, guard = found
    rows = [_with_new_token(p, guard) for p in params]
    result = _run(rewritten, connection, rows, options)
    if _rowcount(connection, result) != (len(rows) or 1):
        _raise_flush(connection, guard, rows or [{}])
    return result


def _rowcount(conn: Any, result: Any) -> int:
    rows = result.rowcount
    if rows is None or rows < 0:
        raise RowcountUnavailable(
            f"{conn.dialect.name} ({conn.dialect.driver}) did not report the row count of a "
            "guarded statement, so the fence guard cannot be verified"
        )
    count: int = rows
    return count


#: The upsert clauses whose update writes an existing row (PostgreSQL's and SQLite's,
#: MySQL's and MariaDB's), by their SQLAlchemy class name, and what they say in SQL.
_UPSERTS = {
    "OnConflictDoUpdate": "INSERT ... ON CONFLICT DO UPDATE",
    "OnDuplicateClause": "INSERT ... ON DUPLICATE KEY UPDATE",
}


def _refuse(statement: Any, column: Column[Any]) -> NoReturn:
    COUNTS.refused += 1
    if isinstance(statement, Insert):
        verb = _UPSERTS[type(statement._post_values_clause).__name__]
    else:
        verb = "UPDATE" if isinstance(statement, Update) else "DELETE"
    raise UnfencedWriteError(
        f"{verb} of fenced table {column.table.name!r} without "
        "a guard: use fencing.sql.guarded_update/guarded_delete, or add "
        f".execution_options({UNFENCED_OPTION}=True) to write unguarded on purpose"
    )


def fence_table(table: Table, column: str) -> None:
    """Mark ``table`` as fenced by its ``column``: its UPDATE and DELETE must be guarded.

    The table's own ``update()``/``delete()`` then build ``FencedUpdate``/``FencedDelete``
    (the ORM flush builds its statements with them); the cursor check refuses every
    other UPDATE/DELETE of it. Installs the cursor check on first use.
    """
    table.info[INFO_KEY] = column
    own = vars(table)  # instance attributes shadow TableClause.update/delete for this table
    own["update"] = functools.partial(FencedUpdate, table)
    own["delete"] = functools.partial(FencedDelete, table)
    install()


# -- the cursor check ----------------------------------------------------------------------


def _check_wrapped(compiled: Any, context: Any) -> None:
    """Refuse an UPDATE/DELETE of a fenced table that runs inside another statement (an
    ORM ``select(Model).from_statement(update(...).returning(...))``, a data-modifying
    CTE) unless it is a guarded one (``guarded_update``/``guarded_delete``: the guard is
    in its WHERE clause) or the whole statement is unfenced on purpose."""
    statement = compiled.statement
    inner = [statement.element] if type(statement) is FromStatement else []
    inner += [cte.element for cte in compiled.ctes or ()]
    for write in inner:
        column = fence_column(write.table) if isinstance(write, _DML) else None
        if column is None:
            continue
        COUNTS.examined += 1
        if not (
            write._execution_options.get(GUARD_OPTION)
            or context.execution_options.get(UNFENCED_OPTION)
        ):
            _refuse(write, column)


def _check_upsert(insert: Any, context: Any) -> None:
    """Refuse ``INSERT ... ON CONFLICT DO UPDATE`` (MySQL's and MariaDB's ``ON DUPLICATE
    KEY UPDATE``) on a fenced table (its update is an UPDATE of an existing row with no
    guard) unless it is unfenced on purpose. Plain INSERTs, ``DO NOTHING`` and ``INSERT
    IGNORE`` write no existing row and pass."""
    clause = insert._post_values_clause
    if clause is None or type(clause).__name__ not in _UPSERTS:
        return
    column = fence_column(insert.table)
    if column is None:
        return
    COUNTS.examined += 1
    if not context.execution_options.get(UNFENCED_OPTION):
        _refuse(insert, column)


def _fenced_write(context: Any) -> tuple[Any, Any, Any] | None:
    """What both cursor checks look at first: the compiled UPDATE or DELETE of a fenced
    table about to run, as (compiled, statement, fence column), counted as examined;
    ``None`` for anything else. Refuses, on the way, a fenced write wrapped in another
    statement and an upsert of a fenced table."""
    compiled = context.compiled
    if compiled is None:
        return None
    element = compiled.statement  # the first statement compiled to this SQL: same shape
    if type(element) is FromStatement or getattr(compiled, "ctes", None):
        _check_wrapped(compiled, context)
    if isinstance(element, Insert):
        _check_upsert(element, context)
    if not isinstance(element, _DML):
        return None
    column = fence_column(element.table)
    if column is None:
        return None
    COUNTS.examined += 1
    return compiled, element, column


def _check_cursor(cursor: Any, statement: str, parameters: Any, context: Any) -> bool:
    """``do_execute``/``do_executemany``: True if the check ran the statement itself."""
    found = _fenced_write(context)
    if found is None:
        return False
    compiled, element, column = found
    options = context.execution_options
    if options.get(CHECKED_OPTION) or options.get(UNFENCED_OPTION):
        return False
    plan = _plan(compiled, element, column, context.dialect)
    if plan is None:
        _refuse(element, column)
    sql_from, sql_to, guard = plan
    if statement == sql_from:
        sql = sql_to
    elif statement.count(sql_from) == 1:  # a listener added a comment around it
        sql = statement.replace(sql_from, sql_to)
    else:
        _refuse(element, column)
    rows = context.compiled_parameters
    key = column.key
    if guard.is_update and any(key in p and p[guard.bind] != p[key] for p in rows):
        _refuse(element, column)  # the comparison does not bind the new token
    dialect = context.dialect
    if context.executemany:
        dialect.do_executemany(cursor, sql, parameters, context)
        sane = dialect.supports_sane_multi_rowcount
    else:
        dialect.do_execute(cursor, sql, parameters, context)
        sane = dialect.supports_sane_rowcount
    COUNTS.rewritten_at_cursor += 1
    conn = context.root_connection
    if sane and _rowcount(conn, cursor) != len(rows):
        _raise_flush(conn, guard, rows)
    return True


def _check_cursor_no_params(cursor: Any, statement: str, context: Any) -> bool:
    """``do_execute_no_params``: a statement without parameters is never a flush."""
    found = _fenced_write(context)
    if found is None:
        return False
    _, element, column = found
    options = context.execution_options
    if not (options.get(CHECKED_OPTION) or options.get(UNFENCED_OPTION)):
        _refuse(element, column)
    return False


#: compiled statement -> (its SQL, the SQL with ``<=``, guard), or None: cannot rewrite.
_plans: weakref.WeakKeyDictionary[Any, tuple[str, str, FlushGuard] | None] = (
    weakref.WeakKeyDictionary()
)


def _plan(
    compiled: Any, element: Any, column: Column[Any], dialect: Any
) -> tuple[str, str, FlushGuard] | None:
    """How to run a flush-shaped ``compiled`` with ``<=``: same binds, one operator apart."""
    try:
        return _plans[compiled]
    except KeyError:
        pass
    plan = None
    found = _rewrite(element, column)
    if found is not None:
        rewritten, guard = found
        other = rewritten.compile(
            dialect=dialect,
            column_keys=compiled.column_keys,
            for_executemany=compiled.for_executemany,
        )
        before, after = compiled.string, other.string
        if (
            other.positiontup == compiled.positiontup
            and set(other.binds) == set(compiled.binds)
            and len(after) == len(before) + 1
            and after.count("<=") == before.count("<=") + 1
        ):
            plan = (before, after, guard)
    _plans[compiled] = plan
    return plan


_CURSOR_HOOKS = (
    ("do_execute", _check_cursor),
    ("do_executemany", _check_cursor),
    ("do_execute_no_params", _check_cursor_no_params),
)
_install_lock = threading.Lock()


def install() -> None:
    """Install the cursor check on every dialect (once per process); idempotent."""
    with _install_lock:
        for name, fn in _CURSOR_HOOKS:
            if not event.contains(Engine, name, fn):
                event.listen(Engine, name, fn)


# -- refused writes ------------------------------------------------------------------------


def current_read(conn: Any, query: Any) -> Any:
    """What ``query`` reads now, as the refused statement saw it. On MySQL and MariaDB a
    plain read in a REPEATABLE READ transaction (their default) shows the transaction's
    snapshot, which may still have a row that was deleted or raised since: read the
    current rows instead (``LOCK IN SHARE MODE``, which also keeps them as read until
    the transaction ends)."""
    if conn.dialect.name in MYSQL:
        query = query.with_for_update(read=True)
    return conn.execute(query).scalar()


def _raise_flush(conn: Any, guard: FlushGuard, rows: Sequence[Mapping[str, Any]]) -> NoReturn:
    column = guard.column
    for params in rows:
        token = params.get(guard.bind)
        key = {c: params[bind] for c, bind in guard.keys}
        where = and_(*(c == value for c, value in key.items()))
        current = current_read(conn, select(column).where(where))
        if current is None or token is None or current > token:
            where_text = ", ".join(f"{c.name}={v!r}" for c, v in key.items())
            resource = f"{column.table.name} ({where_text})"
            guard_log.warning("stale token %s refused by %s (row has %s)", token, resource, current)
            write_rejected("sql", column.table.name)  # the table: rows are too many
            raise StaleRowError(int(token or 0), current, resource)
    write_rejected("sql", column.table.name)  # row count off, every row fine: vanished
    raise StaleRowError(0, None, column.table.name)


def _raise_core(conn: Any, guard: CoreGuard, statement: Any) -> NoReturn:
    column = guard.column
    token, where = _split_guard(statement._where_criteria, column)
    current = current_read(conn, select(func.max(column)).where(*where))
    resource = column.table.name
    guard_log.warning("stale token %s refused by %s (rows have %s)", token, resource, current)
    write_rejected("sql", resource)
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
