#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer harness (scripts/fuzz-build.sh, Fuzz/outbox-fuzz) and runs each target in turn
# for FUZZ_RUNS inputs (the store target for FUZZ_STORE_RUNS: SQLite is not instrumented and every input is a file
# opened from scratch). A target's corpus starts from its seeds each run: Fixtures/ (payloads, scenarios,
# recordings, gzip copies of the payloads and a gzip bomb made here) and Fixtures/fuzz/seeds/TARGET/. Prints one
# line per target (inputs, seconds, inputs/s, libFuzzer's final `cov:` and `ft:`, corpus size) and fails when any
# target crashed, hung past FUZZ_TIMEOUT seconds, leaked or broke an invariant; the input that did it is kept in
# .build-fuzz/work/artifacts/TARGET/ (replay: .build-fuzz/release/outbox-fuzz TARGET FILE). A crash found becomes a
# regression test replaying its input from Fixtures/fuzz/TARGET/.
# Usage: scripts/fuzz.sh [TARGET...]   (default: every target of `outbox-fuzz --list`)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${FUZZ_RUNS:-1000000}
store_runs=${FUZZ_STORE_RUNS:-100000}
timeout=${FUZZ_TIMEOUT:-10}
# Optional cap on each target's time in seconds (libFuzzer's -max_total_time); 0: none, every target runs its inputs.
max_seconds=${FUZZ_MAX_SECONDS:-0}
work="$root/.build-fuzz/work"

