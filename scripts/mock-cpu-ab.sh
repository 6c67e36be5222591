#!/bin/bash
# Compares two builds of outbox-mock-bench in alternated rounds (this machine's speed drifts within the hour, so
# only rounds taken side by side compare): medians and ranges of the server's CPU per log (SPEC M10) and logs/s,
# per server thread count.
#   scripts/mock-cpu-ab.sh ROUNDS OLD_BINARY NEW_BINARY [outbox-mock-bench arguments…]
set -euo pipefail
rounds=$1; old=$2; new=$3; shift 3
args=("$@"); [ ${#args[@]} -gt 0 ] || args=(--requests 4000)
results=$(mktemp); trap 'rm -f "$results"' EXIT
for _ in $(seq "$rounds"); do
  for bin in "$old" "$new"; do
    "$bin" "${args[@]}" 2>/dev/null | grep '^{' | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(sys.argv[1], d["server_threads"], d["server_cpu_us_per_log"], d["logs_per_s"])' "$bin" >> "$results"
  done
done
python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    binary, threads, cpu, logs = line.split()
    runs[(binary, int(threads))].append((float(cpu), int(logs)))
for (binary, threads), values in sorted(runs.items()):
    cpu = [v[0] for v in values]; logs = [v[1] for v in values]
    print(f"{binary} threads={threads}: server µs/log median {statistics.median(cpu):.2f} "
          f"({min(cpu):.2f} – {max(cpu):.2f}), logs/s median {int(statistics.median(logs))} ({min(logs)} – {max(logs)})")
PY
