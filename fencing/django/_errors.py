"""The Django guard's refusal (no Django import: the core's error tree only)."""

from __future__ import annotations

from .._base.errors import StaleTokenError


class StaleRowError(StaleTokenError):
    """A guarded write or claim of a ``FencedModel`` row matched no row it could change.

    ``current`` is the row's token, read in the same transaction after the refused
    statement (above ``token``), or ``None`` when the row does not exist. Nothing was
    written.
    """

    def __init__(self, token: int, current: int | None, resource: str = "") -> None:
        super().__init__(token, current, resource)
        if current is None:
            where = f" on {resource}" if resource else ""
            self.args = (f"fence token {token} rejected{where}: the row does not exist",)
