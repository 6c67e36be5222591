#!/usr/bin/env bash
# `make sanitize`: builds everything with --sanitize=KIND in .build-tsan or .build-asan (the normal .build stays) and
# runs the whole suite there. The CLI, outbox-mock and the crash child that the tests spawn are the sanitized builds
# too; every process writes its reports to DIR/reports/<kind>.<pid> (log_path), so a child's report is kept even
# though the test captured its stderr. Prints each report's SUMMARY line and fails when there is any, or when a test
# failed. Suppressions: scripts/tsan.supp and scripts/lsan.supp, each justified there.
# Usage: scripts/sanitize.sh thread|address   (SWIFT, OUTBOX_TIME_SCALE from the environment)
set -uo pipefail
kind=$1
root=$(cd "$(dirname "$0")/.." && pwd)
swift=${SWIFT:-swift}
case "$kind" in
  thread) scratch="$root/.build-tsan"; prefix=tsan ;;
  address) scratch="$root/.build-asan"; prefix=asan ;;
  *) echo "usage: $0 thread|address" >&2; exit 2 ;;
esac
cd "$root"
start=$(date +%s)
# The test bundle and the executables its tests run (they are its dependencies), not every dependency's tools.
"$swift" build --product OutboxPackageTests --sanitize="$kind" --scratch-path "$scratch" || exit 1
built=$(date +%s)
reports="$scratch/reports"
rm -rf "$reports"; mkdir -p "$reports"
# OUTBOX_TIME_SCALE: the tests' few wall-clock bounds widen by this (TestSupport.swift, testTimeScale).
export OUTBOX_TIME_SCALE=${OUTBOX_TIME_SCALE:-4}
if [[ $kind == thread ]]; then
  # halt_on_error=0: every race of the run is reported, not only the first; the process still exits 66 at the end.
  export TSAN_OPTIONS="suppressions=$root/scripts/tsan.supp halt_on_error=0 second_deadlock_stack=1 log_path=$reports/$prefix"
else
  # detect_leaks=1: LeakSanitizer at every process's exit, with scripts/lsan.supp.
  export ASAN_OPTIONS="detect_leaks=1 halt_on_error=1 log_path=$reports/$prefix"
  export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp print_suppressions=0"
fi
"$swift" test --skip-build --sanitize="$kind" --scratch-path "$scratch" 2>&1 | tee "$scratch/sanitize.log"
status=${PIPESTATUS[0]}
end=$(date +%s)
shopt -s nullglob
files=("$reports"/$prefix.*)
echo "sanitize $kind: build $((built - start)) s, tests $((end - built)) s, test exit status $status, ${#files[@]} report file(s) in $reports"
if (( ${#files[@]} > 0 )); then
  grep -h '^SUMMARY:' "${files[@]}" | sort | uniq -c | sort -rn
  exit 1
fi
exit "$status"
