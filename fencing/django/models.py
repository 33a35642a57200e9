"""``FencedModel``: the abstract model whose rows refuse writes with stale fence tokens;
``Lease``: a row of ``fencing_leases``, the table of ``fencing.django.fence``'s issuer.

Defined here, not in ``fencing.django`` itself, because Django defines models only once
its app registry is ready (``django.setup()``); ``fencing.django.FencedModel`` is this
class, loaded on first use.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import models

from .._errors import UnfencedWriteError
from ._guard import fenced_delete, fenced_save, unfenced_allowed

_OPT_OUT = (
    "pass the lease's token (save(fence_token=token), fencing.django.fenced_update, "
    "fencing.django.fenced_delete), "
    "or opt out explicitly for migrations and admin "
    "(save(unfenced=True), delete(unfenced=True), `with fencing.django.unfenced():`)"
)


class FencedQuerySet(models.QuerySet):
    """Refuses ``update()``, ``bulk_update()`` and ``delete()`` (and their ``a...`` forms)
    outside ``unfenced()``: they would write or delete fenced rows without a token."""

    def delete(self) -> tuple[int, dict[str, int]]:
        if not unfenced_allowed():
            raise UnfencedWriteError(
                f"{self.model._meta.label}: QuerySet.delete() without a fence token; {_OPT_OUT}"
            )
        deleted: tuple[int, dict[str, int]] = super().delete()
        return deleted

    delete.alters_data = True  # type: ignore[attr-defined]
    delete.queryset_only = True  # type: ignore[attr-defined]

    def update(self, **kwargs: Any) -> int:
        if not unfenced_allowed():
            raise UnfencedWriteError(
                f"{self.model._meta.label}: QuerySet.update() without a fence token; {_OPT_OUT}"
            )
        rows: int = super().update(**kwargs)
        return rows

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        if not unfenced_allowed():
            raise UnfencedWriteError(
                f"{self.model._meta.label}: bulk_update() without a fence token; {_OPT_OUT}"
            )
        rows: int = super().bulk_update(objs, fields, batch_size=batch_size)
        return rows


class FencedManager(models.Manager.from_queryset(FencedQuerySet)):  # type: ignore[misc]
    """The default manager of fenced models: its querysets are ``FencedQuerySet``."""


class FencedModel(models.Model):
    """Abstract: adds ``fence_token`` (``BIGINT``, default 0, not editable in forms) and
    guards every save of an existing row with it.

    * ``save(fence_token=token)`` is ``fencing.django.fenced_save(self, token)``;
    * a plain ``save()`` inserts a new row (always an INSERT, never an UPDATE of an
      existing row with the same key) and refuses to update one
      (``fencing.UnfencedWriteError``), unless ``save(unfenced=True)`` or inside
      ``fencing.django.unfenced()``;
    * ``delete(fence_token=token)`` is ``fencing.django.fenced_delete(self, token)``; a
      plain ``delete()`` is refused unless ``delete(unfenced=True)`` or inside
      ``unfenced()``;
    * ``objects`` is a ``FencedManager``: ``update()``, ``bulk_update()`` and
      ``delete()`` are refused the same way (``fencing.django.fenced_update`` and
      ``fenced_delete`` are the guarded ones).
    """

    fence_token = models.BigIntegerField(default=0, editable=False)

    objects = FencedManager()

    class Meta:
        abstract = True

    def save(
        self, *args: Any, fence_token: int | None = None, unfenced: bool = False, **kwargs: Any
    ) -> None:
        if fence_token is not None:
            if args or set(kwargs) - {"using", "update_fields"}:
                raise TypeError("save(fence_token=...) takes only using= and update_fields=")
            fenced_save(self, fence_token, **kwargs)
        elif unfenced or unfenced_allowed():
            super().save(*args, **kwargs)
        elif self._state.adding and not args and not kwargs.get("force_update"):
            # an INSERT, never Django's "UPDATE if the key exists, else INSERT"
            kwargs["force_insert"] = kwargs.get("force_insert") or True
            if kwargs.get("update_fields") is not None:
                raise UnfencedWriteError(f"{self._meta.label}: update_fields on a new row")
            super().save(**kwargs)
        else:
            raise UnfencedWriteError(
                f"{self._meta.label} pk={self.pk!r}: save() of an existing row without a "
                f"fence token; {_OPT_OUT}"
            )

    async def asave(
        self, *args: Any, fence_token: int | None = None, unfenced: bool = False, **kwargs: Any
    ) -> None:
        await sync_to_async(self.save)(*args, fence_token=fence_token, unfenced=unfenced, **kwargs)

    def delete(
        self,
        using: str | None = None,
        keep_parents: bool = False,
        *,
        fence_token: int | None = None,
        unfenced: bool = False,
    ) -> tuple[int, dict[str, int]]:
        deleted: tuple[int, dict[str, int]]
        if fence_token is not None:
            if keep_parents:
                raise TypeError("delete(fence_token=...) takes only using=")
            deleted = fenced_delete(self, fence_token, using=using)
        elif unfenced or unfenced_allowed():
            deleted = super().delete(using=using, keep_parents=keep_parents)
        else:
            raise UnfencedWriteError(
                f"{self._meta.label} pk={self.pk!r}: delete() without a fence token; {_OPT_OUT}"
            )
        return deleted

    async def adelete(
        self,
        using: str | None = None,
        keep_parents: bool = False,
        *,
        fence_token: int | None = None,
        unfenced: bool = False,
    ) -> tuple[int, dict[str, int]]:
        deleted: tuple[int, dict[str, int]] = await sync_to_async(self.delete)(
            using, keep_parents, fence_token=fence_token, unfenced=unfenced
        )
        return deleted


class Lease(models.Model):
    """One fence of ``fencing.django.fence``'s issuer: a row of ``fencing_leases`` (the
    app's migration creates it; the same table as ``fencing.sql``'s, see
    ``fencing.sql.leases``). ``token`` is the last token issued; ``holder`` and
    ``expires_at`` (seconds since the epoch by the database's clock) the lease, empty
    when free. Written only by the issuer's statements; here to be read (the admin page,
    your queries)."""

    name = models.CharField(max_length=256, primary_key=True)
    token = models.BigIntegerField(default=0)
    holder = models.CharField(max_length=64, null=True)
    expires_at = models.FloatField(null=True)

    class Meta:
        db_table = "fencing_leases"
        ordering = ("name",)
        verbose_name = "fence"

    def __str__(self) -> str:
        return str(self.name)
