"""OpenTelemetry metrics and traces of fencing: the instrument names and ``configure``.

fencing records through the ``opentelemetry-api`` package (``pip install
'fencing[otel]'``) and does nothing until the application sets an OpenTelemetry SDK;
``import fencing`` never imports OpenTelemetry. docs/observability.md lists the
instruments and shows a Prometheus setup; ``fencing._base.metrics`` records them.

Imports the core's ``_base.metrics`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base.metrics import (
    ACQUIRE_DURATION,
    HELD_DURATION,
    LEASES_LOST,
    RENEWALS,
    WRITES_REJECTED,
    Settings,
)
from ._base.metrics import configure as _configure

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider


def configure(
    *,
    names: bool = False,
    spans: bool = True,
    meter_provider: MeterProvider | None = None,
    tracer_provider: TracerProvider | None = None,
) -> None:
    """Choose what fencing's telemetry records; each call replaces the last one's choice.

    ``names=True`` adds the fence name (``fencing.name``) to the lease instruments and
    the guarded resource's name (``fencing.resource``) to ``fencing.writes.rejected``.
    Off by default: every distinct name is a time series of its own, so turn it on only
    when the application uses a small, fixed set of fence names. Spans always carry the
    fence name.

    ``spans=False`` records no spans even when a tracer provider is set (the metrics
    stay): the Python SDK spends tens of microseconds on each span.

    ``meter_provider``/``tracer_provider``: record into these instead of the global
    providers (``None``: the global ones, as set by ``opentelemetry.metrics
    .set_meter_provider`` and ``opentelemetry.trace.set_tracer_provider``).
    """
    for flag, value in (("names", names), ("spans", spans)):
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be a bool, not {type(value).__name__}")
    for what, kind, provider, method in (
        ("meter_provider", "MeterProvider", meter_provider, "get_meter"),
        ("tracer_provider", "TracerProvider", tracer_provider, "get_tracer"),
    ):
        if provider is not None and not callable(getattr(provider, method, None)):
            got = type(provider).__name__
            raise TypeError(f"{what} must be an OpenTelemetry {kind}, not {got}")
    _configure(Settings(names, spans, meter_provider, tracer_provider))


__all__ = [
    "ACQUIRE_DURATION",
    "HELD_DURATION",
    "LEASES_LOST",
    "RENEWALS",
    "WRITES_REJECTED",
    "configure",
]
