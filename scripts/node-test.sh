#!/usr/bin/env bash
# SPEC E4: runs examples/node/demo.js against a fresh outbox-mock; passes when it exits 0 by itself and printed
# {"tracked": N, "delivered": N}. Usage: scripts/node-test.sh OUTBOX-MOCK [N]
set -euo pipefail
mock=$1
count=${2:-500}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/start-mock.sh"
start_mock "$mock"
# The demo must end by itself: a timeout here means a handle kept Node's loop alive.
output=$(timeout 60 "${NODE:-node}" "$root/examples/node/demo.js" "$url" "$count")
echo "node-test: $output"
unique=$(curl -fsS "$url/_mock/stats" | sed -n 's/.*"logs_unique" *: *\([0-9]*\).*/\1/p')
[[ "$output" == "{\"tracked\": $count, \"delivered\": $count}" ]] || { echo "node-test: FAIL (demo output)"; exit 1; }
[[ "$unique" == "$count" ]] || { echo "node-test: FAIL (the mock has $unique unique logs, not $count)"; exit 1; }
echo "node-test: passed (the mock has all $count logs; node exited 0 by itself)"

# The rest of the addon's API (codes of a refused configuration, setEnabled, update), with node's test runner.
OUTBOX_MOCK_URL="$url" "${NODE:-node}" --test "$root/Tests/Node/"

# The two libuv copies: Node's dlopen of the addon loads libOutbox.so.0 (and Debian's libuv.so.1 with it), and every
# uv_* reference of libOutbox.so.0 (all bound at load: LD_BIND_NOW) must bind to the node executable's own uv_*,
# none to libuv.so.1.
bindings=$(LD_BIND_NOW=1 LD_DEBUG=bindings "${NODE:-node}" -e "require('$root/examples/node/build/outbox.node')" 2>&1 \
  | grep "libOutbox.so.0 \[0\] to .*symbol \`uv_" || true)
to_node=$(grep -c " to [^ ]*node \[0\]" <<<"$bindings" || true)
elsewhere=$(grep -vc " to [^ ]*node \[0\]" <<<"$bindings" || true)
if [[ -z "$bindings" || "$elsewhere" != 0 ]]; then
  echo "node-test: FAIL (libOutbox.so.0's uv_* bindings: $to_node to node, $elsewhere elsewhere)"
  grep -v " to [^ ]*node \[0\]" <<<"$bindings" | head -5
  exit 1
fi
echo "node-test: libOutbox.so.0 loaded by dlopen; its $to_node uv_* bindings all go to node's own libuv"
