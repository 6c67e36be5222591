#!/usr/bin/env python3
"""SPEC K1 (docs/BEHAVIOUR.md): a sealed store's cost against a plain one, alternated in one sitting.

- Committed events/s and the commit loop's CPU per event: `outbox-bench sealed-vs-plain EVENTS PAIRS`, which
  alternates a plain and a sealed run inside one process (the order swapped every pair) and takes the ratio pair by
  pair: this machine's speed drifts within seconds, and two runs next to each other in one process see the least of it.
- The delivery loop's CPU per event, batch 50 (`outbox-bench delivery`, the answer time equal for both:
  latency=2 ms as destination-bench.py): PAIRS pairs of processes, each pair's two runs next to each other.

Usage: scripts/sealed-bench.py [BENCH] [PAIRS] [EVENTS]   (.build/release/outbox-bench, 6, 100000)
The commit figure takes 5 × PAIRS pairs of EVENTS events. Prints the median ratio sealed/plain of each figure
(within 1.2 is the target).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

bench = sys.argv[1] if len(sys.argv) > 1 else ".build/release/outbox-bench"
pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 6
events = sys.argv[3] if len(sys.argv) > 3 else "100000"
environment = dict(os.environ)
scenario = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
json.dump({"description": "every answer after the same delay", "rules": [{"network": {"latency_ms": 2}}]}, scenario)
scenario.close()
environment["OUTBOX_BENCH_SCENARIO"] = scenario.name


def rows(arguments):
    run = subprocess.run([bench] + arguments, capture_output=True, text=True, check=True, env=environment)
    out = []
    for line in run.stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def loop_us(sealed):
    found = [r for r in rows(["delivery", "200000", "1", "fast"] + (["--store-key"] if sealed else []))
             if r.get("bench") == "end to end" and r.get("batch_size") == 50]
    return found[0]["loop_us_per_event"]


commit = next(r for r in rows(["sealed-vs-plain", events, str(5 * pairs)]) if r.get("bench") == "sealed vs plain committed")
print(f"committed events/s: sealed/plain cost {commit['rate_cost_median']:.2f} (min {commit['rate_cost_min']:.2f}, "
      f"max {commit['rate_cost_max']:.2f}, {commit['pairs']} pairs of {commit['events_per_run']} events in one process)",
      flush=True)
print(f"commit loop µs per event: sealed/plain cost {commit['loop_cpu_cost_median']:.2f} (median)", flush=True)

ratios = []
for pair in range(pairs):
    # The order alternates too: neither side always runs on the warmer machine.
    order = [False, True] if pair % 2 == 0 else [True, False]
    figures = {sealed: loop_us(sealed) for sealed in order}
    ratios.append(figures[True] / figures[False])
    print(f"pair {pair + 1}: delivery loop µs/event plain {figures[False]:.2f} sealed {figures[True]:.2f}", flush=True)
print(f"delivery loop µs per event, batch 50: sealed/plain cost {statistics.median(ratios):.2f} (min {min(ratios):.2f}, "
      f"max {max(ratios):.2f}, {len(ratios)} pairs)")
os.unlink(scenario.name)
