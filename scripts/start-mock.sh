# Sourced by the C and Node checks: `start_mock MOCK` starts outbox-mock on a free loopback port in the background,
# stops it when the calling script exits, and sets `url` once it listens (exits 1 if it never does).
start_mock() {
    mock_log=$(mktemp)
    "$1" --port 0 >"$mock_log" 2>&1 &
    mock_pid=$!
    trap 'kill $mock_pid 2>/dev/null; wait $mock_pid 2>/dev/null; rm -f "$mock_log"' EXIT
    for _ in $(seq 100); do grep -q 'listening on' "$mock_log" && break; sleep 0.1; done
    url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$mock_log" | head -1)
    [[ -n "$url" ]] || { echo "outbox-mock did not start:"; cat "$mock_log"; exit 1; }
}
