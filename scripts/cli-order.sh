#!/usr/bin/env bash
# Writes the function order of the release CLI (scripts/cli-ld; `make cli-order` runs this).
#
#   scripts/cli-order.sh CLI MOCK OUT
#
# Runs CLI under callgrind three times against MOCK (an outbox-mock on 127.0.0.1, port 0): `emit` tracking and
# delivering 2 000 events, `emit` only storing 3 000, then `emit --count 0` draining that backlog — and writes
# every function of CLI that ran, by its symbol name, once, to OUT. Functions all runs share come first, then the
# rest, each group sorted by name; lld places the sections that hold them in that order at the start of `.text`.
set -euo pipefail

cli=${1:?usage: cli-order.sh CLI MOCK OUT}
mock=${2:?usage: cli-order.sh CLI MOCK OUT}
out=${3:?usage: cli-order.sh CLI MOCK OUT}

work=$(mktemp -d)
mock_pid=""
cleanup() {
    if [ -n "$mock_pid" ]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# Valgrind cannot read lld's DWARF 5; the symbol table is all the order needs.
objcopy --strip-debug "$cli" "$work/outbox"
cli=$work/outbox

"$mock" --port 0 --threads 1 > "$work/mock.out" 2>&1 &
mock_pid=$!
for _ in $(seq 1 100); do
    endpoint=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/mock.out" || true)
    [ -n "$endpoint" ] && break
    kill -0 "$mock_pid" 2>/dev/null || { cat "$work/mock.out" >&2; exit 1; }
    sleep 0.1
done
[ -n "$endpoint" ] || { echo "cli-order: the mock did not say where it listens" >&2; exit 1; }

profile() {
    local name=$1; shift
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/$name.cg" "$cli" "$@" \
        > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
}
profile deliver emit --store "$work/a.sqlite" --count 2000 --payload-bytes 200 --endpoint "$endpoint" \
    --app-secret order --wait-delivered --timeout 120
profile store emit --store "$work/b.sqlite" --count 3000 --payload-bytes 800
profile drain emit --store "$work/b.sqlite" --count 0 --endpoint "$endpoint" --app-secret order \
    --wait-delivered --timeout 120

# Names defined once only: a local name that many objects share (outlined copies, `objectdestroy`…) would make lld
# move every section that defines it, most of them code that never runs.
nm --defined-only "$cli" | awk '{print $3}' | sort | uniq -u > "$work/symbols"
# callgrind names each function once per file as "fn=(id) name" and later by "(id)" alone.
python3 - "$out" "$work/symbols" "$work/deliver.cg" "$work/store.cg" "$work/drain.cg" <<'EOF'
import re, sys
out, files = sys.argv[1], sys.argv[3:]
defined = set(open(sys.argv[2]).read().split())
seen_in = {}   # function name → the runs that executed it
for path in files:
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"^(?:c?fn)=\(\d+\) (.+)$", line.rstrip("\n"))
        if not m:
            continue
        name = m.group(1).split("'")[0]   # callgrind appends 'N to recursive calls' copies
        if name in defined:   # not libc, SQLite, libuv: shared libraries
            seen_in.setdefault(name, set()).add(path)
# Sorted by name within each group: the whole list fits in a few 64 KB windows, so the order inside matters
# little, and a stable file shows in a diff only the functions that came or went.
shared = sorted(n for n, runs in seen_in.items() if len(runs) == len(files))
rest = sorted(n for n, runs in seen_in.items() if len(runs) != len(files))
with open(out, "w") as f:
    f.write("\n".join(shared + rest) + "\n")
print(f"cli-order: {len(shared)} functions in every run, {len(rest)} in some, written to {out}")
EOF
