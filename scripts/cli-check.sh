#!/usr/bin/env bash
# End-to-end check of the release CLI as shipped (Debian's libcurl; `make test` runs it through `make cli-check`):
#
#   scripts/cli-check.sh CLI
#
# 1. `outbox emit` delivers 40 events over plain HTTP;
# 2. over HTTPS to a server with a fresh self-signed certificate, nothing is delivered (verification is on) and
#    the 40 events stay stored;
# 3. with that certificate as --ca-file, all 40 are delivered;
# 4. `outbox fleet` (SPEC F1–F2): a small fleet against its in-process mock loses nothing (exit 0), and against nginx,
#    which is no outbox-mock, reports "lost": null with exit 2;
# 5. D15: `emit --to` beside `--endpoint` is refused (exit 64) naming both, and nothing is stored.
# The server is Debian's nginx on 127.0.0.1 with a fresh self-signed certificate, as in the transport tests.
# Skipped, saying why, without python3, openssl or nginx.
set -euo pipefail

cli=${1:?usage: cli-check.sh CLI}
count=40
nginx=/usr/sbin/nginx
for tool in python3 openssl "$nginx"; do
    command -v "$tool" >/dev/null || { echo "cli-check: skipped: no $tool"; exit 0; }
done

work=$(mktemp -d)
cleanup() {
    if [ -s "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" \
    -out "$work/cert.pem" -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
    >/dev/null 2>&1

# Two free ports on loopback (bound and let go: nginx takes them right after).
read -r plain tls < <(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
# nginx answers every request to /logs with 200 (the engine's delivery counts the 2xx; the mock's checks are the
# end-to-end tests' business), over plain HTTP and over TLS with the throwaway certificate.
cat > "$work/nginx.conf" <<CONF
pid $work/nginx.pid;
worker_processes 1;
error_log $work/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $work/body;
    client_max_body_size 64m;
    server { listen 127.0.0.1:$plain; location /logs { return 200; } }
    server {
        listen 127.0.0.1:$tls ssl;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        location /logs { return 200; }
    }
}
CONF
"$nginx" -p "$work" -c "$work/nginx.conf"   # daemonises; its pid file is how cleanup stops it
for port in "$plain" "$tls"; do
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.05
    done
done

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
# X3a: logs still pending at --timeout make `emit --wait-delivered` exit 1 (the JSON is printed all the same).
refused=$(emit refused.sqlite "https://127.0.0.1:$tls" 2) && { echo "cli-check: FAILED: emit exited 0 with logs pending" >&2; exit 1; }
expect "HTTPS refuses an unknown certificate (exit 1, logs pending)" "$refused" 0 "$count"
expect "HTTPS delivers with --ca-file" \
    "$(emit trusted.sqlite "https://127.0.0.1:$tls" 30 --ca-file "$work/cert.pem")" "$count" 0

# K1: a store sealed with --store-key-file delivers; status and dead-letters need the key; a key file that others
# can read is refused, saying so.
fail() { echo "cli-check: FAILED: $1" >&2; exit 1; }
head -c 32 /dev/urandom >"$work/store.key"
chmod 600 "$work/store.key"
expect "a sealed store delivers (--store-key-file)" \
    "$(emit sealed.sqlite "http://127.0.0.1:$plain" 30 --store-key-file "$work/store.key")" "$count" 0
"$cli" status --store "$work/sealed.sqlite" 2>"$work/keyless.err" && fail "status read a sealed store without its key"
grep -q "store key invalid" "$work/keyless.err" || fail "status without the key: $(cat "$work/keyless.err")"
[ "$("$cli" status --store "$work/sealed.sqlite" --store-key-file "$work/store.key" | field pending_normal)" = 0 ] \
    || fail "status with the key"
"$cli" dead-letters --store "$work/sealed.sqlite" --store-key-file "$work/store.key" >/dev/null || fail "dead-letters with the key"
chmod 640 "$work/store.key"
"$cli" status --store "$work/sealed.sqlite" --store-key-file "$work/store.key" 2>"$work/mode.err" \
    && fail "a key file readable by its group was accepted"
grep -q "chmod 600" "$work/mode.err" || fail "a group-readable key file: $(cat "$work/mode.err")"
chmod 600 "$work/store.key"
echo "cli-check: ok: sealed stores (--store-key-file on emit, status, dead-letters)"

# D15: several destinations go in --to alone; beside the single destination's --endpoint, a usage error naming both.
status=0
"$cli" emit --store "$work/to.sqlite" --count 1 --to "ops=otlp,endpoint=http://127.0.0.1:$plain" \
    --endpoint "http://127.0.0.1:$plain" 2>"$work/to.err" || status=$?
[ "$status" = 64 ] || fail "--to beside --endpoint: exit $status, $(cat "$work/to.err")"
grep -q -- "--to and --endpoint do not go together" "$work/to.err" || fail "--to beside --endpoint: $(cat "$work/to.err")"
[ ! -e "$work/to.sqlite" ] || fail "--to beside --endpoint created the store"
echo "cli-check: ok: --to beside --endpoint is refused"

fleet() { "$cli" fleet --devices 3 --events 20 --testing --interval 0.1 --retry-intervals 0.1 --timeout 30 "$@"; }
status=0; json=$(fleet) || status=$?
# 3 devices × (20 events + a startSession and an endSession log each).
if [ "$status" != 0 ] || [ "$(field lost <<<"$json")" != 0 ] || [ "$(field delivered <<<"$json")" != 66 ]; then
    echo "cli-check: FAILED: fleet against its in-process mock: exit $status, $json" >&2
    exit 1
fi
echo "cli-check: ok: fleet loses nothing"
status=0; json=$(fleet --store-key-file "$work/store.key") || status=$?
[ "$status" = 0 ] && [ "$(field lost <<<"$json")" = 0 ] || fail "fleet with sealed stores: exit $status, $json"
echo "cli-check: ok: fleet with sealed stores loses nothing"
status=0; json=$(fleet --endpoint "http://127.0.0.1:$plain" 2>/dev/null) || status=$?
if [ "$status" != 2 ] || [ "$(field lost <<<"$json")" != None ]; then
    echo "cli-check: FAILED: fleet against a server that is not an outbox-mock: exit $status, $json" >&2
    exit 1
fi
echo "cli-check: ok: fleet without an outbox-mock reports lost null"
