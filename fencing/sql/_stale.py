"""Errors of the SQL guard (``FencedMixin``, ``guarded_update``, the claims): a stale
token refused by a row, a driver that cannot say how many rows it changed.

Imports the core errors and SQLAlchemy's ORM, which ``StaleDataError`` brings: apart from
``_errors`` (the issuer's setup errors), so an issuer alone does not load the ORM.

``StaleRowError`` is both a ``fencing.StaleTokenError`` and a SQLAlchemy
``StaleDataError``: handlers written for optimistic concurrency keep working, and the
session is rolled back exactly as SQLAlchemy does for a ``StaleDataError`` in a flush.
"""

from __future__ import annotations

from sqlalchemy.orm.exc import StaleDataError

from .._base.errors import FencingError, StaleTokenError


class StaleRowError(StaleTokenError, StaleDataError):
    """A guarded UPDATE/DELETE matched no row: ``current`` (the row's token) > ``token``.

    ``current`` is ``None`` when the row no longer exists. Nothing was written.
    """

    def __init__(self, token: int, current: int | None, resource: str = "") -> None:
        StaleTokenError.__init__(self, token, current, resource)
        if current is None:
            where = f" on {resource}" if resource else ""
            self.args = (f"fence token {token} rejected{where}: the row no longer exists",)


class RowcountUnavailable(FencingError):
    """The database driver did not report how many rows a guarded statement changed.

    The guard cannot be verified, so it is an error, never a warning.
    """
