"""The test app's models: ``Account``, a ``FencedModel``."""

from __future__ import annotations

from django.db import models

from fencing.django.models import FencedModel


class Account(FencedModel):
    name = models.CharField(max_length=50)
    balance = models.IntegerField(default=0)
    note = models.CharField(max_length=50, default="")

    class Meta:
        app_label = "django_app"
