#!/usr/bin/env bash
# End-to-end check of the release CLI as shipped (Debian's libcurl; `make test` runs it through `make cli-check`):
#
#   scripts/cli-check.sh CLI
#
# 1. `outbox emit` delivers 40 events over plain HTTP;
# 2. over HTTPS to a server with a fresh self-signed certificate, nothing is delivered (verification is on) and
#    the 40 events stay stored;
# 3. with that certificate as --ca-file, all 40 are delivered.
# The server is scripts/https-test-server.py (Python's http.server on 127.0.0.1; the TLS tests use it too).
# Skipped, saying why, without python3 or openssl.
set -euo pipefail

cli=${1:?usage: cli-check.sh CLI}
server=$(cd "$(dirname "$0")" && pwd)/https-test-server.py
count=40
for tool in python3 openssl; do
    command -v "$tool" >/dev/null || { echo "cli-check: skipped: no $tool"; exit 0; }
done

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" \
    -out "$work/cert.pem" -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
    >/dev/null 2>&1

# Started from this shell, not from a $(…) subshell: `cleanup` must know their pids, or they outlive the check.
start_server() {   # MODE: in the background; it writes its port to $work/MODE.port
    python3 "$server" "$1" "$work/cert.pem" "$work/key.pem" > "$work/$1.port" 2>/dev/null &
    pids+=($!)
}
port_of() {   # MODE → its port, once it listens
    for _ in $(seq 1 100); do
        if [ -s "$work/$1.port" ]; then head -1 "$work/$1.port"; return; fi
        sleep 0.1
    done
    echo "cli-check: the $1 server did not start" >&2
    exit 1
}
start_server plain
start_server tls
plain=$(port_of plain)
tls=$(port_of tls)

field() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
emit() {   # STORE ENDPOINT TIMEOUT [options] → the emit's JSON line
    local store=$1 endpoint=$2 timeout=$3; shift 3
    "$cli" emit --store "$work/$store" --count "$count" --endpoint "$endpoint" --app-secret check \
        --wait-delivered --timeout "$timeout" "$@"
}
expect() {   # WHAT JSON delivered pending
    local what=$1 json=$2
    if [ "$(field delivered <<<"$json")" != "$3" ] || [ "$(field pending <<<"$json")" != "$4" ]; then
        echo "cli-check: FAILED: $what: expected delivered $3, pending $4; got $json" >&2
        exit 1
    fi
    echo "cli-check: ok: $what"
}

expect "HTTP delivers" "$(emit plain.sqlite "http://127.0.0.1:$plain" 30)" "$count" 0
expect "HTTPS refuses an unknown certificate" "$(emit refused.sqlite "https://127.0.0.1:$tls" 2)" 0 "$count"
expect "HTTPS delivers with --ca-file" \
    "$(emit trusted.sqlite "https://127.0.0.1:$tls" 30 --ca-file "$work/cert.pem")" "$count" 0
