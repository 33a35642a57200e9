"""The Django app of ``fencing.django`` (``INSTALLED_APPS += ["fencing.django"]``)."""

from __future__ import annotations

from django.apps import AppConfig


class FencingConfig(AppConfig):
    """``fencing.django``, under the app label ``fencing``. Its one table is
    ``fencing_leases`` (the ``Lease`` model, made by ``manage.py migrate``), the leases
    of ``fencing.django.fence``; ``FencedModel`` is abstract (your models subclass it)."""

    name = "fencing.django"
    label = "fencing"
    verbose_name = "Fencing"
