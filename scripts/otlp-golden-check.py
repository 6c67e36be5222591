#!/usr/bin/env python3
"""SPEC D4 (docs/BEHAVIOUR.md): the golden OTLP bodies of Fixtures/destinations/otlp/ read by OpenTelemetry's own
Python classes (opentelemetry-proto, with protobuf's json_format for OTLP/JSON), an independent reader of the
engine's output: both encodings parse, carry the same request, and each log type is one record with its name.

Usage: scripts/otlp-golden-check.py DIR   (the venv's python: .build/vendor-venv/bin/python)
Prints one JSON line; exits 1 on any difference."""
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

directory = sys.argv[1]
proto = ExportLogsServiceRequest()
proto.ParseFromString(open(f"{directory}/batch.pb", "rb").read())
from_json = json_format.Parse(open(f"{directory}/batch.json").read(), ExportLogsServiceRequest())
problems = []
if proto != from_json:
    problems.append("protobuf and OTLP/JSON differ")
names, uids = [], []
for resource_logs in proto.resource_logs:
    resource = {kv.key: kv.value.string_value for kv in resource_logs.resource.attributes}
    if resource.get("telemetry.sdk.name") != "outbox" or not resource.get("app.installation.id"):
        problems.append(f"resource attributes: {resource}")
    if not resource_logs.schema_url.startswith("https://opentelemetry.io/schemas/"):
        problems.append(f"schema_url {resource_logs.schema_url!r}")
    for scope_logs in resource_logs.scope_logs:
        for record in scope_logs.log_records:
            names.append(record.event_name)
            if record.body.string_value != record.event_name:
                problems.append(f"body {record.body.string_value!r} is not the event name {record.event_name!r}")
            if record.severity_number != 9 or record.time_unix_nano == 0 or record.observed_time_unix_nano == 0:
                problems.append(f"{record.event_name}: severity or times missing")
            attributes = {kv.key: kv.value for kv in record.attributes}
            uids.append(attributes["log.record.uid"].string_value if "log.record.uid" in attributes else "")
expected = ["Video>Music>Play", "session.start", "session.end", "outbox.screen_view", "outbox.user_properties",
            "outbox.location"]
if names != expected:
    problems.append(f"records {names}, expected {expected}")
if len(set(uids)) != len(uids) or "" in uids:
    problems.append(f"log.record.uid not one per record: {uids}")
print(json.dumps({"records": len(names), "problems": problems}))
sys.exit(1 if problems else 0)
