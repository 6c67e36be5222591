#!/usr/bin/env python3
"""Capture real OTLP/HTTP requests from OpenTelemetry's official Python exporter (SPEC V5).

Run from the repository root:

    python3 -m venv .build/otlp-venv
    .build/otlp-venv/bin/pip install opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
    .build/otlp-venv/bin/python scripts/capture-otlp.py Fixtures/vendors/otlp
    .build/otlp-venv/bin/python scripts/capture-otlp.py --against http://127.0.0.1:8080

With `--against URL` the same exporters make the same calls against a running mock instead, save nothing, and
print one JSON line: {"errors": [...]}, the warnings and errors the SDK logged (an export it gave up on, a
response it could not read); the end-to-end tests compare the mock's counts with what was sent.
A threaded capture server on 127.0.0.1 (a free port) answers every POST 200 with an empty protobuf body, as a
collector does, and saves each request as NAME.request.json (method, path, headers in the order sent) and
NAME.body (the body exactly as sent: gzip stays gzip). The exporters run unmodified but for the endpoint, through
the SDK's own batch processors, so the requests are what an application sends. The Python exporter sends
protobuf only; OTLP/JSON fixtures are the examples of the opentelemetry-proto repository (see README.md there).
Ids, timestamps and service.instance.id change on every run: tests assert on counts and shapes, not on them.
"""
import json
import logging
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

received = []  # (path, headers, body) in arrival order
lock = threading.Lock()


class Capture(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            received.append((self.path, list(self.headers.items()), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


AGAINST = None  # the mock's URL in --against mode


def take(path):
    """The requests received on `path` since the last call, in order (none against a mock)."""
    if AGAINST:
        return [None]
    with lock:
        mine = [r for r in received if r[0] == path]
        received[:] = [r for r in received if r[0] != path]
    return mine


def save(out, name, request):
    if AGAINST:
        return
    path, headers, body = request
    with open(os.path.join(out, name + ".request.json"), "w") as f:
        # One header a line, in the order sent: diffs of a new capture stay readable.
        f.write('{"method": "POST", "path": %s, "headers": [\n' % json.dumps(path))
        f.write(",\n".join("  " + json.dumps(list(h)) for h in headers))
        f.write("\n]}\n")
    with open(os.path.join(out, name + ".body"), "wb") as f:
        f.write(body)
    print(f"{name}: {path} {len(body)} bytes")


class Problems(logging.Handler):
    """Collects what the SDK logs at WARNING and above: how an exporter reports a failed export."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def main():
    global AGAINST
    problems = Problems()
    if len(sys.argv) > 2 and sys.argv[1] == "--against":
        AGAINST = sys.argv[2].rstrip("/")
        logging.getLogger("opentelemetry").addHandler(problems)
        server, base, out = None, AGAINST, None
    else:
        out = sys.argv[1] if len(sys.argv) > 1 else "Fixtures/vendors/otlp"
        os.makedirs(out, exist_ok=True)
        server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
    resource = Resource.create({"service.name": "outbox-fixture"})

    # Traces first, so that some log records below carry a real trace context.
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=base + "/v1/traces")))
    tracer = tracer_provider.get_tracer("checkout", "1.0")

    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=base + "/v1/logs"), max_export_batch_size=512))
    logger = logger_provider.get_logger("analytics", "1.0")

    # One batch of 50 records: the decoder's speed is measured on it (BENCHMARKS.md).
    with tracer.start_as_current_span("checkout") as parent:
        parent.set_attribute("cart.items", 3)
        for i in range(50):
            kwargs = {}
            if i % 10 == 0:
                kwargs["timestamp"] = 1_795_332_336_000_000_000 + i  # only some records carry timeUnixNano
            logger.emit(event_name="Order Completed", severity_number=SeverityNumber.INFO,
                        body="Order Completed" if i % 2 == 0 else f"Product Viewed {i}",
                        attributes={"user_id": f"user-{i % 7}", "order": i, "price": 9.99, "sku": "A-1",
                                    "tags": ["a", "b"]}, **kwargs)
        with tracer.start_as_current_span("pay") as child:
            child.add_event("card.authorised", {"amount": 12.5})
            with tracer.start_as_current_span("db.query", kind=trace.SpanKind.CLIENT):
                pass
        with tracer.start_as_current_span("email"):
            pass
    logger_provider.force_flush()
    tracer_provider.force_flush()
    logs = take("/v1/logs")
    spans = take("/v1/traces")
    assert len(logs) == 1 and len(spans) == 1, (len(logs), len(spans))
    save(out, "python-logs-50", logs[0])
    save(out, "python-traces", spans[0])

    # The same client with gzip, as `compression=` sends it.
    gz_provider = LoggerProvider(resource=resource)
    gz_provider.add_log_record_processor(BatchLogRecordProcessor(
        OTLPLogExporter(endpoint=base + "/v1/logs", compression=Compression.Gzip)))
    gz_logger = gz_provider.get_logger("analytics", "1.0")
    for i in range(3):
        gz_logger.emit(severity_number=SeverityNumber.WARN, body=f"Signed Up {i}", attributes={"plan": "pro"})
    gz_provider.force_flush()
    gz = take("/v1/logs")
    assert len(gz) == 1, len(gz)
    save(out, "python-logs-gzip", gz[0])

    # Metrics: a counter, an up-down counter, a histogram and an observable gauge in one export.
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=base + "/v1/metrics"),
                                           export_interval_millis=3_600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = meter_provider.get_meter("analytics", "1.0")
    orders = meter.create_counter("orders", unit="1", description="orders completed")
    queue = meter.create_up_down_counter("queue.depth")
    latency = meter.create_histogram("checkout.duration", unit="ms")
    meter.create_observable_gauge("cpu.temperature",
                                  callbacks=[lambda options: [
                                      __import__("opentelemetry.metrics", fromlist=["Observation"])
                                      .Observation(41.5, {"core": "0"})]])
    for i in range(4):
        orders.add(1, {"plan": "pro" if i % 2 else "free"})
        queue.add(2 - i)
        latency.record(12.5 * (i + 1), {"route": "/pay"})
    meter_provider.force_flush()
    metrics = take("/v1/metrics")
    assert len(metrics) >= 1, len(metrics)
    save(out, "python-metrics", metrics[0])

    for provider in (logger_provider, gz_provider, tracer_provider, meter_provider):
        provider.shutdown()
    if server:
        server.shutdown()
    else:
        print(json.dumps({"errors": problems.messages}))


if __name__ == "__main__":
    main()
