#!/usr/bin/env bash
# SPEC E speed bound: outbox_track from C costs at most 1.5x Swift's trackEvent on the caller's thread. Runs
# Benchmarks/c/track_bench.c (against the libOutbox installed under PREFIX) and `outbox-bench caller`, alternately
# ROUNDS times, since other processes' load on a shared machine moves single runs by 2x: prints each side's best
# and median p50/p99 and their ratios, as one JSON line.
# Usage: scripts/c-bench.sh PREFIX OUTBOX-BENCH [CALLS] [ROUNDS]
set -euo pipefail
prefix=$1
swift_bench=$2
calls=${3:-300000}
rounds=${4:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
bench="$prefix/track_bench"
# shellcheck disable=SC2046
"${CC:-cc}" -std=gnu11 -O2 -Wall -Wextra -Werror -o "$bench" "$root/Benchmarks/c/track_bench.c" \
  $(pkg-config --cflags --libs outbox) -Wl,-rpath,"$(pkg-config --variable=libdir outbox)"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
c_lines=() s_lines=()
for _ in $(seq "$rounds"); do
  rm -rf "${dir:?}"/*
  c_lines+=("$("$bench" "$dir" "$calls")")
  s_lines+=("$("$swift_bench" caller "$calls" | head -1)")
done
python3 - "$calls" "${c_lines[@]}" -- "${s_lines[@]}" <<'PY'
import json, statistics, sys
args = sys.argv[2:]
cut = args.index("--")
c = [json.loads(line) for line in args[:cut]]
s = [json.loads(line) for line in args[cut + 1:]]
def summary(runs, key):
    values = [run[key] for run in runs]
    return min(values), statistics.median(values)
out = {"bench": "outbox_track vs trackEvent (caller's thread, 1 thread)", "calls": int(sys.argv[1]), "rounds": len(c)}
for key in ("p50_us", "p99_us"):
    c_best, c_median = summary(c, key)
    s_best, s_median = summary(s, key)
    out[key] = {"c_best": c_best, "swift_best": s_best, "ratio_best": round(c_best / s_best, 2),
                "c_median": c_median, "swift_median": s_median, "ratio_median": round(c_median / s_median, 2)}
print(json.dumps(out))
PY
