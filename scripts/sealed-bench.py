#!/usr/bin/env python3
"""SPEC K1 (docs/BEHAVIOUR.md): a sealed store's cost against a plain one, alternated in one sitting (this machine's
speed drifts within minutes, so each sealed run is paired with a plain run next to it and the ratio taken pair by
pair): committed events/s (`outbox-bench committed`) and the delivery loop's CPU per event, batch 50
(`outbox-bench delivery`, the answer time equal for both: latency=MS as destination-bench.py).

Usage: scripts/sealed-bench.py [BENCH] [PAIRS] [EVENTS]   (.build/release/outbox-bench, 6, 300000)
Prints each pair's figures and the median ratio sealed/plain of each (within 1.2 is the target).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

bench = sys.argv[1] if len(sys.argv) > 1 else ".build/release/outbox-bench"
pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 6
events = sys.argv[3] if len(sys.argv) > 3 else "300000"
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


def committed(sealed):
    row = next(r for r in rows(["committed", events] + (["--store-key"] if sealed else [])) if r.get("bench") == "committed events")
    return row["events_per_s"], row["loop_us_per_event"]


def loop_us(sealed):
    found = [r for r in rows(["delivery", "200000", "1", "fast"] + (["--store-key"] if sealed else []))
             if r.get("bench") == "end to end" and r.get("batch_size") == 50]
    return found[0]["loop_us_per_event"]


ratios = {"committed events/s": [], "commit loop µs per event": [], "delivery loop µs per event, batch 50": []}
for pair in range(pairs):
    # The order alternates too: neither side always runs on the warmer machine.
    order = [False, True] if pair % 2 == 0 else [True, False]
    figures = {}
    for sealed in order:
        figures[sealed] = (committed(sealed), loop_us(sealed))
    plain, sealed = figures[False], figures[True]
    # Events/s: plain over sealed, so that every ratio reads "sealed costs N× the plain store".
    ratios["committed events/s"].append(plain[0][0] / sealed[0][0])
    ratios["commit loop µs per event"].append(sealed[0][1] / plain[0][1])
    ratios["delivery loop µs per event, batch 50"].append(sealed[1] / plain[1])
    print(f"pair {pair + 1}: committed/s plain {plain[0][0]} sealed {sealed[0][0]}; commit loop µs/event plain "
          f"{plain[0][1]:.2f} sealed {sealed[0][1]:.2f}; delivery loop µs/event plain {plain[1]:.2f} sealed {sealed[1]:.2f}",
          flush=True)
for name, values in ratios.items():
    print(f"{name}: sealed/plain cost {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}, "
          f"{len(values)} pairs)")
os.unlink(scenario.name)
