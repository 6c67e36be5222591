#!/usr/bin/env python3
"""SPEC D10 (docs/BEHAVIOUR.md): the engine loop's CPU per delivered event on each destination against App Center's,
alternated in one sitting (this machine's speed drifts within minutes, so each destination's run is paired with an
App Center run next to it and the ratio taken pair by pair).

Usage: scripts/destination-bench.py [BENCH] [ROUNDS] [pinned]   (BENCH: .build/release/outbox-bench; ROUNDS: 6)
`pinned`: the in-process mock's threads on the last core, the engine on the others (outbox-bench's own option), so
that the mock's cost for a richer wire does not land on the engine loop's core.
Prints, per batch size, each destination's loop µs per event (range, median) and its per-pair ratio to App Center's.
"""
import json
import statistics
import subprocess
import sys

bench = sys.argv[1] if len(sys.argv) > 1 else ".build/release/outbox-bench"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
pinned = ["pinned"] if len(sys.argv) > 3 and sys.argv[3] == "pinned" else []
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
                             capture_output=True, text=True, check=True)
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
                          "rounds": len(values), "loop_us_min": min(values), "loop_us_max": max(values),
                          "loop_us_median": statistics.median(values),
                          "ratio_min": round(min(ratios), 2), "ratio_max": round(max(ratios), 2),
                          "ratio_median": round(statistics.median(ratios), 2)}))