binary=$("$root/scripts/fuzz-build.sh") || { echo "fuzz: the harness did not build" >&2; exit 1; }
if (( $# > 0 )); then targets=("$@"); else mapfile -t targets < <("$binary" --list | cut -f1); fi

# The seeds of one target into DIR (python3 for the gzip members and for the recorded responses).
seed() {
  local target=$1 dir=$2
  rm -rf "$dir"; mkdir -p "$dir"
  if [[ -d "$root/Fixtures/fuzz/seeds/$target" ]]; then cp "$root/Fixtures/fuzz/seeds/$target"/* "$dir"/ 2>/dev/null; fi
  case "$target" in
    mock-body-appcenter)
      cp "$root"/Fixtures/payloads/*.json "$dir"/
      python3 - "$dir" "$root"/Fixtures/payloads/*.json <<'EOF'
import gzip, os, sys
for path in sys.argv[2:]:
    with open(path, "rb") as f, open(os.path.join(sys.argv[1], os.path.basename(path) + ".gz"), "wb") as out:
        out.write(gzip.compress(f.read(), 6))
EOF
      ;;
    mock-body-*)
      # A vendor's captured requests (Fixtures/vendors/VENDOR/): the index of the harness's request shape of the
      # same method, path and content type as the first byte, then the body (a GET's query), gzip kept as it is.
      "$binary" --shapes "$target" >"$dir/.shapes" || return 1
      python3 - "$dir" "$root/Fixtures/vendors/${target#mock-body-}" <<'EOF'
import base64, glob, json, os, sys
out, fixtures = sys.argv[1], sys.argv[2]
shapes = {}
for line in open(os.path.join(out, ".shapes")):
    index, shape = line.rstrip("\n").split("\t")
    method, uri, ctype = shape.split(" ", 2)
    shapes.setdefault((method, uri.split("?")[0], ctype.split(";")[0].lower()), int(index))
os.remove(os.path.join(out, ".shapes"))
n = 0
for path in sorted(glob.glob(os.path.join(fixtures, "*.json"))):
    o = json.load(open(path))
    uri = o.get("uri") or o.get("path") or "/"
    headers = {k.lower(): v for k, v in o.get("headers", [])}
    if path.endswith(".request.json"):
        body = open(path[:-len(".request.json")] + ".body", "rb").read()
    elif "body_base64" in o:
        body = base64.b64decode(o["body_base64"])
    else:
        body = (o.get("body") or "").encode()
    if headers.get("content-encoding", "identity") not in ("gzip", "identity"): continue
    method = o.get("method", "POST")
    ctype = "-" if method == "GET" else (headers.get("content-type") or "-").split(";")[0].lower()
    path_only, _, query = uri.partition("?")
    if method == "GET": body = query.encode()
    index = shapes.get((method, path_only, ctype))
    if index is None: continue
    n += 1
    open(os.path.join(out, "vendor-%s" % os.path.basename(path)), "wb").write(bytes([index]) + body)
if n == 0: sys.exit("no captured request matches a shape in " + fixtures)
EOF
      ;;
    scenario) cp "$root"/Fixtures/scenarios/*.json "$dir"/ ;;
    engine-response)
      python3 - "$dir" "$root"/Fixtures/recordings/*.jsonl <<'EOF'
import json, os, sys
n = 0
for path in sys.argv[2:]:
    for line in open(path, encoding="utf-8"):
        response = json.loads(line).get("response") or {}
        if "status" not in response: continue
        head = "HTTP/1.1 %d\r\n" % response["status"] + "".join(
            "%s: %s\r\n" % item for item in (response.get("headers") or {}).items())
        n += 1
        with open(os.path.join(sys.argv[1], "recorded-%d.txt" % n), "wb") as out:
            out.write((head + "\r\n" + (response.get("body") or "")).encode())
EOF
      ;;
    gzip)
      python3 - "$dir" "$root"/Fixtures/payloads/*.json <<'EOF'
import gzip, os, sys
d = sys.argv[1]
bodies = [open(p, "rb").read() for p in sys.argv[2:]]
for i, body in enumerate(bodies):
    z = gzip.compress(body, 9)
    open(os.path.join(d, "payload-%d.gz" % i), "wb").write(z)
open(os.path.join(d, "plain.json"), "wb").write(bodies[0])
open(os.path.join(d, "truncated.gz"), "wb").write(gzip.compress(bodies[0])[:-9])
open(os.path.join(d, "two-members.gz"), "wb").write(gzip.compress(b"{\"logs\":") + gzip.compress(b"[]}"))
# Bombs: 1 MiB and 4 MiB of zeros in 1 KiB and 4 KiB, far past the harness's decompressed limit (64 KiB).
open(os.path.join(d, "bomb-1m.gz"), "wb").write(gzip.compress(b"\0" * (1 << 20), 9))
open(os.path.join(d, "bomb-4m.gz"), "wb").write(gzip.compress(b"\0" * (4 << 20), 9))
EOF
      ;;
    store) "$binary" --seed-store "$dir/seed.outbox" || return 1 ;;
  esac
}

mkdir -p "$work/logs"
# The harness's temporary directories (stores, the C engine's) go under one of ours, in memory when /dev/shm is
# there, removed however the run ends (a crash skips the harness's own exit handler).
tmp_parent=${TMPDIR:-/tmp}
if [[ -d /dev/shm && -w /dev/shm ]]; then tmp_parent=/dev/shm; fi
export OUTBOX_FUZZ_TMPDIR
OUTBOX_FUZZ_TMPDIR=$(mktemp -d "$tmp_parent/outbox-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$OUTBOX_FUZZ_TMPDIR"' EXIT
# libFuzzer reports the crash and saves the input; the Swift runtime's own backtracer would only slow that down.
export SWIFT_BACKTRACE=enable=no
# Short allocation stacks and a smaller quarantine: Swift allocates per value, and ASan's unwinding at every
# malloc is most of its cost; a crash's own stack is still whole.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:malloc_context_size=4:quarantine_size_mb=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
failed=0
summary=()
for target in "${targets[@]}"; do
  corpus="$work/corpus/$target"
  artifacts="$work/artifacts/$target/"
  seed "$target" "$corpus" || { echo "fuzz: $target: no seeds" >&2; failed=1; continue; }
  rm -rf "$artifacts"
  mkdir -p "$artifacts"
  n=$runs; extra=()
  # A store file is at least a page; the mock's body limit is megabytes, but a few KiB reach every branch.
  if [[ $target == store ]]; then n=$store_runs; extra=(-max_len=65536); fi
  if [[ $target == gzip ]]; then extra=(-max_len=8192); fi
  log="$work/logs/$target.log"
  echo "fuzz: $target: $n inputs (log: $log)"
  "$binary" "$target" -runs="$n" -max_total_time="$max_seconds" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "${extra[@]}" "$corpus" >"$log" 2>&1
  status=$?
  done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$log" | tail -1)
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  seconds=$(sed -nE 's/^Done [0-9]+ runs in ([0-9]+) second.*/\1/p' <<<"$done_line")
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.*corp: ([0-9]+\/[0-9a-zA-Z]+).*/\1/p' <<<"$last")
  found=$(find "$artifacts" -type f | wc -l)
  line="$target: ${executed:-?} inputs, ${seconds:-?} s, ${rate:-?} inputs/s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, exit $status, $found artifact(s)"
  if [[ $status != 0 || -z $done_line ]]; then
    failed=1
    line="$line — FAILED"
    grep -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|SUMMARY:|invariant broken|Fatal error|Test unit written' "$log" | head -8
  fi
  echo "fuzz: $line"
  summary+=("$line")
done
echo
echo "fuzz: summary (FUZZ_RUNS=$runs, FUZZ_STORE_RUNS=$store_runs, FUZZ_MAX_SECONDS=$max_seconds)"
printf '  %s\n' "${summary[@]}"
exit "$failed"
