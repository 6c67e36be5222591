#!/usr/bin/env python3
"""SPEC D10 (docs/BEHAVIOUR.md): the engine loop's CPU per delivered event on each destination against App Center's,
alternated in one sitting (this machine's speed drifts within minutes, so each destination's run is paired with an
App Center run next to it and the ratio taken pair by pair).

Usage: scripts/destination-bench.py [BENCH] [ROUNDS] [pinned] [latency=MS]
  (BENCH: .build/release/outbox-bench; ROUNDS: 6; MS: 2)
`pinned`: the in-process mock's threads on the last core, the engine on the others (outbox-bench's own option), so
that the mock's cost for a richer wire does not land on the engine loop's core.
`latency=MS`: the mock answers every request MS ms after it arrives, whatever the wire. The engine loop's CPU per
event grows when answers come later (App Center's alone by 15-45% at 1 ms: fewer answers per wake-up, fewer
deletions per commit), and the mock decodes OTLP several times slower than App Center's JSON; an equal answer time
measures what the engine does for a wire and not how fast the mock reads it. `latency=0` runs without it.
Prints, per batch size, each destination's loop µs per event (range, median) and its per-pair ratio to App Center's.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

options = [a for a in sys.argv[1:] if a == "pinned" or a.startswith("latency=")]
positional = [a for a in sys.argv[1:] if a not in options]
bench = positional[0] if positional else ".build/release/outbox-bench"
rounds = int(positional[1]) if len(positional) > 1 else 6
pinned = ["pinned"] if "pinned" in options else []
latency = next((int(a.split("=", 1)[1]) for a in options if a.startswith("latency=")), 2)
environment = dict(os.environ)
if latency > 0:
    scenario = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"description": "every answer after the same delay, whatever the wire",
               "rules": [{"network": {"latency_ms": latency}}]}, scenario)
    scenario.close()
    environment["OUTBOX_BENCH_SCENARIO"] = scenario.name
variants = {
    "appcenter": [],
    "otlp": ["--destination", "otlp"],
    "otlp-json": ["--destination", "otlp", "--otlp-encoding", "json"],
    "posthog": ["--destination", "posthog"],
    "segment": ["--destination", "segment"],
}
results = {name: {} for name in variants}
for round_ in range(rounds):
    order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
    for name in order:
        run = subprocess.run([bench, "delivery", "200000", "1", "fast"] + pinned + variants[name],
                             capture_output=True, text=True, check=True, env=environment)
        for line in run.stdout.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if row.get("bench") == "end to end":
                results[name].setdefault(row["batch_size"], []).append(row["loop_us_per_event"])

for batch in sorted(results["appcenter"]):
    base = results["appcenter"][batch]
    for name in variants:
        values = results[name].get(batch, [])
        ratios = [v / b for v, b in zip(values, base) if b > 0]
        print(json.dumps({"bench": "destination loop CPU (D10)", "destination": name, "batch_size": batch,
                          "answer_latency_ms": latency,
                          "rounds": len(values), "loop_us_min": min(values), "loop_us_max": max(values),
                          "loop_us_median": statistics.median(values),
                          "ratio_min": round(min(ratios), 2), "ratio_max": round(max(ratios), 2),
                          "ratio_median": round(statistics.median(ratios), 2)}))
