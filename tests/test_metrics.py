"""OpenTelemetry metrics and spans, read with the SDK's in-memory reader and exporter.

One test per instrument and outcome, on real issuers (memory, redis-server, a SQLite
file) and every guard kind; plus what must cost nothing: ``import fencing`` never
imports OpenTelemetry, and an application that sets its SDK after fencing's first use
still gets every instrument (subprocesses: the API's global providers are set once).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fail_fast import failing_fast
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sql_models import make_models
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from waiting import PATIENCE

import fencing
import fencing.aio
import fencing.metrics
from fencing import (
    AcquireTimeout,
    Fence,
    FenceUnavailable,
    FileMark,
    FileStore,
    LeaseLost,
    MemoryIssuer,
    RedisMark,
    StaleTokenError,
    guard,
)
from fencing._base import metrics as _metrics
from fencing.issuer import Issuer
from fencing.redis import FencedLock, RedisIssuer
from fencing.sql import SqlIssuer, guarded_update
from fencing.testing.contract import AsyncFenceContract, FenceContract, MakeAsyncFence, MakeFence
from fencing.testing.servers import RedisServer
from fencing.testing.simulation import VirtualClock

ACQUIRE = "fencing.acquire.duration"
HELD = "fencing.lease.held.duration"
RENEWALS = "fencing.renewals"
LOST = "fencing.leases.lost"
REJECTED = "fencing.writes.rejected"


class Telemetry:
    """An SDK meter and tracer provider given to fencing, read back in memory."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.spans_out = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                found += [p for m in scope.metrics if m.name == name for p in m.data.data_points]
        return found

    def value(self, instrument: str, /, **attributes: str) -> float:
        """A counter's total, or a histogram's count, over the points that have
        ``fencing.<key>=value`` for every keyword."""
        wanted = {f"fencing.{k}": v for k, v in attributes.items()}
        total: float = 0
        for point in self.points(instrument):
            if wanted.items() <= dict(point.attributes or {}).items():
                if isinstance(point, HistogramDataPoint):
                    total += point.count
                else:
                    assert isinstance(point, NumberDataPoint)
                    total += point.value
        return total

    def spans(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans_out.get_finished_spans() if s.name == name]


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    fencing.metrics.configure(
        meter_provider=telemetry.meter_provider, tracer_provider=telemetry.tracer_provider
    )
    yield telemetry
    fencing.metrics.configure()
    telemetry.meter_provider.shutdown()
    telemetry.tracer_provider.shutdown()


# -- real issuers: memory, redis-server, a SQLite file ---------------------------------------

BACKENDS = ["memory", "redis", "sql"]


@pytest.fixture(params=BACKENDS)
def issuer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Issuer]:
    if request.param == "memory":
        yield MemoryIssuer()
    elif request.param == "redis":
        client: redis.Redis = request.getfixturevalue("redis_client")
        yield RedisIssuer(client)
    else:
        sql = SqlIssuer(f"sqlite:///{tmp_path / 'leases.db'}")
        yield sql
        sql.engine.dispose()


def steal(fence: Fence, token: int) -> int:
    """End ``fence``'s lease behind its back (as a force-release would) and let another
    holder take the name: the old holder's next renew or release finds its lease lost."""
    assert fence.issuer.release(fence.name, token, fence._holders[token])
    return Fence(fence.issuer, fence.name, fence.ttl).acquire(timeout=0)


def test_acquired_and_held(otel: Telemetry, issuer: Issuer, request: pytest.FixtureRequest) -> None:
    backend = _metrics.backend_of(issuer)
    assert backend == request.node.callspec.params["issuer"]  # the issuer's package
    fence = Fence(issuer, "orders", 10)
    token = fence.acquire()
    assert otel.value(ACQUIRE, backend=backend, outcome="acquired") == 1
    assert otel.value(HELD) == 0  # recorded at release
    fence.release(token)
    assert otel.value(HELD, backend=backend) == 1
    (held,) = otel.points(HELD)
    assert held.sum > 0
    assert otel.value(LOST) == 0


