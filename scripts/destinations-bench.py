#!/usr/bin/env python3
"""SPEC D16 (docs/BEHAVIOUR.md): the engine loop's CPU per tracked event delivering a stored backlog to two destinations
against one, alternated in one sitting (this machine's speed drifts within minutes, so each pair's ratio is taken).

Usage: scripts/destinations-bench.py [ROUNDS] [BENCH] [live]   (ROUNDS: 4; BENCH: .build/release/outbox-bench)

`live` tracks the events while the engine delivers them, so that the loop's CPU holds the commit every destination
shares: the measure of D16's bound (per tracked event). Without it, a stored backlog is delivered: delivery alone.
"""
import json
import statistics
import subprocess
import sys

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
bench = sys.argv[2] if len(sys.argv) > 2 else ".build/release/outbox-bench"
live = ["--live"] if "live" in sys.argv[3:] else []
results = {1: {50: [], 500: []}, 2: {50: [], 500: []}}
ratios = {50: [], 500: []}
for round_ in range(rounds):
    got = {}
    for count in ([1, 2] if round_ % 2 == 0 else [2, 1]):
        out = subprocess.run([bench, "delivery", "200000", "--destinations", str(count)] + live, capture_output=True, text=True).stdout
        for line in out.splitlines():
            if '"end to end"' not in line:
                continue
            run = json.loads(line)
            if not run["drained"]:
                sys.exit(f"not drained: {line}")
            got[(count, run["batch_size"])] = run["loop_us_per_event"]
            results[count][run["batch_size"]].append(run["loop_us_per_event"])
    for batch in (50, 500):
        ratios[batch].append(got[(2, batch)] / got[(1, batch)])
    print(round_, got, flush=True)
for batch in (50, 500):
    one, two = results[1][batch], results[2][batch]
    print(f"batch {batch}: one {statistics.median(one):.2f} µs, two {statistics.median(two):.2f} µs, "
          f"ratio median {statistics.median(ratios[batch]):.2f} ({min(ratios[batch]):.2f}-{max(ratios[batch]):.2f})")
