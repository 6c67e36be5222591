#!/usr/bin/env bash
# Screenshot of the mock server's live page (SPEC M4) in a real headless browser.
#
#   scripts/mock-screenshot.sh [OUTPUT.png]      (default: .build/mock-page.png)
#
# Builds and starts outbox-mock on a free port with a scenario that injects every kind of fault,
# sends some traffic with curl (fresh, old and duplicate logs), lets the page poll /_mock/stats, and
# takes a screenshot with Debian's chromium (installed with apt-get when missing). Traffic goes to
# 127.0.0.1 only. Set SKIP_BUILD=1 to use an existing .build/debug/outbox-mock.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${1:-.build/mock-page.png}
mkdir -p "$(dirname "$out")"

if ! command -v chromium >/dev/null 2>&1; then
    echo "installing chromium (apt-get)…" >&2
    (apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; })
fi
command -v curl >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y curl >/dev/null; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    swift build --product outbox-mock >&2
fi
bin=$(swift build --show-bin-path)/outbox-mock

work=$(mktemp -d)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -INT "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/scenario.json" <<'EOF'
{"seed": 7, "description": "screenshot traffic: one of each fault, then a flaky tail",
 "rules": [
  {"match": {"requests": "3-4"}, "respond": {"status": 503}},
  {"match": {"requests": "6"}, "respond": {"status": 429, "headers": {"Retry-After": "1"}}},
  {"match": {"requests": "8"}, "action": "reset"},
  {"match": {"requests": "10"}, "action": "drop_after_body"},
  {"match": {"requests": "12"}, "action": "malformed"},
  {"match": {"requests": "14"}, "action": "hang"},
  {"match": {"requests": "16"}, "respond": {"status": 500, "delay_ms": 100}},
  {"match": {"probability": 0.15}, "respond": {"status": 503}}
 ]}
EOF

"$bin" --port 0 --scenario "$work/scenario.json" > "$work/stdout" 2>"$work/stderr" &
server_pid=$!
for _ in $(seq 1 100); do
    grep -q "listening on" "$work/stdout" 2>/dev/null && break
    sleep 0.1
done
url=$(sed -n 's/^listening on //p' "$work/stdout")
[ -n "$url" ] || { echo "outbox-mock did not start" >&2; cat "$work/stderr" >&2; exit 1; }
echo "server: $url" >&2

device='{"sdkName":"outbox.linux","sdkVersion":"0.1.0","osName":"Debian GNU/Linux","osVersion":"12","locale":"en_US","timeZoneOffset":60,"appVersion":"1.0","appBuild":"1"}'
now=$(date +%s)
stamp() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.000Z; }
# A batch of N events whose timestamps are AGE seconds old (spread a little).
batch() {
    local n=$1 age=$2 logs="" i
    for i in $(seq 1 "$n"); do
        local id; id=$(cat /proc/sys/kernel/random/uuid)
        logs+="${logs:+,}{\"type\":\"event\",\"id\":\"$id\",\"timestamp\":\"$(stamp $((now - age - i)))\",\"sid\":null,\"device\":$device,\"name\":\"Song played\",\"typedProperties\":[{\"type\":\"long\",\"name\":\"i\",\"value\":$i}]}"
    done
    printf '{"logs":[%s]}' "$logs"
}
post() {  # post FILE [INSTALL]
    curl -s -o /dev/null --max-time 1 -X POST "$url/logs?api-version=1.0.0" \
        -H 'Content-Type: application/json' -H 'App-Secret: screenshot' \
        -H "Install-ID: ${2:-6f1d2a0e-3c51-4f7a-9b43-5a2f0e6f9d10}" --data-binary @"$1" || true
}

ages=(0 1 3 20 45 200 900 5000 40000 100000 200000)
for r in $(seq 1 40); do
    age=${ages[$((r % ${#ages[@]}))]}
    batch $((r % 7 + 3)) "$age" > "$work/b$r.json"
    install=6f1d2a0e-3c51-4f7a-9b43-5a2f0e6f9d1$((r % 3))
    post "$work/b$r.json" "$install"
    # Re-send some batches, as a client does after a lost acknowledgement.
    if [ $((r % 9)) = 0 ]; then post "$work/b$r.json" "$install"; fi
done
curl -s "$url/_mock/stats" >&2; echo >&2

# The page polls every second; give it a few seconds of virtual time to render.
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,860 \
    --virtual-time-budget=3000 --screenshot="$out" "$url/_mock/" 2>"$work/chromium.log" >/dev/null || {
        cat "$work/chromium.log" >&2; exit 1; }

kill -INT "$server_pid"
wait "$server_pid"
status=$?
server_pid=""
[ "$status" = 0 ] || { echo "outbox-mock exited with $status on SIGINT" >&2; exit 1; }
echo "screenshot: $out"
