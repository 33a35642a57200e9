"""Metrics and traces through OpenTelemetry, at no cost until the application sets an SDK.

Only the ``opentelemetry-api`` package is used (the ``fencing[otel]`` extra), and fencing
never imports it by itself. Every hot path (``acquire``, ``release``, the renewals, the
guards) asks ``live()`` first: until the application has imported OpenTelemetry that
is one dictionary look-up, then two attribute reads while no provider is set (the API's
globals, see ``METER_GLOBAL``). Once a meter or tracer provider is set (``set_meter_provider``,
``set_tracer_provider``, the ``OTEL_PYTHON_*_PROVIDER`` variables, or providers passed to
``fencing.metrics.configure``), the instruments below are made and kept for the life of
the process (the API sets a global provider once). docs/observability.md shows a setup.

Instruments (meter ``fencing``), each with ``fencing.backend`` (the issuer's package:
``redis``, ``sql``, ``memory``...; an issuer from outside fencing: its class's dotted
name), and ``fencing.name`` (the fence name) only after ``configure(names=True)``:

- ``fencing.acquire.duration`` (histogram, s): ``fencing.outcome`` = ``acquired`` |
  ``timeout`` (``AcquireTimeout``, or the caller stopped waiting: a cancelled task) |
  ``error``;
- ``fencing.lease.held.duration`` (histogram, s): from the grant to a release that found
  the lease still held;
- ``fencing.renewals`` (counter): ``fencing.outcome`` = ``renewed`` | ``lost`` | ``error``;
- ``fencing.leases.lost`` (counter): a lease this process held was found lost (by a
  renewal, by the release, or presumed after a whole ttl of failed renewals);
- ``fencing.writes.rejected`` (counter, no backend): ``fencing.guard`` = ``sql`` |
  ``file`` (``FileStore``) | ``callable`` (``guard``, with ``fencing.mark`` = ``memory``
  | ``file`` | ``redis``), and ``fencing.resource`` after ``configure(names=True)``.
- ``fencing.permits.used`` (up-down counter): semaphore permits this process holds
  (acquired, not yet released nor found lost by its renew or release);
- ``fencing.wait.duration`` (histogram, s): how long a semaphore's or a limiter's
  ``acquire`` took, ``fencing.kind`` = ``semaphore`` | ``limiter`` and ``fencing.outcome``
  as for ``fencing.acquire.duration``;
- ``fencing.admissions.refused`` (counter): a limiter's ``try_acquire``/``attempt``
  refused, or its ``acquire`` gave up (``AcquireTimeout``); ``fencing.window``.
  These three name the semaphore or limiter in ``fencing.name`` after
  ``configure(names=True)``.

Spans (tracer ``fencing``, once a tracer provider is set, unless ``configure(spans=False)``):
``fencing.acquire`` (current while it runs, so the issuer's own client spans nest in it),
``fencing.renew``, ``fencing.release``; each carries ``fencing.name``, ``fencing.backend``,
the token and the outcome.

Imports the errors module (a leaf) and the standard library (opentelemetry-api on first
use, see above).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from time import perf_counter
from types import SimpleNamespace, TracebackType
from typing import TYPE_CHECKING, Any

from .errors import AcquireTimeout

if TYPE_CHECKING:  # types only: making Protocol classes costs import time
    from typing import Protocol

    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

    class Port(Protocol):
        """What telemetry reads from a fence's port (``Calls``/``AsyncCalls``)."""

        @property
        def name(self) -> str: ...

        @property
        def issuer(self) -> Any: ...

    class Ending(Protocol):
        """A renew or release step: its lease (token, holder) and, once done, its result."""

        token: int
        holder: str
        result: bool


ACQUIRE_DURATION = "fencing.acquire.duration"
HELD_DURATION = "fencing.lease.held.duration"
RENEWALS = "fencing.renewals"
LEASES_LOST = "fencing.leases.lost"
WRITES_REJECTED = "fencing.writes.rejected"
PERMITS_USED = "fencing.permits.used"
WAIT_DURATION = "fencing.wait.duration"
ADMISSIONS_REFUSED = "fencing.admissions.refused"

#: Histogram buckets in seconds, given to the SDK as advice (its defaults are for ms).
ACQUIRE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0, 60.0)  # fmt: skip
HELD_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
                900.0, 3600.0)  # fmt: skip

#: Where the API keeps its global providers. Read directly because the public getters
#: look at ``os.environ`` on every call, which would cost an application without an SDK
#: more than the whole check. An API version that moves one is taken as "set": every
#: operation then goes through the API's proxies (correct, only slower), and
#: tests/test_metrics.py, which pins these names, fails.
METER_GLOBAL = ("opentelemetry.metrics._internal", "_METER_PROVIDER")
TRACER_GLOBAL = ("opentelemetry.trace", "_TRACER_PROVIDER")
_MODULES = sys.modules

