"""``FencedModel``: the abstract model whose rows refuse writes with stale fence tokens;
``Lease``: a row of ``fencing_leases``, the table of ``fencing.django.fence``'s issuer.

Defined here, not in ``fencing.django`` itself, because Django defines models only once
its app registry is ready (``django.setup()``); ``fencing.django.FencedModel`` is this
class, loaded on first use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from asgiref.sync import sync_to_async
from django.db import models
from django.db.models.query_utils import DeferredAttribute

from .._base.errors import UnfencedWriteError
from ._guard import fenced_delete, fenced_save, unfenced_allowed

_OPT_OUT = (
    "stamp the lease's token (row.fence_token = token; row.save()) or pass it "
    "(save(fence_token=token), fencing.django.fenced_update, fencing.django.fenced_delete), "
    "or opt out explicitly for migrations and admin "
    "(save(unfenced=True), delete(unfenced=True), `with fencing.django.unfenced():`)"
)


#: Keys in a ``FencedModel`` instance's ``__dict__``: whether the program set its
#: ``fence_token`` since Django last loaded it (a stamp), and whether Django is loading
#: values into it right now (its assignments are no stamp).
_STAMPED = "_fencing_stamped"
_LOADING = "_fencing_loading"


class _TokenAttribute(DeferredAttribute):
    """``fence_token`` on a ``FencedModel`` instance. An assignment by the program
    (``row.fence_token = token``) is a stamp: the instance's next ``save()`` of its row is
    the guarded write with that token. The values Django loads (``__init__``, which
    ``from_db`` calls, and ``refresh_from_db``) are no stamp and clear one: a row loaded
    and not stamped is never saved unguarded, whatever its token."""

    def __set__(self, instance: Any, value: Any) -> None:
        data = instance.__dict__
        data[self.field.attname] = value
        if data.get(_LOADING):
            data.pop(_STAMPED, None)
        else:
            data[_STAMPED] = True


@contextmanager
def _loading(instance: models.Model) -> Iterator[None]:
    """Within the block, Django's assignments to ``fence_token`` are loads, not stamps."""
    data = instance.__dict__
    outer = data.get(_LOADING)
    data[_LOADING] = True
    try:
        yield
    finally:
        if not outer:
            data.pop(_LOADING, None)


def _fence_token_field() -> models.BigIntegerField:
    """``fence_token``: a plain ``BigIntegerField`` to migrations (its ``deconstruct`` is
    Django's), whose attribute on instances is ``_TokenAttribute`` (copied with the
    field to every concrete subclass)."""
    field = models.BigIntegerField(default=0, editable=False)
    field.descriptor_class = _TokenAttribute
    return field


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
    * so is a ``save()`` after a stamp, ``row.fence_token = token`` (as rows of
      ``fencing.sql.FencedMixin`` are written): an assignment by the program since Django
      last loaded the instance (``from_db``, ``refresh_from_db``, ``claim``); the stamp
      stays until the next load, so later saves are guarded by the same token;
    * a plain ``save()`` inserts a new row (always an INSERT, never an UPDATE of an
      existing row with the same key) and refuses to update one not stamped
      (``fencing.UnfencedWriteError``), unless ``save(unfenced=True)`` or inside
      ``fencing.django.unfenced()``;
    * ``delete(fence_token=token)`` is ``fencing.django.fenced_delete(self, token)``; a
      plain ``delete()`` is refused unless ``delete(unfenced=True)`` or inside
      ``unfenced()``;
    * ``objects`` is a ``FencedManager``: ``update()``, ``bulk_update()`` and
      ``delete()`` are refused the same way (``fencing.django.fenced_update`` and
      ``fenced_delete`` are the guarded ones).
    """

    fence_token = _fence_token_field()

    objects = FencedManager()

    class Meta:
        abstract = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__dict__.pop(_STAMPED, None)  # the values given or loaded are not a stamp

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        with _loading(self):  # a reloaded fence_token clears the stamp
            super().refresh_from_db(*args, **kwargs)

    @property
    def fence_stamped(self) -> bool:
        """Whether the program set ``fence_token`` since Django last loaded the instance:
        a ``save()`` of its existing row is then guarded by that token."""
        return bool(self.__dict__.get(_STAMPED))

    def save(
        self, *args: Any, fence_token: int | None = None, unfenced: bool = False, **kwargs: Any
    ) -> None:
        stamped = fence_token is None and not unfenced and not self._state.adding
        stamped = stamped and self.fence_stamped
        if fence_token is not None or stamped:
            if args or set(kwargs) - {"using", "update_fields"}:
                raise TypeError("a fenced save() takes only using= and update_fields=")
            token: Any = self.fence_token if stamped else fence_token  # checked there
            fenced_save(self, token, **kwargs)
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
