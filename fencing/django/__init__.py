"""Fence tokens for Django models (``fencing[django]``; ``INSTALLED_APPS +=
["fencing.django"]``).

``FencedModel`` is an abstract model with a ``fence_token`` column; a row is written
only by a token at least as new as the one it holds, checked in the very ``UPDATE``
that writes it (``fenced_save``, ``save(fence_token=...)``, a ``save()`` after the
token is stamped, ``row.fence_token = token``, ``fenced_update``).
``claim`` and ``fenced_get`` raise a row's token before you read it; ``fenced_delete``
deletes with the same check. A plain ``save()`` of an existing row not stamped, ``delete()``,
``QuerySet.update()``, ``QuerySet.delete()`` and ``bulk_update()`` are refused unless
inside ``unfenced()``. ``fence(name, ttl)`` is a fence issued by Django's own database
(the ``fencing_leases`` table of ``manage.py migrate``; no Redis needed), and the admin
site gets a read-only page of those fences. docs/django.md has the quick start.

A backend-level package: it imports the core and Django, never another backend.
``FencedModel``, ``FencedManager`` and ``FencedQuerySet`` come from
``fencing.django.models``, loaded on first use (after ``django.setup()``); ``fence`` and
``DjangoIssuer`` from ``fencing.django._issuer``, loaded on first use too. Nothing here
imports SQLAlchemy: the issuer runs the text of ``fencing.sql``'s statements, generated
into ``_sql`` (see ``_issuer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base.lazy import lazy_names, needs_extra

with needs_extra("fencing.django"):  # say which extra brings a missing Django
    from ._errors import StaleRowError
    from ._guard import (
        aclaim,
        afenced_delete,
        afenced_get,
        afenced_save,
        afenced_update,
        claim,
        fenced_delete,
        fenced_get,
        fenced_save,
        fenced_update,
        unfenced,
    )

if TYPE_CHECKING:
    from ._issuer import DjangoIssuer, fence, issuer
    from .models import FencedManager, FencedModel, FencedQuerySet, Lease

_LAZY = {
    "DjangoIssuer": "fencing.django._issuer",
    "fence": "fencing.django._issuer",
    "issuer": "fencing.django._issuer",
    "Lease": "fencing.django.models",
    "FencedManager": "fencing.django.models",
    "FencedModel": "fencing.django.models",
    "FencedQuerySet": "fencing.django.models",
}

__getattr__ = lazy_names(__name__, _LAZY)

__all__ = [
    "DjangoIssuer",
    "FencedManager",
    "FencedModel",
    "FencedQuerySet",
    "Lease",
    "StaleRowError",
    "aclaim",
    "afenced_delete",
    "afenced_get",
    "afenced_save",
    "afenced_update",
    "claim",
    "fence",
    "fenced_delete",
    "fenced_get",
    "fenced_save",
    "fenced_update",
    "issuer",
    "unfenced",
]