def test_a_read_write_lock_is_named_by_its_issuers_backend(
    otel: Telemetry, issuer: Issuer, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["issuer"]
    rw = fencing.RWLock(issuer, "catalog", 10)  # type: ignore[arg-type]
    rw.read.release(rw.read.acquire())
    rw.write.release(rw.write.acquire())
    assert otel.value(ACQUIRE, backend=backend, outcome="acquired") == 2
    assert otel.value(HELD, backend=backend) == 2


def test_timeout(otel: Telemetry, issuer: Issuer) -> None:
    fence = Fence(issuer, "orders", 10)
    fence.acquire()
    with pytest.raises(AcquireTimeout):
        fence.acquire(timeout=0)
    with pytest.raises(AcquireTimeout):
        fence.acquire(timeout=0.05)
    backend = _metrics.backend_of(issuer)
    assert otel.value(ACQUIRE, backend=backend, outcome="timeout") == 2
    assert otel.value(ACQUIRE, outcome="acquired") == 1


def test_error_when_the_issuer_is_unreachable(
    otel: Telemetry, redis_factory: Callable[..., RedisServer]
) -> None:
    server = redis_factory()
    fence = fencing.RedisFence(failing_fast(server.port), "orders", 10)
    token = fence.acquire()
    server.close()
    with pytest.raises(FenceUnavailable):
        fence.acquire(timeout=0)
    with pytest.raises(FenceUnavailable):
        fence.renew(token)
    assert otel.value(ACQUIRE, backend="redis", outcome="error") == 1
    assert otel.value(RENEWALS, backend="redis", outcome="error") == 1
    assert otel.value(LOST) == 0  # unknown is not lost


def test_renewed(otel: Telemetry, issuer: Issuer) -> None:
    fence = Fence(issuer, "orders", 10)
    token = fence.acquire()
    fence.renew(token)
    fence.renew(token, ttl=20)
    assert otel.value(RENEWALS, backend=_metrics.backend_of(issuer), outcome="renewed") == 2
    assert otel.value(LOST) == 0


def test_lost_at_renew(otel: Telemetry, issuer: Issuer) -> None:
    fence = Fence(issuer, "orders", 10)
    token = fence.acquire()
    steal(fence, token)
    with pytest.raises(LeaseLost):
        fence.renew(token)
    backend = _metrics.backend_of(issuer)
    assert otel.value(RENEWALS, backend=backend, outcome="lost") == 1
    assert otel.value(LOST, backend=backend) == 1


def test_lost_at_release_counts_no_held_time(otel: Telemetry, issuer: Issuer) -> None:
    fence = Fence(issuer, "orders", 10)
    token = fence.acquire()
    steal(fence, token)
    with pytest.raises(LeaseLost):
        fence.release(token)
    assert otel.value(LOST, backend=_metrics.backend_of(issuer)) == 1
    assert otel.value(HELD) == 0


def test_lease_lost_during_hold(otel: Telemetry, issuer: Issuer) -> None:
    """The background renewal finds the lease gone: renewals{lost} and leases.lost, once.
    (A 3 s lease: it is stolen, never let expire, even if the test's thread stalls; the
    renewer, every second, finds it gone.)"""
    fence = Fence(issuer, "orders", ttl=3)
    with pytest.raises(LeaseLost), fence.hold() as token:
        thief = steal(fence, token)
        deadline = time.monotonic() + 30
        hold_lost = False
        while not hold_lost and time.monotonic() < deadline:
            hold_lost = otel.value(LOST) > 0
            time.sleep(0.01)
    assert thief > token
    backend = _metrics.backend_of(issuer)
    assert otel.value(RENEWALS, backend=backend, outcome="lost") == 1
    assert otel.value(LOST, backend=backend) == 1
    assert otel.value(HELD) == 0


def test_presumed_lost_after_a_ttl_of_failed_renewals(
    otel: Telemetry, redis_factory: Callable[..., RedisServer]
) -> None:
    server = redis_factory()
    client = failing_fast(server.port, 1)
    fence = fencing.RedisFence(client, "orders", ttl=0.3)
    with pytest.raises(LeaseLost), fence.hold():
        server.close()
        deadline = time.monotonic() + 30
        while otel.value(LOST) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert otel.value(LOST, backend="redis") == 1
    assert otel.value(RENEWALS, backend="redis", outcome="error") >= 1
    assert otel.value(RENEWALS, outcome="lost") == 0  # no issuer said so


def test_fenced_lock_goes_through_the_same_driver(
    otel: Telemetry, redis_client: redis.Redis
) -> None:
    lock = redis_client.lock("orders", timeout=10, lock_class=FencedLock)
    assert lock.acquire(blocking=False)
    other = redis_client.lock("orders", timeout=10, lock_class=FencedLock)
    assert not other.acquire(blocking=False)
    lock.release()
    assert otel.value(ACQUIRE, backend="redis", outcome="acquired") == 1
    assert otel.value(ACQUIRE, backend="redis", outcome="timeout") == 1


async def test_asyncio_fence(otel: Telemetry) -> None:
    fence = fencing.aio.MemoryFence("orders", 10, issuer=MemoryIssuer())
    token = await fence.acquire()
    with pytest.raises(AcquireTimeout):
        await fence.acquire(timeout=0)
    with pytest.raises(asyncio.TimeoutError):  # the caller stops waiting: a timeout too
        await asyncio.wait_for(fence.acquire(), 0.05)
    await fence.renew(token)
    await fence.release(token)
    assert otel.value(ACQUIRE, backend="memory", outcome="acquired") == 1
    assert otel.value(ACQUIRE, backend="memory", outcome="timeout") == 2
    assert otel.value(ACQUIRE, outcome="error") == 0
    assert otel.value(RENEWALS, outcome="renewed") == 1
    assert otel.value(HELD, backend="memory") == 1


# -- every promise of the contract holds while telemetry records ---------------------------
# (the instruments are the fence's, whatever its issuer: blocking on Redis, asyncio on memory)


class TestAsyncMemoryFenceObserved(AsyncFenceContract):
    @pytest.fixture
    def make_fence(self, otel: Telemetry) -> MakeAsyncFence:
        issuer = MemoryIssuer()

        def make(name: str, ttl: float) -> fencing.aio.Fence:
            return fencing.aio.MemoryFence(name, ttl, issuer=issuer)

        return make


class TestRedisFenceObserved(FenceContract):
    """The hand-off issuer: waiters queue and are handed the lease, inside the watch."""

    @pytest.fixture
    def make_fence(self, otel: Telemetry, redis_client: redis.Redis) -> MakeFence:
        def make(name: str, ttl: float) -> Fence:
            return fencing.RedisFence(redis_client, name, ttl)

        return make


# -- rejected writes: every guard kind ------------------------------------------------------


def refuse_twice(write: Callable[[int], object]) -> None:
    """Token 5 is accepted, then 4 (a stale holder) is refused."""
    write(5)
    with pytest.raises(StaleTokenError):
        write(4)


def test_rejected_by_guard_memory_mark(otel: Telemetry) -> None:
    refuse_twice(guard(lambda: None))
    assert otel.value(REJECTED, guard="callable", mark="memory") == 1


def test_rejected_by_guard_file_mark(otel: Telemetry, tmp_path: Path) -> None:
    refuse_twice(guard(lambda: None, mark=FileMark(tmp_path / "mark")))
    assert otel.value(REJECTED, guard="callable", mark="file") == 1


def test_rejected_by_guard_redis_mark(otel: Telemetry, redis_client: redis.Redis) -> None:
    refuse_twice(guard(lambda: None, mark=RedisMark(redis_client, "mark")))
    assert otel.value(REJECTED, guard="callable", mark="redis") == 1


def test_rejected_by_file_store(otel: Telemetry, tmp_path: Path) -> None:
    with FileStore(tmp_path / "data") as store:
        refuse_twice(lambda token: store.write(b"x", token))
    assert otel.value(REJECTED, guard="file") == 1
    assert otel.value(REJECTED, guard="callable") == 0


def test_rejected_by_sql_guard(otel: Telemetry, tmp_path: Path) -> None:
    """The ORM flush and a Core ``guarded_update`` both count; with names, the resource
    is the table (not the row: one series per row would be unbounded)."""
    fencing.metrics.configure(names=True, meter_provider=otel.meter_provider)
    Base, Invoice, _ = make_models("metrics")
    engine = create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    Base.metadata.create_all(engine)
    with Session(engine) as s:
        s.add(Invoice(id=1, total=0, fence_token=0))
        s.commit()

    def flush(token: int) -> None:
        with Session(engine) as s:
            invoice = s.get_one(Invoice, 1)
            invoice.total, invoice.fence_token = token, token
            s.commit()

    def core(token: int) -> None:
        with engine.begin() as conn:
            conn.execute(guarded_update(Invoice, token, Invoice.id == 1).values(total=token))

    refuse_twice(flush)
    assert otel.value(REJECTED, guard="sql", resource=Invoice.__tablename__) == 1
    core(6)
    with pytest.raises(StaleTokenError):
        core(5)
    assert otel.value(REJECTED, guard="sql", resource=Invoice.__tablename__) == 2
    engine.dispose()


# -- names, spans, settings -----------------------------------------------------------------


def test_names_are_attributes_only_when_asked(otel: Telemetry, tmp_path: Path) -> None:
    fence = fencing.MemoryFence("invoice:42", 10, issuer=MemoryIssuer())
    fence.release(fence.acquire())
    refuse_twice(guard(lambda: None, name="ledger"))
    for name in (ACQUIRE, HELD, REJECTED):
        (point,) = otel.points(name)
        assert "fencing.name" not in point.attributes
        assert "fencing.resource" not in point.attributes
    fencing.metrics.configure(names=True, meter_provider=otel.meter_provider)
    fence.release(fence.acquire())
    refuse_twice(guard(lambda: None, name="ledger"))
    assert otel.value(ACQUIRE, name="invoice:42", outcome="acquired") == 1
    assert otel.value(HELD, name="invoice:42") == 1
    assert otel.value(REJECTED, resource="ledger", guard="callable") == 1


def test_spans(otel: Telemetry) -> None:
    fence = fencing.MemoryFence("orders", 10, issuer=MemoryIssuer())
    token = fence.acquire()
    with pytest.raises(AcquireTimeout):
        fence.acquire(timeout=0)
    fence.renew(token)
    fence.release(token)
    acquired, timed_out = otel.spans("fencing.acquire")
    assert acquired.attributes == {
        "fencing.name": "orders",
        "fencing.backend": "memory",
        "fencing.outcome": "acquired",
        "fencing.token": int(token),
    }
    assert timed_out.attributes is not None
    assert timed_out.attributes["fencing.outcome"] == "timeout"
    assert timed_out.status.is_ok is False
    ((renew,), (release,)) = otel.spans("fencing.renew"), otel.spans("fencing.release")
    assert renew.attributes is not None and release.attributes is not None
    assert (renew.attributes["fencing.outcome"], renew.attributes["fencing.token"]) == (
        "renewed",
        int(token),
    )
    assert release.attributes["fencing.outcome"] == "released"


def test_spans_can_be_turned_off(otel: Telemetry) -> None:
    fencing.metrics.configure(
        spans=False, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    fence = fencing.MemoryFence("orders", 10, issuer=MemoryIssuer())
    fence.renew(token := fence.acquire())
    fence.release(token)
    assert otel.spans_out.get_finished_spans() == ()
    assert otel.value(ACQUIRE, outcome="acquired") == 1  # the metrics stay


def test_acquire_span_is_current_while_the_issuer_works(otel: Telemetry) -> None:
    """So the issuer's own client spans (redis, SQLAlchemy instrumentation) nest in it."""
    from opentelemetry import trace

    seen: list[str] = []

    class Watching(MemoryIssuer):
        def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | fencing.Busy:
            span = trace.get_current_span()
            seen.append(getattr(span, "name", "?"))
            return super().try_acquire(name, holder, ttl_ms)

    Fence(Watching(), "orders").acquire()
    assert seen == ["fencing.acquire"]
    (span,) = otel.spans("fencing.acquire")
    assert span.attributes is not None
    backend = span.attributes["fencing.backend"]
    assert isinstance(backend, str) and backend.endswith(".Watching")  # not fencing's: its name


def test_configure_refuses_bad_input() -> None:
    with pytest.raises(TypeError, match="names must be a bool"):
        fencing.metrics.configure(names="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="meter_provider must be an OpenTelemetry MeterProvider"):
        fencing.metrics.configure(meter_provider=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="spans must be a bool"):
        fencing.metrics.configure(spans=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tracer_provider"):
        fencing.metrics.configure(tracer_provider="x")  # type: ignore[arg-type]
    assert _metrics._settings.names is False  # nothing changed


def test_leases_never_released_are_not_kept_for_ever(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_metrics, "MAX_GRANTED", 5)
    issuer = MemoryIssuer()
    for i in range(20):
        Fence(issuer, f"f{i}").acquire()  # never released
    assert 4 <= len(_metrics.GRANTED) <= 5
    newest = Fence(issuer, "last")
    token = newest.acquire()
    newest.release(token)  # a lease granted after the evictions still finds its start
    assert otel.value(HELD) == 1


def test_the_api_globals_are_where_fencing_reads_them() -> None:
    """fencing reads the API's provider variables without its getters (they read
    os.environ on every call): a new API version that moves them must fail here."""
    import importlib

    for module, variable in (_metrics.METER_GLOBAL, _metrics.TRACER_GLOBAL):
        assert hasattr(importlib.import_module(module), variable)


# -- the cost when no SDK is set: subprocesses, the API's globals are set once ------------


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_import_fencing_imports_no_opentelemetry() -> None:
    out = run_python(
        """
        import sys
        import fencing
        fence = fencing.MemoryFence("x")
        fence.release(fence.acquire())
        fencing.guard(lambda: None)(1)
        from fencing._base import metrics as _metrics
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")), _metrics._live)
        """
    )
    assert out.split() == ["[]", "None"]


def test_an_sdk_set_after_first_use_is_found() -> None:
    """A fence made at import time, used before main() sets the SDK, still records."""
    out = run_python(
        """
        import fencing
        from fencing._base import metrics as _metrics
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        fence = fencing.MemoryFence("x")
        fence.release(fence.acquire())  # the API is imported, no SDK: nothing made
        print(_metrics._live is None)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        fence.release(fence.acquire())
        data = reader.get_metrics_data().resource_metrics[0].scope_metrics[0]
        print(sorted((m.name, len(m.data.data_points)) for m in data.metrics))
        """
    )
    first, second = out.splitlines()
    assert first == "True"
    assert second == str(sorted([(ACQUIRE, 1), (HELD, 1)]))


def test_a_tracer_provider_alone_gives_spans() -> None:
    out = run_python(
        """
        import fencing
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        fence = fencing.MemoryFence("x")
        fence.release(fence.acquire())
        print(sorted(s.name for s in exporter.get_finished_spans()))
        """
    )
    assert out.strip() == str(["fencing.acquire", "fencing.release"])


def test_a_provider_named_by_environment_is_found() -> None:
    """``OTEL_PYTHON_METER_PROVIDER`` names a provider that the API loads on first use."""
    out = run_python(
        """
        import os
        os.environ["OTEL_PYTHON_METER_PROVIDER"] = "sdk_meter_provider"
        import fencing
        from fencing._base import metrics as _metrics
        import opentelemetry.metrics

        fence = fencing.MemoryFence("x")
        fence.release(fence.acquire())
        print(type(opentelemetry.metrics.get_meter_provider()).__module__, _metrics._live is None)
        """
    )
    assert out.split() == ["opentelemetry.sdk.metrics._internal", "False"]


async def test_asyncio_hold_lost(otel: Telemetry) -> None:
    issuer = MemoryIssuer()
    fence = fencing.aio.MemoryFence("orders", ttl=3, issuer=issuer)  # released, not expired
    with pytest.raises(LeaseLost):
        async with fence.hold() as token:
            assert issuer.release("orders", token, fence._holders[token])
            deadline = time.monotonic() + 30
            while otel.value(LOST) == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
    assert otel.value(RENEWALS, backend="memory", outcome="lost") == 1
    assert otel.value(LOST, backend="memory") == 1


# -- semaphores and limiters (issue 21) --------------------------------------------------------

PERMITS_USED = "fencing.permits.used"
WAITED = "fencing.wait.duration"
REFUSED = "fencing.admissions.refused"


def test_semaphore_permits_used_and_time_waited(otel: Telemetry) -> None:
    clock = VirtualClock()
    jobs = MemoryIssuer(clock=clock).semaphore("jobs", permits=2, ttl=10)
    first, second = jobs.acquire(), jobs.acquire()
    assert otel.value(PERMITS_USED, backend="memory") == 2
    with pytest.raises(AcquireTimeout):
        jobs.acquire(timeout=0)
    assert otel.value(WAITED, backend="memory", kind="semaphore", outcome="acquired") == 2
    assert otel.value(WAITED, kind="semaphore", outcome="timeout") == 1
    jobs.release(first)
    assert otel.value(PERMITS_USED) == 1
    clock.advance(11)  # the second permit expires: found lost at its renew, counted once
    with pytest.raises(LeaseLost):
        jobs.renew(second)
    with pytest.raises(LeaseLost):
        jobs.release(second)
    assert otel.value(PERMITS_USED) == 0
    with jobs.hold(timeout=0):
        assert otel.value(PERMITS_USED) == 1
    assert otel.value(PERMITS_USED) == 0
    assert otel.value(REFUSED) == 0  # a semaphore admits nothing


async def test_asyncio_semaphore_counts_the_same(otel: Telemetry) -> None:
    jobs = MemoryIssuer().aio_semaphore("jobs", permits=1, ttl=10)
    permit = await jobs.acquire()
    with pytest.raises(asyncio.TimeoutError):  # the caller stops waiting: a timeout too
        await asyncio.wait_for(jobs.acquire(), 0.05)
    assert otel.value(PERMITS_USED) == 1
    await jobs.release(permit)
    assert otel.value(PERMITS_USED) == 0
    assert otel.value(WAITED, kind="semaphore", outcome="acquired") == 1
    assert otel.value(WAITED, kind="semaphore", outcome="timeout") == 1


def test_limiter_admissions_refused_and_time_waited(otel: Telemetry) -> None:
    api = MemoryIssuer().limiter("api", limit=1, per=0.05, window="fixed")
    assert api.try_acquire()
    assert not api.try_acquire()
    assert otel.value(REFUSED, backend="memory", window="fixed") == 1
    with pytest.raises(AcquireTimeout):
        api.acquire(timeout=0)  # gives up: one more refused
    assert otel.value(REFUSED, window="fixed") == 2
    api.acquire(timeout=PATIENCE)  # waits for the next window, admitted
    assert otel.value(REFUSED) == 2  # a wait that ends admitted refuses nothing
    assert otel.value(WAITED, backend="memory", kind="limiter", outcome="acquired") == 1
    assert otel.value(WAITED, kind="limiter", outcome="timeout") == 1
    assert otel.value(PERMITS_USED) == 0


async def test_asyncio_limiter_counts_the_same(otel: Telemetry) -> None:
    api = MemoryIssuer().aio_limiter("api", limit=1, per=30)
    assert await api.try_acquire()
    assert not await api.try_acquire()
    with pytest.raises(AcquireTimeout):
        await api.acquire(timeout=0.01)  # the reply says nothing frees in time
    assert otel.value(REFUSED, window="sliding") == 2
    assert otel.value(WAITED, kind="limiter", outcome="timeout") == 1


def test_semaphore_and_limiter_names_only_when_asked(otel: Telemetry) -> None:
    issuer = MemoryIssuer()
    jobs, api = issuer.semaphore("jobs", permits=1), issuer.limiter("api", limit=1, per=30)
    jobs.release(jobs.acquire())
    api.try_acquire()
    api.try_acquire()
    for name in (PERMITS_USED, WAITED, REFUSED):
        assert all("fencing.name" not in point.attributes for point in otel.points(name))
    fencing.metrics.configure(names=True, meter_provider=otel.meter_provider)
    jobs.acquire()
    api.try_acquire()
    assert otel.value(PERMITS_USED, name="jobs") == 1
    assert otel.value(WAITED, name="jobs", kind="semaphore") == 1
    assert otel.value(REFUSED, name="api", window="sliding") == 1
