"""``FencedMixin``: ORM rows whose UPDATE and DELETE are guarded by a fence token.

Stamping ``row.fence_token = token`` marks the row as written under that token *for the
current session transaction*. At flush, every updated or deleted fenced row must carry
such a stamp, else ``UnfencedWriteError`` (nobody can forget the guard); the guard
itself is in the flush's statement (see ``_guard``). ``allow_unfenced(session)`` is the
explicit opt-out: unstamped rows are then written with ``fence_token <= <loaded token>``
(so a row rewritten by a newer holder since it was loaded is still refused).

Installed when: importing this module registers one listener, ``after_mapper_constructed``
on ``FencedMixin`` itself (SQLAlchemy runs it only when a subclass is mapped). Mapping
the first ``FencedMixin`` model then adds, once per process, ``before_flush`` and
``after_transaction_end`` on ``Session`` (the stamps above) and the guard's cursor check
(``_guard.install``), and fences that model's table (``_guard.fence_table``).

Imports the core validation, this package's guard, and SQLAlchemy's ORM.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import BigInteger, event, inspect, text
from sqlalchemy.orm import (
    Mapped,
    Mapper,
    Session,
    SessionTransaction,
    declared_attr,
    mapped_column,
    object_session,
    validates,
)
from sqlalchemy.orm.attributes import flag_modified, set_committed_value

from .._base.errors import UnfencedWriteError
from .._base.validate import check_mark_token
from ._guard import fence_table

COLUMN = "fence_token"
_STAMP = "_fencing_stamp"  # instance __dict__ key: the session generation of the stamp
_GENERATION = "fencing_generation"  # Session.info key: changes when a transaction ends
_ALLOW = "fencing_allow_unfenced"  # Session.info key set by allow_unfenced()


def fenced_mapper_args(cls: Any) -> dict[str, Any]:
    """The mapper arguments the guard needs; merge them into your own ``__mapper_args__``."""
    return {"version_id_col": cls.__table__.c[COLUMN], "version_id_generator": False}


class FencedMixin:
    """Adds ``fence_token`` (BIGINT NOT NULL, server default 0) and guards the row's writes.

    ::

        class Invoice(FencedMixin, Base):
            __tablename__ = "invoices"
            id: Mapped[int] = mapped_column(primary_key=True)

    If the model defines its own ``__mapper_args__``, include
    ``**fenced_mapper_args(cls)`` in it (a clear error says so otherwise).
    """

    fence_token: Mapped[int] = mapped_column(
        BigInteger, nullable=False, server_default=text("0"), sort_order=1000
    )

    @declared_attr.directive
    def __mapper_args__(cls) -> dict[str, Any]:
        return fenced_mapper_args(cls)

    @validates(COLUMN)
    def _fencing_stamp(self, key: str, value: Any) -> int:
        token = check_mark_token(value)
        session = object_session(self)
        self.__dict__[_STAMP] = None if session is None else _generation(session)
        return token


def _generation(session: Session) -> object:
    generation = session.info.get(_GENERATION)
    if generation is None:
        generation = session.info[_GENERATION] = object()
    return generation


def stamp(session: Session, row: FencedMixin) -> None:
    """Mark ``row`` as written under its current token in ``session``'s transaction (a claim
    has just raised the row's token in the database)."""
    row.__dict__[_STAMP] = _generation(session)


@contextmanager
def allow_unfenced(session: Any) -> Iterator[None]:
    """Within the block, flushes of ``session`` may write fenced rows without a stamp.

    Accepts a ``Session`` or an ``AsyncSession``. Unstamped rows are still written with
    ``fence_token <= <the token loaded with the row>``.
    """
    sync: Session = getattr(session, "sync_session", session)
    before = sync.info.get(_ALLOW)
    sync.info[_ALLOW] = True
    try:
        yield
    finally:
        if before is None:
            sync.info.pop(_ALLOW, None)
        else:
            sync.info[_ALLOW] = before


def _stamped(session: Session, row: FencedMixin, action: str) -> bool:
    """True if ``row`` was stamped in this transaction; raise unless unfenced writes are on."""
    generation = _generation(session)
    tag = row.__dict__.get(_STAMP, False)
    if tag is generation or tag is None:  # None: stamped while outside a session
        row.__dict__[_STAMP] = generation
        return True
    if session.info.get(_ALLOW):
        return False
    identity = inspect(row).identity
    raise UnfencedWriteError(
        f"{action} of fenced row {type(row).__name__}{identity or ''} without a fence token: "
        f"set row.{COLUMN} = token in this transaction (or use fencing.sql.allow_unfenced)"
    )


def _before_flush(session: Session, flush_context: Any, instances: Any) -> None:
    for row in session.dirty:
        if not isinstance(row, FencedMixin):
            continue
        if inspect(row).attrs[COLUMN].history.added:  # a new token: the common case
            _stamped(session, row, "UPDATE")
        elif session.is_modified(row, include_collections=False) and _stamped(
            session, row, "UPDATE"
        ):
            flag_modified(row, COLUMN)  # same token as loaded: still send it, still guard
    for row in session.deleted:
        if isinstance(row, FencedMixin) and _stamped(session, row, "DELETE"):
            set_committed_value(row, COLUMN, row.__dict__[COLUMN])  # DELETE binds this token


def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # stamps are valid for one outermost transaction
        session.info.pop(_GENERATION, None)  # the next stamp starts a new generation


def _mapped(mapper: Mapper[Any], cls: type) -> None:
    column = mapper.local_table.c[COLUMN]
    if mapper.version_id_col is not column or mapper.version_id_generator is not False:
        raise TypeError(
            f"{cls.__name__} defines __mapper_args__ without the fence guard's; "
            "add **fencing.sql.fenced_mapper_args(cls) to them"
        )
    table: Any = mapper.local_table
    fence_table(table, column.key)
    _install_session()


_SESSION_HOOKS = (
    ("before_flush", _before_flush),
    ("after_transaction_end", _after_transaction_end),
)
_install_lock = threading.Lock()


def _install_session() -> None:
    """Listen on every ``Session`` (once per process, when the first fenced model is mapped)."""
    with _install_lock:
        for name, fn in _SESSION_HOOKS:
            if not event.contains(Session, name, fn):
                event.listen(Session, name, fn)


event.listen(FencedMixin, "after_mapper_constructed", _mapped, propagate=True)
