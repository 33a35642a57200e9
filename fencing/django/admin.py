"""A read-only admin page of the fences of ``fencing.django.fence`` (with
``django.contrib.admin`` installed): each fence's name, holder, last token and the
lease's time left, by the database's clock (``_sql.CLOCK``: ``fencing.sql``'s ``db_now``,
the clock the leases are kept on). Nothing can be added, changed or deleted here: a stuck lease is
ended with ``manage.py fencing release --force NAME``, which also keeps its token
counter, so the next token is higher.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import connections
from django.db.models import ExpressionWrapper, F, FloatField
from django.db.models.expressions import RawSQL

from ._sql import CLOCK
from .models import Lease


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = ("name", "holder", "token", "lease_left")
    search_fields = ("name", "holder")
    actions = None

    def get_queryset(self, request: Any) -> Any:
        leases = super().get_queryset(request)
        now = RawSQL(CLOCK[connections[leases.db].vendor], ())
        return leases.annotate(left=ExpressionWrapper(F("expires_at") - now, FloatField()))

    @admin.display(description="lease left", ordering="left")  # type: ignore[untyped-decorator]
    def lease_left(self, lease: Any) -> str:
        """Seconds left of a live lease, or "free" (released or expired)."""
        if lease.holder is None or lease.left is None or lease.left <= 0:
            return "free"
        return f"{lease.left:.1f} s"

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
