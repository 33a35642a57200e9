"""Metrics for Prometheus: fencing's OpenTelemetry instruments on a /metrics endpoint.

Needs: pip install 'fencing[otel]' opentelemetry-sdk opentelemetry-exporter-prometheus
Run: python examples/observability.py

The application sets the OpenTelemetry SDK once at start-up; fencing finds it by itself
(docs/observability.md). Then a waiter gives up, a stale holder (its lease ended by an
operator) is stopped at the store, and the script scrapes its own endpoint as
Prometheus would.
"""

import re
import tempfile
import urllib.request
from pathlib import Path

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import fencing

# -- once, at start-up: the SDK, read by the Prometheus exporter, served on /metrics --
server, _ = start_http_server(port=0, addr="127.0.0.1")  # in production: a fixed port
metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))

# -- the application: nothing about metrics below this line --
issuer = fencing.MemoryIssuer()  # one process here; see cache_fill.py for many
fence = fencing.MemoryFence("report", ttl=30, issuer=issuer)
store = fencing.FileStore(Path(tempfile.mkdtemp()) / "report.txt")

token = fence.acquire()
store.write(b"first draft", token)
try:
    fencing.MemoryFence("report", issuer=issuer).acquire(timeout=0.05)  # another worker
except fencing.AcquireTimeout:
    print("a second worker gave up waiting for the lease")

# we hang; an operator ends our lease (`fencing release report --force`) and the next
# holder writes
issuer.force_release("report")
newer = fence.acquire()
store.write(b"their version", newer)
fence.release(newer)
try:
    store.write(b"our late write", token)
except fencing.StaleTokenError:
    print(f"the store refused our stale token {token:d}")

# -- what Prometheus scrapes (fencing's series, without buckets and scope labels) --
url = f"http://127.0.0.1:{server.server_port}/metrics"
with urllib.request.urlopen(url, timeout=10) as response:
    scraped = response.read().decode()
for line in scraped.splitlines():
    if line.startswith("fencing_") and "_bucket" not in line:
        print(re.sub(r',?otel_scope_\w+="[^"]*"', "", line).replace("{}", ""))
server.shutdown()
