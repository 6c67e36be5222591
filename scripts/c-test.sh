#!/usr/bin/env bash
# SPEC E1–E3 from C: builds Tests/C/outbox_c_test.c only against the outbox.h and libOutbox.so installed under
# PREFIX (through pkg-config, -Wall -Wextra -Werror) and runs it against outbox-mock.
# Usage: scripts/c-test.sh PREFIX OUTBOX-MOCK   (C_SANITIZE=address adds AddressSanitizer on the C side)
set -euo pipefail
prefix=$1
mock=$2
root=$(cd "$(dirname "$0")/.." && pwd)
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cc=${CC:-cc}
flags=(-std=gnu11 -O1 -g -Wall -Wextra -Werror)
if [[ -n "${C_SANITIZE:-}" ]]; then flags+=("-fsanitize=$C_SANITIZE" -fno-omit-frame-pointer); fi
# SPEC E3: the library exports exactly the functions the header declares.
declared=$(sed -n 's/^[a-z_ 0-9]*[ *]\(outbox_[a-z_]*\)(.*/\1/p' "$prefix/include/outbox.h" | sort -u)
exported=$(nm -D --defined-only "$prefix/lib/libOutbox.so.0" | awk '$3 ~ /^outbox_/ {print $3}' | sort -u)
if [[ "$declared" != "$exported" ]]; then
  echo "c-test: FAIL the exports of libOutbox.so.0 differ from outbox.h's functions:"
  diff <(echo "$declared") <(echo "$exported") || true
  exit 1
fi
echo "c-test: libOutbox.so.0 exports the $(wc -l <<<"$exported") functions of outbox.h and no other outbox_ symbol"
# SPEC P2: the installed header's macros and outbox.pc carry VERSION (outbox_version() is built from the macros;
# the C test checks it against them).
version=$(cat "$root/VERSION")
macros=$(sed -n 's/^#define OUTBOX_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' "$prefix/include/outbox.h" | paste -sd.)
[[ "$macros" == "$version" && "$(pkg-config --modversion outbox)" == "$version" ]] \
  || { echo "c-test: FAIL VERSION $version, outbox.h $macros, outbox.pc $(pkg-config --modversion outbox)"; exit 1; }
out="$prefix/outbox_c_test"
# shellcheck disable=SC2046  # pkg-config's words are meant to split
"$cc" "${flags[@]}" -o "$out" "$root/Tests/C/outbox_c_test.c" $(pkg-config --cflags outbox libuv libcurl) \
  $(pkg-config --libs outbox libuv libcurl) -Wl,-rpath,"$(pkg-config --variable=libdir outbox)" -lpthread
echo "c-test: built $out with $cc ${flags[*]}"
"$out" "$mock"

# The example of docs/EMBEDDING.md, built the way its comment says, must deliver its 100 events.
example="$prefix/example-host"
# shellcheck disable=SC2046
"$cc" "${flags[@]}" -o "$example" "$root/examples/c/host.c" $(pkg-config --cflags --libs outbox libuv) \
  -Wl,-rpath,"$(pkg-config --variable=libdir outbox)"
. "$root/scripts/start-mock.sh"
start_mock "$mock"
store=$(mktemp -u /tmp/outbox-example-XXXXXX.outbox)
timeout 60 "$example" "$url" "$store"
rm -f "$store" "$store"-* "$store".*
unique=$(curl -fsS "$url/_mock/stats" | sed -n 's/.*"logs_unique" *: *\([0-9]*\).*/\1/p')
# 100 events, the sessions' logs, the screen and the timed load.
if [[ "$unique" -ge 103 ]]; then echo "c-test: examples/c/host.c delivered ($unique logs)"; else
  echo "c-test: FAIL examples/c/host.c: the mock has $unique logs"; exit 1; fi
logs=$(curl -fsS "$url/_mock/logs")
for needle in '"type":"screen"' '"name":"load"' '"type":"endSession"'; do
  grep -qF "$needle" <<<"$logs" || { echo "c-test: FAIL examples/c/host.c: no $needle log at the mock"; exit 1; }
done
