#!/usr/bin/env python3
"""Alternates two builds of outbox-bench, pair by pair, on the engine's delivery, commit and caller benches, and
prints each figure's new/old ratio per pair (median, min - max): the way to compare a change with its parent on a
host whose speed drifts 2x within an hour.

    scripts/alternate-bench.py OLD_BENCH NEW_BENCH [PAIRS]

Build OLD_BENCH from the parent commit (git worktree, or a checkout of it, `swift build -c release --product
outbox-bench`, then copy the binary with its `*.resources` next to it)."""
import json, statistics, subprocess, sys

BENCHES = [(["delivery", "200000", "1", "fast"], "end to end"), (["committed", "300000"], "committed events"),
           (["caller"], "trackEvent caller")]


def figures(binary):
    found = {}
    for args, name in BENCHES:
        out = subprocess.run([binary] + args, capture_output=True, text=True, timeout=900).stdout
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if row.get("bench") != name:
                continue
            if name == "end to end":
                found[f"delivery loop us/event, batch {row['batch_size']}"] = row["loop_us_per_event"]
                found["other processes, cpus"] = max(found.get("other processes, cpus", 0), row["other_processes_cpus"])
            elif name == "committed events":
                found["committed events/s"] = row["events_per_s"]
            else:
                found[f"caller p99 us, {row['threads']} thread(s)"] = row["p99_us"]
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    runs = {"old": [], "new": []}
    for index in range(pairs):
        for side in (["old", "new"] if index % 2 == 0 else ["new", "old"]):
            runs[side].append(figures(old if side == "old" else new))
        print(f"pair {index + 1}: old {runs['old'][-1]}\n        new {runs['new'][-1]}", flush=True)
    for key in runs["old"][0]:
        olds = [run[key] for run in runs["old"]]
        news = [run[key] for run in runs["new"]]
        ratios = [b / a for a, b in zip(olds, news) if a]
        print(f"{key}: old median {statistics.median(olds):g} ({min(olds):g} - {max(olds):g}), "
              f"new median {statistics.median(news):g} ({min(news):g} - {max(news):g}), "
              f"new/old per pair median {statistics.median(ratios):.2f} ({min(ratios):.2f} - {max(ratios):.2f})")


if __name__ == "__main__":
    main()
