"""A test HTTP(S) server: Python's http.server on 127.0.0.1, a free port; POST answers 200 with the request body.
Used by Tests/OutboxTests/TLSTestServer.swift and scripts/cli-check.sh; tests only.

    python3 scripts/https-test-server.py plain|tls CERT KEY [--exit-with-stdin]

Prints its port once it listens. `tls` serves the PEM certificate and key; the handshake happens in the
connection's thread, not in accept(), so one stuck client cannot block the rest. `--exit-with-stdin` exits when
stdin closes: the Swift tests' way to make sure no server outlives its test (SIGTERM may be blocked there:
libdispatch's threads block signals and a spawned child inherits the mask)."""
import http.server, os, ssl, sys, threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client refusing the certificate is expected


mode, certificate, key = sys.argv[1:4]
server = Server(("127.0.0.1", 0), Handler)
if mode == "tls":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
if "--exit-with-stdin" in sys.argv[4:]:
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
print(server.server_address[1], flush=True)
server.serve_forever()
