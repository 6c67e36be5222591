#!/usr/bin/env bash
# End-to-end check of the release CLI as linked by `make cli` (its own libcurl and Debian's static OpenSSL;
# `make cli` runs this after every link):
#
#   scripts/cli-check.sh CLI
#
# 1. `outbox emit` delivers 40 events over plain HTTP;
# 2. over HTTPS to a server with a fresh self-signed certificate, nothing is delivered (verification is on) and
#    the 40 events stay stored;
# 3. with that certificate as --ca-file, all 40 are delivered.
# The server is Python's http.server on 127.0.0.1 (POST answers 200). Skipped, saying why, without python3 or
# openssl.
set -euo pipefail

cli=${1:?usage: cli-check.sh CLI}
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

cat > "$work/server.py" <<'EOF'
import http.server, ssl, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        pass  # a client refusing the certificate is expected
server = Server(("127.0.0.1", 0), Handler)
if sys.argv[1] == "tls":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
print(server.server_address[1], flush=True)
server.serve_forever()
EOF

start_server() {   # MODE → prints the port
    local out=$work/$1.port
    python3 "$work/server.py" "$1" "$work/cert.pem" "$work/key.pem" > "$out" &
    pids+=($!)
    for _ in $(seq 1 100); do
        if [ -s "$out" ]; then head -1 "$out"; return; fi
        sleep 0.1
    done
    echo "cli-check: the $1 server did not start" >&2
    exit 1
}
plain=$(start_server plain)
tls=$(start_server tls)

field() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
emit() {   # STORE ENDPOINT TIMEOUT [options] → the emit's JSON line
    local store=$1 endpoint=$2 timeout=$3; shift 3
    "$cli" emit --store "$work/$store" --count "${COUNT:-40}" --endpoint "$endpoint" --app-secret check \
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

expect "HTTP delivers" "$(emit plain.sqlite "http://127.0.0.1:$plain" 30)" 40 0
expect "HTTPS refuses an unknown certificate" "$(emit refused.sqlite "https://127.0.0.1:$tls" 2)" 0 40
expect "HTTPS delivers with --ca-file" \
    "$(emit trusted.sqlite "https://127.0.0.1:$tls" 30 --ca-file "$work/cert.pem")" 40 0
