#!/usr/bin/env python3
"""SPEC D10 (docs/BEHAVIOUR.md): the engine loop's CPU per delivered event on each destination against App Center's,
alternated in one sitting (this machine's speed drifts within minutes, so each destination's run is paired with an
App Center run next to it and the ratio taken pair by pair).

Usage: scripts/destination-bench.py [BENCH] [ROUNDS] [pinned] [latency=MS] [wires=W,W…] [batch=50]
  (BENCH: .build/release/outbox-bench; ROUNDS: 6; MS: 2; every wire; batches 50 and 500)
`wires=`: only those destinations beside App Center (`wires=sensors,ga4,amplitude,mixpanel`); `batch=50`: batch 50
alone, half the time. GA4 sends at most 25 events a request (D12), so it runs at batch 25 against an App Center run
at batch 25 of the same round.
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

options = [a for a in sys.argv[1:] if a == "pinned" or a.startswith(("latency=", "wires=", "batch="))]
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
batch = next((["--batch-size", a.split("=", 1)[1]] for a in options if a.startswith("batch=")), [])
variants = {
    "appcenter": batch,
    "otlp": ["--destination", "otlp"] + batch,
    "otlp-json": ["--destination", "otlp", "--otlp-encoding", "json"] + batch,
    "posthog": ["--destination", "posthog"] + batch,
    "segment": ["--destination", "segment"] + batch,
    "sensors": ["--destination", "sensors"] + batch,
    "amplitude": ["--destination", "amplitude"] + batch,
    "mixpanel": ["--destination", "mixpanel"] + batch,
    "appcenter-25": ["--batch-size", "25"],
    "ga4": ["--destination", "ga4", "--batch-size", "25"],
}
# Each destination's ratio is to this App Center run of the same round.
baseline = {"ga4": "appcenter-25"}
chosen = next((a.split("=", 1)[1].split(",") for a in options if a.startswith("wires=")), None)
if chosen is not None:
    unknown = [w for w in chosen if w not in variants]
    if unknown:
        sys.exit("destination-bench: no wire %s (%s)" % (", ".join(unknown), ", ".join(variants)))
    keep = {"appcenter"} | set(chosen) | {baseline[w] for w in chosen if w in baseline}
    variants = {name: arguments for name, arguments in variants.items() if name in keep}
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

for name in variants:
    for size in sorted(results[name]):
        values = results[name][size]
        base = results[baseline.get(name, "appcenter")].get(size, [])
        ratios = [v / b for v, b in zip(values, base) if b > 0] or [0]
        print(json.dumps({"bench": "destination loop CPU (D10)", "destination": name, "batch_size": size,
                          "answer_latency_ms": latency,
                          "rounds": len(values), "loop_us_min": min(values), "loop_us_max": max(values),
                          "loop_us_median": statistics.median(values),
                          "ratio_min": round(min(ratios), 2), "ratio_max": round(max(ratios), 2),
                          "ratio_median": round(statistics.median(ratios), 2)}))