#: Leases granted while telemetry was live: holder id -> ``perf_counter()`` at the grant.
#: Holder ids are unique per acquisition, so a release finds its own lease's start; one
#: never released through the ``Release`` step (its holder crashed or forgot it, or
#: released it another way: ``FencedLock``) is dropped once ``MAX_GRANTED`` newer ones are
#: waiting. Never rebound (``_protocol`` keeps a reference).
GRANTED: dict[str, float] = {}
MAX_GRANTED = 10_000


class Settings:
    """What ``fencing.metrics.configure`` chose (the defaults until it is called)."""

    def __init__(
        self,
        names: bool = False,
        spans: bool = True,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.names = names
        self.spans = spans
        self.meter_provider = meter_provider
        self.tracer_provider = tracer_provider


_settings = Settings()
_live: Telemetry | None = None
_lock = threading.Lock()
#: The API modules that hold the global providers once the application has imported them
#: (``None`` before; a ``SimpleNamespace`` saying "set" for one whose variable moved).
_meter_api: Any = None
_trace_api: Any = None
#: A provider named by environment variable (the API loads it on first request).
_FROM_ENVIRONMENT = any(
    v in os.environ for v in ("OTEL_PYTHON_METER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER")
)


def live() -> Telemetry | None:
    """The instruments once a provider is set, else ``None``: the hot paths' one check."""
    if _live is not None:
        return _live
    if _meter_api is not None and _trace_api is not None:  # the API is here: no SDK yet?
        if (
            _meter_api._METER_PROVIDER is None
            and _trace_api._TRACER_PROVIDER is None
            and not _FROM_ENVIRONMENT
        ):
            return None
        return _wake()
    return _wake() if "opentelemetry" in _MODULES else None


def configure(settings: Settings) -> None:
    """Replace the settings; the instruments are made again on first use."""
    global _live, _settings
    with _lock:
        _settings = settings
        _live = None
        GRANTED.clear()
        if settings.meter_provider is not None or settings.tracer_provider is not None:
            _live = Telemetry(settings)


def _wake() -> Telemetry | None:
    """Make the instruments if the application has set a provider since the last look."""
    global _live
    if _meter_api is None or _trace_api is None:
        _find_api()
    if not (
        (_meter_api is not None and _meter_api._METER_PROVIDER is not None)
        or _tracing_set()
        or _FROM_ENVIRONMENT
    ):
        return None
    with _lock:
        if _live is None:
            _live = Telemetry(_settings)
        return _live


def _tracing_set() -> bool:
    return _trace_api is not None and _trace_api._TRACER_PROVIDER is not None


def _find_api() -> None:
    global _meter_api, _trace_api
    if _meter_api is None:
        _meter_api = _api_module(*METER_GLOBAL)
    if _trace_api is None:
        _trace_api = _api_module(*TRACER_GLOBAL)


def _api_module(name: str, variable: str) -> Any:
    """The module ``name`` if imported (and done importing), with its ``variable``."""
    module = _MODULES.get(name)
    if module is None or getattr(module.__spec__, "_initializing", False):
        return None
    if hasattr(module, variable):
        return module
    return SimpleNamespace(**{variable: True})


def adapted(issuer: object) -> object:
    """The issuer an adapter stands for (its ``adapted``: a read-write lock's side, see
    ``fencing._primitives.rwlock.Side``), else ``issuer`` itself: what telemetry names."""
    return getattr(issuer, "adapted", issuer)


def backend_of(issuer: object) -> str:
    """``fencing.backend`` of an issuer: its package under fencing, else its class's name
    (of the issuer an adapter stands for)."""
    kind = type(adapted(issuer))
    found = _BACKENDS.get(kind)
    if found is None:
        parts = kind.__module__.split(".")
        if parts[0] == "fencing" and len(parts) > 1:
            found = parts[1].lstrip("_")
        else:
            found = f"{kind.__module__}.{kind.__qualname__}"
        _BACKENDS[kind] = found
    return found


_BACKENDS: dict[type, str] = {}


def _version() -> str:
    """fencing's version for the instrumentation scope (the installed distribution's)."""
    from importlib import metadata

    try:
        return metadata.version("fencing")
    except metadata.PackageNotFoundError:  # run from a source tree
        return ""


class Telemetry:
    """The instruments and the tracer, made once a provider is present."""

    def __init__(self, settings: Settings) -> None:
        from opentelemetry import metrics, trace

        version = _version()
        meter = metrics.get_meter("fencing", version, settings.meter_provider)
        self.acquire_duration = meter.create_histogram(
            ACQUIRE_DURATION,
            "s",
            "Time an acquire took, by outcome (acquired, timeout, error)",
            explicit_bucket_boundaries_advisory=ACQUIRE_BUCKETS,
        )
        self.held_duration = meter.create_histogram(
            HELD_DURATION,
            "s",
            "Time from a lease's grant to its release",
            explicit_bucket_boundaries_advisory=HELD_BUCKETS,
        )
        self.renewals = meter.create_counter(
            RENEWALS, "{renewal}", "Lease renewals, by outcome (renewed, lost, error)"
        )
        self.leases_lost = meter.create_counter(
            LEASES_LOST, "{lease}", "Leases found lost by their holder (renew, release, expiry)"
        )
        self.writes_rejected = meter.create_counter(
            WRITES_REJECTED, "{write}", "Writes refused by a guard: a stale token was stopped"
        )
        self.permits_used = meter.create_up_down_counter(
            PERMITS_USED, "{permit}", "Semaphore permits held by this process"
        )
        self.wait_duration = meter.create_histogram(
            WAIT_DURATION,
            "s",
            "Time a semaphore's or a limiter's acquire took, by kind and outcome",
            explicit_bucket_boundaries_advisory=ACQUIRE_BUCKETS,
        )
        self.admissions_refused = meter.create_counter(
            ADMISSIONS_REFUSED, "{request}", "Limiter requests refused, or acquires given up"
        )
        self.names = settings.names
        self._attributes: dict[tuple[type, str | None], Mapping[str, str]] = {}
        self._trace = trace
        self._version = version
        self._tracer_provider = settings.tracer_provider
        self._spans = settings.spans
        self._tracer: Tracer | None = None

    def tracer(self) -> Tracer | None:
        """The tracer once a tracer provider is set (or given), else ``None``."""
        if (
            self._tracer is None
            and self._spans
            and (self._tracer_provider is not None or _tracing_set() or _FROM_ENVIRONMENT)
        ):
            self._tracer = self._trace.get_tracer("fencing", self._version, self._tracer_provider)
        return self._tracer

    def attributes(self, calls: Port, outcome: str | None = None) -> Mapping[str, str]:
        """A lease instrument's attributes: the backend, the name if asked, the outcome.

        Without names they are few (issuer classes times outcomes): made once each.
        """
        key = (type(adapted(calls.issuer)), outcome)
        found = None if self.names else self._attributes.get(key)
        if found is None:
            found = {"fencing.backend": backend_of(calls.issuer)}
            if self.names:
                found["fencing.name"] = calls.name
            if outcome is not None:
                found["fencing.outcome"] = outcome
            if not self.names:
                self._attributes[key] = found
        return found

    def span(self, what: str, calls: Port, token: int | None) -> AbstractContextManager[Any]:
        """A span ``fencing.<what>`` made current for the block (a no-op without tracer)."""
        tracer = self.tracer()
        if tracer is None:
            return _NO_SPAN
        attributes: dict[str, Any] = {
            "fencing.name": calls.name,
            "fencing.backend": backend_of(calls.issuer),
        }
        if token is not None:
            attributes["fencing.token"] = token
        return tracer.start_as_current_span(f"fencing.{what}", attributes=attributes)

    def lost(self, calls: Port) -> None:
        """Count a lease of ``calls``'s fence found lost."""
        self.leases_lost.add(1, self.attributes(calls))


class _NoSpan:
    """The span of a block when no tracer provider is set: records nothing."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_attribute(self, key: str, value: object) -> None:
        return None


_NO_SPAN: AbstractContextManager[Any] = _NoSpan()


# -- the hooks the hot paths call -----------------------------------------------------------


class AcquireWatch:
    """One observed acquire: its span, its duration by outcome, its lease's start."""

    __slots__ = ("_calls", "_holder", "_scope", "_span", "_start", "_telemetry", "_token")

    def __init__(self, telemetry: Telemetry, calls: Port, holder: str) -> None:
        self._telemetry = telemetry
        self._calls = calls
        self._holder = holder
        self._token: int | None = None

    def __enter__(self) -> AcquireWatch:
        self._scope = scope = self._telemetry.span("acquire", self._calls, None)
        self._span = None if scope is _NO_SPAN else scope.__enter__()
        self._start = perf_counter()
        return self

    def granted(self, token: int) -> int:
        """Note the token the acquire returned; returns it."""
        self._token = token
        return token

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        end = perf_counter()
        telemetry = self._telemetry
        if exc_type is None:
            outcome = "acquired"
            _remember(self._holder, end)
        elif issubclass(exc_type, AcquireTimeout) or not issubclass(exc_type, Exception):
            outcome = "timeout"  # the deadline passed, or the caller stopped waiting
        else:
            outcome = "error"
        telemetry.acquire_duration.record(
            end - self._start, telemetry.attributes(self._calls, outcome=outcome)
        )
        span = self._span
        if span is not None:
            span.set_attribute("fencing.outcome", outcome)
            if self._token is not None:
                span.set_attribute("fencing.token", self._token)
            self._scope.__exit__(exc_type, exc, tb)


def _remember(holder: str, start: float) -> None:
    """Note a lease's start; past ``MAX_GRANTED``, drop the oldest tenth (one copy of the
    keys, atomic under the GIL, for many grants: other threads insert meanwhile)."""
    GRANTED[holder] = start
    if len(GRANTED) > MAX_GRANTED:
        with _lock:
            oldest = list(GRANTED)[: len(GRANTED) - MAX_GRANTED * 9 // 10]
            for stale in oldest:
                GRANTED.pop(stale, None)


@contextmanager
def renewing(calls: Port, step: Ending) -> Iterator[None]:
    """Around a renewal: count it by outcome, a lost lease too; its span."""
    telemetry = live()
    if telemetry is None:
        yield
        return
    with telemetry.span("renew", calls, step.token) as span:
        try:
            yield
        except Exception:
            telemetry.renewals.add(1, telemetry.attributes(calls, outcome="error"))
            raise
        outcome = "renewed" if step.result else "lost"
        span.set_attribute("fencing.outcome", outcome)
        telemetry.renewals.add(1, telemetry.attributes(calls, outcome=outcome))
        if not step.result:
            GRANTED.pop(step.holder, None)
            telemetry.lost(calls)


@contextmanager
def releasing(calls: Port, step: Ending) -> Iterator[None]:
    """Around the release of a lease granted under telemetry (``step.holder in GRANTED``):
    its held time, or its loss; its span."""
    telemetry = live()
    start = GRANTED.pop(step.holder, None)
    if telemetry is None or start is None:
        yield
        return
    with telemetry.span("release", calls, step.token) as span:
        yield
        end = perf_counter()
        span.set_attribute("fencing.outcome", "released" if step.result else "lost")
        if step.result:
            telemetry.held_duration.record(end - start, telemetry.attributes(calls))
        else:
            telemetry.lost(calls)


def lease_lost(calls: Port, holder: str | None) -> None:
    """A lease presumed lost without an issuer's answer (renewals failed for a whole ttl,
    or the renewal crashed)."""
    if holder is not None:
        GRANTED.pop(holder, None)
    telemetry = live()
    if telemetry is not None:
        telemetry.lost(calls)


def write_rejected(guard: str, resource: str, mark: str | None = None) -> None:
    """A guard refused a stale token (``fencing.writes.rejected``)."""
    telemetry = live()
    if telemetry is None:
        return
    attributes = {"fencing.guard": guard}
    if mark is not None:
        attributes["fencing.mark"] = mark
    if telemetry.names:
        attributes["fencing.resource"] = resource
    telemetry.writes_rejected.add(1, attributes)


# -- semaphores and limiters ----------------------------------------------------------------


def _named(telemetry: Telemetry, source: object, name: str, **extra: str) -> dict[str, str]:
    """A semaphore's or limiter's attributes: its backend (the issuer's or store's), its
    name after ``configure(names=True)``, and ``fencing.<key>`` for each of ``extra``."""
    attributes = {"fencing.backend": backend_of(source)}
    if telemetry.names:
        attributes["fencing.name"] = name
    attributes.update({f"fencing.{key}": value for key, value in extra.items()})
    return attributes


@contextmanager
def waiting(kind: str, source: object, name: str, window: str | None = None) -> Iterator[None]:
    """Around a semaphore's or limiter's ``acquire``: its duration by outcome
    (``fencing.wait.duration``); a limiter's (``window``) that gave up is a refused
    admission."""
    telemetry = live()
    if telemetry is None:
        yield
        return
    start = perf_counter()
    outcome = "timeout"  # also when the caller stopped waiting: a cancelled task
    try:
        yield
        outcome = "acquired"
    except AcquireTimeout:
        if window is not None:
            admission_refused(source, name, window)
        raise
    except Exception:
        outcome = "error"
        raise
    finally:
        attributes = _named(telemetry, source, name, kind=kind, outcome=outcome)
        telemetry.wait_duration.record(perf_counter() - start, attributes)


def permits_changed(source: object, name: str, delta: int) -> bool:
    """Count ``delta`` permits held (``fencing.permits.used``); whether telemetry is live."""
    telemetry = live()
    if telemetry is None:
        return False
    telemetry.permits_used.add(delta, _named(telemetry, source, name))
    return True


def admission_refused(source: object, name: str, window: str) -> None:
    """A limiter refused one request (``fencing.admissions.refused``)."""
    telemetry = live()
    if telemetry is not None:
        telemetry.admissions_refused.add(1, _named(telemetry, source, name, window=window))
