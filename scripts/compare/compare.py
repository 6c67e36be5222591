#!/usr/bin/env python3
"""`make compare` (SPEC V6): the official Python clients of seven vendors and Outbox through the same faults.

    .build/vendor-venv/bin/python scripts/compare/compare.py [--mock PATH] [--outbox PATH] [--out compare]
                                                             [--only CLIENT,…] [--scenarios NAME,…] [--jobs 3]
                                                             [--merge]

Each client × scenario run gets its own outbox-mock (its own port and scenario file), so runs go in parallel
(--jobs at a time). Mixpanel and PostHog go through an nginx TLS front (a throwaway self-signed certificate,
trusted through REQUESTS_CA_BUNDLE), because their urllib3 retry adapters are mounted on https:// only, as their
sources at the pinned versions show (scripts/compare/venv.sh). Each Python client is driven by scripts/compare/clients.py, unmodified but for its host;
Outbox by `outbox emit`. A run ends when every tracked event has arrived, when the client process ends, or 25 s
after the client's last call (CAP_S); what has not arrived by then is lost, except what Outbox still holds in its
store (the `kept` column). Counts, duplicates and delays come from the mock (`/_mock/stats`, `/_mock/logs`).
The `steady` scenario (the fault runs' load on a healthy server) is each client's baseline: a run's added delay is
its p99 delay over every tracked event, an undelivered one counting as infinite, minus the client's steady p99
(SPEC D9a); the report sets Outbox's beside each wire's reference client. With --merge, the runs of an earlier
OUT/results.json that this invocation does not repeat are kept and reported beside its own (a subset re-run:
`--only outbox-amplitude,amplitude --scenarios poison --merge`), and the report names each invocation. --mock and
--outbox take other builds (a debug build for a quick check: `--mock .build/debug/outbox-mock --outbox .build/debug/outbox --out /tmp/c
--only outbox,segment --scenarios steady,outage`; only a release build's figures belong in compare/).
Writes OUT/REPORT.md, OUT/compare.svg and OUT/results.json.
"""
import argparse
import concurrent.futures
import datetime
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENTS_PY = os.path.join(ROOT, "scripts", "compare", "clients.py")
NGINX = "/usr/sbin/nginx"
CAP_S = 25.0            # a run ends this long after the client's last call
GRACE_S = 1.5           # once everything arrived, wait this long for late duplicates
PACED = {"count": 300, "rate": 20.0}     # 15 s of tracking, so that the faults fall inside it
BURST = {"count": 1000, "rate": None}    # as fast as the caller can
POISON_EVERY = 50

THROUGHPUT = {"count": 100000, "rate": None}  # the caller's cost and the drain, alone on the machine

# Outbox on each wire beside that wire's official client (SPEC D9, D9a); App Center's row stays. GA4 has no official
# Python client: Outbox alone on it. Mixpanel's client is run on two paths: `mixpanel` (/track, its default) and
# `mixpanel-import` (/import, the path Outbox's Mixpanel wire takes, D14).
CLIENTS = ["outbox", "outbox-segment", "segment", "outbox-posthog", "posthog", "outbox-otlp", "otel", "snowplow",
           "mixpanel", "outbox-mixpanel", "mixpanel-import", "outbox-sensors", "sensors", "outbox-ga4",
           "outbox-amplitude", "amplitude"]
VENDOR = {"outbox": "appcenter", "segment": "segment", "posthog": "posthog", "snowplow": "snowplow",
          "mixpanel": "mixpanel", "otel": "otlp", "outbox-segment": "segment", "outbox-posthog": "posthog",
          "outbox-otlp": "otlp", "outbox-mixpanel": "mixpanel", "mixpanel-import": "mixpanel",
          "outbox-sensors": "sensors", "sensors": "sensors", "outbox-ga4": "ga4", "outbox-amplitude": "amplitude",
          "amplitude": "amplitude"}
WIRE = {"outbox": "App Center", "outbox-segment": "Segment", "segment": "Segment", "outbox-posthog": "PostHog",
        "posthog": "PostHog", "outbox-otlp": "OTLP", "otel": "OTLP", "snowplow": "Snowplow", "mixpanel": "Mixpanel",
        "outbox-mixpanel": "Mixpanel", "mixpanel-import": "Mixpanel", "outbox-sensors": "Sensors",
        "sensors": "Sensors", "outbox-ga4": "GA4", "outbox-amplitude": "Amplitude", "amplitude": "Amplitude"}
PAIRS = [("Segment", "outbox-segment", "segment"), ("PostHog", "outbox-posthog", "posthog"),
         ("OTLP", "outbox-otlp", "otel"), ("Sensors", "outbox-sensors", "sensors"),
         ("Amplitude", "outbox-amplitude", "amplitude"), ("Mixpanel", "outbox-mixpanel", "mixpanel-import")]
# Outbox's flags per wire: the destination and its credentials (the newer wires' secrets in the environment, OUTBOX_ENV,
# as they are kept out of argv).
OUTBOX_WIRE = {"outbox": ["--app-secret", "compare"],
               "outbox-segment": ["--destination", "segment", "--write-key", "compare"],
               "outbox-posthog": ["--destination", "posthog", "--api-key", "phc_compare"],
               "outbox-otlp": ["--destination", "otlp"],
               "outbox-mixpanel": ["--destination", "mixpanel", "--service-account-user", "compare.sa",
                                   "--project-id", "1"],
               "outbox-sensors": ["--destination", "sensors"],
               "outbox-ga4": ["--destination", "ga4", "--measurement-id", "G-COMPARE01"],
               "outbox-amplitude": ["--destination", "amplitude"]}
OUTBOX_ENV = {"outbox-mixpanel": {"OUTBOX_SERVICE_ACCOUNT_SECRET": "compare-secret"},
              "outbox-ga4": {"OUTBOX_API_SECRET": "compare-secret"},
              "outbox-amplitude": {"OUTBOX_API_KEY": "amp_compare"}}
# Sensors' endpoint is the whole URL, its project in the query (D11), for its SDK and for Outbox alike.
ENDPOINT_PATH = {"outbox-sensors": "/sa?project=compare", "sensors": "/sa?project=compare"}
# Mixpanel's default consumer sends each event inside track() (about 300 a second here), on either path: 100 000
# would take minutes and measure the round trip, which its ok row already shows.
NO_THROUGHPUT = {"mixpanel", "mixpanel-import"}


def is_outbox(client):
    return client.startswith("outbox")
TLS_CLIENTS = {"mixpanel", "mixpanel-import", "posthog"}
PACKAGES = {"segment": "segment-analytics-python", "posthog": "posthog", "snowplow": "snowplow-tracker",
            "mixpanel": "mixpanel", "otel": "opentelemetry-exporter-otlp-proto-http",
            "mixpanel-import": "mixpanel", "sensors": "sensorsanalyticssdk", "amplitude": "amplitude-analytics"}
SC = os.path.join(ROOT, "Fixtures", "scenarios")
SCENARIOS = [  # name, scenario file, load, what it is
    ("ok", f"{SC}/ok.json", BURST, "healthy server, 1 000 events as fast as the caller can"),
    ("steady", f"{SC}/ok.json", PACED, "healthy server, 300 events at 20/s, nothing injected: the baseline of the "
     "added delay (SPEC D9a)"),
    ("flaky", f"{SC}/compare/flaky.json", PACED, "20 % of requests 503 (seeded)"),
    ("outage", f"{SC}/compare/outage.json", PACED, "connections refused from 2 s to 22 s"),
    ("lost-ack", f"{SC}/compare/lost-ack.json", PACED, "20 % of requests recorded, then closed unanswered"),
    ("throttle", f"{SC}/compare/throttle.json", PACED, "429 + Retry-After: 2 from 2 s to 8 s"),
    ("poison", f"{SC}/compare/poison.json", PACED, "a request holding a poison event (1 in 50) gets 400"),
    ("exit", f"{SC}/ok.json", BURST, "healthy server, 1 000 events, then the process exits without flush"),
    ("throughput", f"{SC}/ok.json", THROUGHPUT,
     "healthy server, 100 000 events as fast as the caller can, each client alone on the machine"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def get_json(url, lines=False):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None   # the mock refuses connections during an outage
    if lines:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# The scenarios whose added delay the summary compares (SPEC D9a): the faults that every client survives in principle.
FAULTS = ["flaky", "outage", "lost-ack", "throttle"]
# Each wire's reference client (SPEC D9a): its official client, which queues rather than sends inside the tracking
# call; App Center and GA4 have none, nor has Mixpanel (its client sends inside the call on either path), and
# Segment's client stands in, as it does on any wire whose client lost something.
REFERENCE = {"App Center": None, "Segment": "segment", "PostHog": "posthog", "OTLP": "otel", "Sensors": "sensors",
             "GA4": None, "Amplitude": "amplitude", "Mixpanel": None}
FALLBACK_REFERENCE = "segment"


def event_ms(vendor, entry):
    """The event's own time in a line of `/_mock/logs`, epoch ms, read where the mock reads it for `delay_ms`
    (MockServer/OutboxMock/Vendors); None when the event carries none."""
    try:
        if vendor == "otlp":
            # The mock's line holds the record as `logRecord` beside its resource and scope; OpenTelemetry's Python
            # SDK sets only `observedTimeUnixNano` unless the caller passes a time (the mock's own rule).
            record = entry.get("logRecord", entry)
            nanos = int(record.get("timeUnixNano") or 0) or int(record["observedTimeUnixNano"])
            return nanos / 1e6
        if vendor == "snowplow":
            return float(entry.get("ttm") or entry["dtm"])
        if vendor == "mixpanel":
            value = float(entry["properties"]["time"])
            return value if value > 1e11 else value * 1000   # seconds (the Python client's float) or ms
        if vendor in ("sensors", "amplitude"):
            return float(entry["time"])
        if vendor == "ga4":
            return int(entry["timestamp_micros"]) / 1000
        return parse_time(entry["timestamp"]) * 1000
    except (KeyError, TypeError, ValueError):
        return None


def p99_over_tracked(delays_ms, tracked):
    """The p99 delay over every tracked event, an event not delivered counting as infinite (SPEC D9a); the rank is
    the mock's (`delay_ms`: the ⌈0.99·n⌉-th smallest), so with nothing undelivered it is the mock's p99."""
    if not tracked:
        return None
    rank = -(-99 * tracked // 100)
    if rank > len(delays_ms):
        return float("inf")
    return sorted(delays_ms)[rank - 1]


def fault_end_s(file):
    """When the scenario's last timed fault ends, in seconds after the mock's start (the outage's recovery); None
    for a scenario whose faults have no end."""
    with open(file) as f:
        rules = json.load(f).get("rules", [])
    ends = [rule.get("match", {}).get("until_s") for rule in rules]
    ends = [end for end in ends if end is not None]
    return max(ends) if ends else None


def json_delay(ms):
    """A delay for results.json, which has no infinity: seconds, or the string "inf"."""
    if ms is None:
        return None
    return "inf" if ms == float("inf") else round(ms / 1000, 3)


class Run:
    """One client through one scenario, on its own mock (and TLS front)."""

    def __init__(self, tools, client, scenario):
        self.tools, self.client = tools, client
        self.name, self.file, self.load, _ = scenario
        self.dir = tempfile.mkdtemp(prefix=f"compare-{client}-{self.name}-", dir=tools.work)
        os.chmod(self.dir, 0o755)   # nginx's worker (another user when started as root) keeps bodies here
        self.procs = []

    def start_mock(self):
        mock = subprocess.Popen([self.tools.mock, "--port", "0", "--threads", "1", "--scenario", self.file],
                                stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "mock.err"), "w"),
                                text=True, start_new_session=True)
        self.procs.append(mock)
        line = mock.stdout.readline().strip()
        # The scenario's clock starts as the mock starts listening: `after_s`/`until_s` count from about here.
        self.mock_started = time.time()
        if not line.startswith("listening on "):
            raise RuntimeError(f"outbox-mock did not start: {line!r}")
        self.mock_url = line.split("listening on ", 1)[1]
        self.mock_port = int(self.mock_url.rsplit(":", 1)[1])

    def start_tls_front(self):
        port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        temp = "".join(f"    {kind}_temp_path {self.dir}/{kind};\n"
                       for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(conf, "w") as f:
            f.write(f"""pid {self.dir}/nginx.pid;
worker_processes 1;
error_log {self.dir}/nginx-error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
{temp}    client_max_body_size 64m;
    client_body_buffer_size 1m;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {self.tools.cert};
        ssl_certificate_key {self.tools.key};
        location / {{
            proxy_pass http://127.0.0.1:{self.mock_port};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream off;
            proxy_buffering off;
            proxy_read_timeout 60s;
        }}
    }}
}}
""")
        subprocess.run([NGINX, "-p", self.dir, "-c", conf], check=True)
        self.nginx_pid_file = os.path.join(self.dir, "nginx.pid")
        if not wait_port(port):
            raise RuntimeError("nginx did not start")
        return f"https://127.0.0.1:{port}"

    def stats(self):
        return get_json(self.mock_url + "/_mock/stats")

    def unique(self, stats):
        if stats is None:
            return None
        if self.client == "outbox":
            return stats["logs_unique"]
        return stats.get("vendors", {}).get(VENDOR[self.client], {}).get("events_unique", 0)

    def client_command(self, url, exit_without_flush):
        count, rate = self.load["count"], self.load["rate"]
        if is_outbox(self.client):
            cmd = [self.tools.outbox, "emit", "--store", os.path.join(self.dir, "outbox.sqlite"),
                   "--count", str(count), "--endpoint", url, "--name-prefix", "order"] + OUTBOX_WIRE[self.client]
            if rate:
                cmd += ["--rate", str(rate)]
            if self.name == "poison":
                cmd += ["--critical-every", str(POISON_EVERY)]
            if self.load is THROUGHPUT:
                # 100 000 events outgrow the default 10 MiB store, whose cap would evict the oldest (S2): the cap is
                # a disk budget the app sets, so this run gives it room (the Python clients keep their defaults).
                cmd += ["--max-storage-bytes", str(256 << 20)]
            if not exit_without_flush:
                cmd += ["--wait-delivered", "--timeout", str(CAP_S)]
            return cmd
        cmd = [sys.executable, CLIENTS_PY, self.client, url, "--count", str(count)]
        if rate:
            cmd += ["--rate", str(rate)]
        if self.name == "poison":
            cmd += ["--poison-every", str(POISON_EVERY)]
        if exit_without_flush:
            cmd += ["--exit-without-flush"]
        return cmd

    def launch(self, cmd):
        env = dict(os.environ, REQUESTS_CA_BUNDLE=self.tools.cert, PYTHONUNBUFFERED="1",
                   **OUTBOX_ENV.get(self.client, {}))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "client.err"), "a"),
                                text=True, env=env, start_new_session=True)
        self.procs.append(proc)
        lines = []

        def read():
            for line in proc.stdout:
                line = line.strip()
                if line.startswith("{"):
                    lines.append((time.time(), json.loads(line)))
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        return proc, lines, reader

    def execute(self):
        started = time.time()
        load = os.getloadavg()[0]
        try:
            self.start_mock()
            url = (self.start_tls_front() if self.client in TLS_CLIENTS else self.mock_url) \
                + ENDPOINT_PATH.get(self.client, "")
            self.url = url
            exiting = self.name == "exit"
            count = self.load["count"]
            proc, lines, reader = self.launch(self.client_command(url, exiting))
            first_call = time.time()
            last_call = None
            complete_at = None
            ended = "cap"
            # Outbox's emit prints its line at the end: its last call is due at count / rate (or at once).
            outbox_last_call = first_call + (count / self.load["rate"] if self.load["rate"] else 0)
            while True:
                time.sleep(0.25)
                now = time.time()
                tracked_line = next((d for _, d in lines if "tracked" in d), None)
                if not is_outbox(self.client) and tracked_line and last_call is None:
                    last_call = next(t for t, d in lines if "tracked" in d)
                    first_call = tracked_line["first_call_wall"]
                if is_outbox(self.client):
                    last_call = outbox_last_call if now >= outbox_last_call else None
                if proc.poll() is not None:
                    reader.join(timeout=2)
                    ended = "exited"
                    break
                unique = self.unique(self.stats())
                if unique is not None and unique >= count and not is_outbox(self.client) and not exiting:
                    complete_at = complete_at or now
                    if now - complete_at >= GRACE_S:
                        ended = "complete"
                        break
                if last_call is not None and now - last_call > CAP_S + (5 if is_outbox(self.client) else 0):
                    break
            self.stop(proc)
            reader.join(timeout=2)
            result = {"client": self.client, "scenario": self.name, "ended": ended, "count": count}
            client_line = next((d for _, d in lines if "tracked" in d), {})
            result["client_line"] = client_line
            result["client_errors"] = next((d for _, d in lines if "flushed" in d), {})
            kept = 0
            if is_outbox(self.client):
                result["tracked"] = client_line.get("tracked", 0)
                if exiting:
                    # The next launch of the app: the same store, nothing new tracked; Outbox sends what the last
                    # run left on disk (SPEC S1), within the same cap.
                    relaunch, relaunch_lines, relaunch_reader = self.launch(
                        [self.tools.outbox, "emit", "--store", os.path.join(self.dir, "outbox.sqlite"), "--count", "0",
                         "--endpoint", url, "--wait-delivered", "--timeout", str(CAP_S)] + OUTBOX_WIRE[self.client])
                    try:
                        relaunch.wait(timeout=CAP_S + 10)
                    except subprocess.TimeoutExpired:
                        self.stop(relaunch)
                    relaunch_reader.join(timeout=2)
                    second = relaunch_lines[-1][1] if relaunch_lines else {}
                    result["relaunch_line"] = second
                    kept = second.get("pending", 0)
                else:
                    kept = client_line.get("pending", 0)
            else:
                result["tracked"] = client_line.get("tracked", 0)
            time.sleep(0.3)
            stats = self.stats() or {}
            logs = get_json(self.mock_url + "/_mock/logs", lines=True) or []
            if self.client == "outbox":
                delivered, duplicated = stats.get("logs_unique", 0), stats.get("logs_duplicate", 0)
                logs = [entry for entry in logs if entry.get("vendor", "appcenter") == "appcenter"]
            else:
                vendor = stats.get("vendors", {}).get(VENDOR[self.client], {})
                delivered, duplicated = vendor.get("events_unique", 0), vendor.get("events_duplicate", 0)
                result["vendor_stats"] = vendor
                logs = [entry for entry in logs if entry.get("vendor") == VENDOR[self.client]]
            arrivals = sorted(parse_time(entry["received_at"]) for entry in logs if "received_at" in entry)
            # Per-event delays, for the p99 over every tracked event (SPEC D9a): the mock's `delay_ms` is over the
            # delivered ones only.
            vendor = VENDOR[self.client]
            delays = []
            for entry in logs:
                at = event_ms(vendor, entry)
                if at is not None and "received_at" in entry:
                    delays.append(parse_time(entry["received_at"]) * 1000 - at)
            p99_all = p99_over_tracked(delays, result["tracked"])
            result.update(p99_all_s=json_delay(p99_all), undated=len(logs) - len(delays))
            fault_end = fault_end_s(self.file)
            if fault_end is not None and arrivals:
                result["last_after_recovery_s"] = round(arrivals[-1] - (self.mock_started + fault_end), 2)
            result.update(delivered=delivered, duplicated=duplicated, kept=kept,
                          lost=max(result["tracked"] - delivered - kept, 0),
                          delay_ms=stats.get("delay_ms") if delivered else None,
                          requests=stats.get("requests"), status_counts=stats.get("status_counts"),
                          faults=stats.get("faults"))
            if is_outbox(self.client) and not exiting and kept:
                # What the cap left in the store is not lost: the next launch of the app (same store, nothing new
                # tracked) sends it, within the same cap. Counted apart, after the figures above were read.
                relaunch, relaunch_lines, relaunch_reader = self.launch(
                    [self.tools.outbox, "emit", "--store", os.path.join(self.dir, "outbox.sqlite"), "--count", "0",
                     "--endpoint", url, "--wait-delivered", "--timeout", str(CAP_S)] + OUTBOX_WIRE[self.client])
                try:
                    relaunch.wait(timeout=CAP_S + 10)
                except subprocess.TimeoutExpired:
                    self.stop(relaunch)
                relaunch_reader.join(timeout=2)
                result["relaunch_line"] = relaunch_lines[-1][1] if relaunch_lines else {}
                result["delivered_on_relaunch"] = max((self.unique(self.stats()) or 0) - delivered, 0)
            if arrivals and delivered:
                span = arrivals[-1] - first_call
                result["drain_eps"] = delivered / span if span > 0 else None
                result["last_arrival_s"] = round(span, 2)
            if not is_outbox(self.client) and client_line.get("in_calls_s"):
                result["calls_per_s"] = client_line["tracked"] / client_line["in_calls_s"]
            elif is_outbox(self.client) and client_line.get("in_calls_us"):
                # Inside the tracking calls alone, as the Python clients measure theirs (`outbox emit`'s in_calls_us).
                result["calls_per_s"] = client_line["tracked"] / (client_line["in_calls_us"] / 1e6)
            result["wall_s"] = round(time.time() - started, 1)
            result["load_avg"] = round(load, 2)   # the machine's 1-min load average as the run started
            return result
        finally:
            self.cleanup()

    def stop(self, proc):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def cleanup(self):
        if getattr(self, "nginx_pid_file", None) and os.path.exists(self.nginx_pid_file):
            try:
                os.kill(int(open(self.nginx_pid_file).read().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        for proc in self.procs:
            self.stop(proc)


def last_call_or(lines, default):
    return lines[0][0] if lines else default


class Tools:
    def __init__(self, args):
        self.mock, self.outbox = os.path.abspath(args.mock), os.path.abspath(args.outbox)
        self.work = tempfile.mkdtemp(prefix="outbox-compare-")
        os.chmod(self.work, 0o755)
        self.cert, self.key = os.path.join(self.work, "cert.pem"), os.path.join(self.work, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", self.key, "-out", self.cert, "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, capture_output=True)


def otlp_served(tools):
    """Whether this outbox-mock speaks OTLP/HTTP (POST /v1/logs answered other than 404)."""
    mock = subprocess.Popen([tools.mock, "--port", "0", "--threads", "1"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        url = mock.stdout.readline().strip().split("listening on ", 1)[-1]
        request = urllib.request.Request(url + "/v1/logs", data=b"", method="POST",
                                         headers={"Content-Type": "application/x-protobuf"})
        try:
            urllib.request.urlopen(request, timeout=5)
            return True
        except urllib.error.HTTPError as error:
            return error.code != 404
        except OSError:
            return False
    finally:
        os.killpg(mock.pid, signal.SIGKILL)
        mock.wait()


def fmt(value, digits=0):
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def versions():
    out = {}
    for client, package in PACKAGES.items():
        try:
            out[client] = f"{package} {importlib.metadata.version(package)}"
        except importlib.metadata.PackageNotFoundError:
            out[client] = f"{package} (not installed)"
    return out


NOTES = {
    "outbox": "Durable store (SPEC S1): events are written to SQLite before `track` returns, so nothing is lost on "
              "exit — the next launch sends them (`exit` row: a second `outbox emit --count 0`). A batch that "
              "fails is retried after 5–10 s, 2.5–5 min, 10–20 min (R3, App Center's schedule, made for phones' "
              "batteries), but a failure also starts a fault (R9, on by default): while it holds Outbox sends one "
              "request at a time, the oldest waiting batch as a probe, 1 s apart doubling to 10 s, each interval "
              "drawn between half and all of its value, Retry-After a floor (R4); a probe's failure uses up no "
              "attempt, and its success makes every waiting batch due, drained from one request in flight widening "
              "to three (R10). So the server's recovery is noticed within seconds, not minutes, without a herd of "
              "retries during the fault; whatever is still waiting at the cap stays on disk (`kept`, not lost). A "
              "400 is bisected so that only the poison events are dead-lettered and their neighbours delivered (R1, "
              "R2). Ids make re-sends duplicates the server absorbs. On exit without "
              "flush, requests still in flight are cancelled and their events stay stored (C8): the next launch "
              "sends them again, and the server absorbs them as duplicates by id.",
    "outbox-segment": "Outbox as above, on Segment's wire (`--destination segment`): the same store, retries and "
                      "bisection; `messageId` is the log's id on every attempt, so the mock drops re-sends by it.",
    "outbox-posthog": "Outbox as above, on PostHog's wire (`--destination posthog`): `uuid` is the log's id on every "
                      "attempt; PostHog's own capture refuses a whole batch for one bad event, as the mock does, and "
                      "Outbox bisects down to it.",
    "outbox-otlp": "Outbox as above, on OTLP/HTTP (`--destination otlp`, protobuf): each record carries "
                   "`log.record.uid`, which the mock de-duplicates by (the exporter's records carry no id).",
    "segment": "In-memory queue; retries 408/429/5xx and network errors with 0.5·2ⁿ s back-off, 10 retries "
               "(≈ 3 min), Retry-After honoured uncounted; any other 4xx drops the whole batch (consumer.py:281-297), "
               "so one poison event loses its whole batch of up to 100. `atexit` only joins: the batch in hand is "
               "sent, the rest of the queue is lost on exit without `flush()` (client.py:115-122).",
    "posthog": "In-memory queue; 4 attempts with 1, 2, 4 s back-off, Retry-After as a floor, then the batch is "
               "dropped via on_error (consumer.py:326-338) — an outage longer than ≈ 7 s loses what it holds; a 400 "
               "drops the whole batch. `atexit` flushes with a 1 s deadline. Through TLS (as here) urllib3 adds 2 "
               "connect retries per attempt (request.py:80-92).",
    "snowplow": "In-memory buffer; retries without limit, delay min(2d+U(0,1), 60 s), Retry-After ignored "
                "(emitters.py:399-422); while a retry is pending nothing else is flushed and the whole buffer goes "
                "in one POST afterwards. 400 is final: the batch of 10 is dropped. No `atexit`: events still in "
                "the buffer (fewer than 10) are lost on exit (none here: 1 000 is a multiple of 10). In the outage "
                "its delay had grown past 20 s, so its next try fell after the cap: the buffer it still held when "
                "the process ended is lost, as on any app exit.",
    "mixpanel": "No queue: the default `Consumer` sends each event inside `track()`; over https urllib3 retries "
                "5xx and honours Retry-After, 5 tries in ≈ 3.5 s (__init__.py:747-760), then `track()` raises and "
                "the event is gone unless the app keeps it. Each event is its own request, so a poison event "
                "loses only itself; nothing is left to lose on exit. The price is the caller's: each `track()` is a "
                "round trip (calls/s), seconds long while the server fails.",
    "outbox-mixpanel": "Outbox as above, on Mixpanel's import API (`--destination mixpanel` with a service account: "
                       "HTTP Basic, `project_id`, `strict=1`, gzip): `$insert_id` is the log's id on every attempt, so "
                       "the mock drops re-sends by it; a 400 with `failed_records` settles the batch (the named records "
                       "dead-lettered, the rest imported), one without them is R1's 400, bisected (the poison rows).",
    "mixpanel-import": "The same client and default `Consumer` as `mixpanel`, on the import path: `import_data()` → POST "
                       "/import, a service account (`ServiceAccountCredentials` given to the consumer: HTTP Basic and "
                       "`?project_id=`). Sent inside the call as `track()` is, with the same urllib3 retries over https "
                       "(5xx, Retry-After, 5 tries in ≈ 3.5 s), then `import_data()` raises and the event is gone; each "
                       "call a fresh uuid4 `$insert_id`, the same on urllib3's re-sends, which the mock drops.",
    "outbox-sensors": "Outbox as above, on Sensors Analytics' wire (`--destination sensors`, the endpoint "
                      "`…/sa?project=compare` as given): the form body with `crc`, `gzip=1` and `data_list`, each record "
                      "a `_track_id` stable per log, by which (with `distinct_id`, `event` and `time`) the mock drops "
                      "re-sends, `_flush_time` stamped per attempt; answers by R1. `order-critical` goes as "
                      "`order_critical` (Sensors' name rule).",
    "sensors": "`AsyncBatchConsumer`, the SDK's one consumer that queues (`DefaultConsumer` and `BatchConsumer` send "
               "inside `track()`): a queue of 1 000 (full: `track()` raises), a daemon thread sending up to 100 a "
               "request every 3 s or at 20 queued, no retry, no atexit — the queue is lost on exit. Its first failed "
               "request ends the sending thread for good: `sync_flush` catches `except SensorsAnalytics` (the client "
               "class, not an exception: sdk.py:975), so the error becomes a TypeError that ends the thread; nothing "
               "is sent after it, and the queue fills until `track()` raises. Its records carry no `_track_id`, so "
               "Sensors could not drop a re-send (it never re-sends).",
    "outbox-ga4": "Outbox as above, on GA4's Measurement Protocol (`--destination ga4`, 25 events a request): each "
                  "event its own `timestamp_micros`, the same on every attempt. GA4 has no de-duplication: a re-send "
                  "after a lost answer counts twice there, and the mock counts it in duplicated (events distinct by "
                  "client_id, name, timestamp_micros and params) without dropping it. GA4 answers 2xx even to invalid "
                  "events, never 400: the poison row shows R1's bisection against an answer GA4 would not give; "
                  "`order-critical` goes as `order_critical` (GA4's name rule, the original kept in a parameter). No "
                  "official client: Segment's client is the reference (SPEC D9a).",
    "outbox-amplitude": "Outbox as above, on Amplitude's HTTP V2 API (`--destination amplitude`): `insert_id` is the "
                        "log's id on every attempt, so the mock drops re-sends by it; a 400 naming events by index "
                        "dead-letters those and sends the rest again at once; the poison scenario's 400 names none "
                        "(it is in Mixpanel's shape), and is bisected as R1's 400.",
    "amplitude": "In-memory buffer; a worker thread sends 200 a request every 10 s (`flush_queue_size`, "
                 "`flush_interval_millis`), a pool of 16 threads sending. A 5xx, a timeout or a refused connection "
                 "puts the batch back with 100·2^⌊(n−1)/2⌋ ms, up to 12 attempts (≈ 9 s of back-off: "
                 "storage.py:118-123), then drops it via the callback; Retry-After ignored, a 429 retried at once "
                 "unless the body names throttled events (30 s); a 400 without Amplitude's index lists "
                 "(`events_with_invalid_fields`, …: the poison scenario's) is retried whole until the attempts run "
                 "out (processor.py:32-48). A connection closed without an answer raises `RemoteDisconnected`, which "
                 "`HttpClient.post` does not catch (http_client.py:125-147): the batch is dropped silently, neither "
                 "retried nor reported — at most once, so no duplicates. `threading._register_atexit` flushes at "
                 "exit. Its first request leaves 10 s after the first call: the throttle window (2–8 s) has closed "
                 "by then, so its throttle row met no 429, and half the outage passed before it tried.",
    "otel": "In-memory deque (2 048, oldest dropped); retries only 429/502/503/504 and connection errors, 1, 2, 4 "
            "s ×U(0.8,1.2) within the exporter's 10 s timeout, Retry-After replaces the back-off "
            "(exporter/otlp/common/http.py:30-42, 139-226), then the batch of up to 512 is dropped; a 400 drops the "
            "batch. OTLP log records carry no id, so a collector stores a re-sent batch twice (the mock counts "
            "them as duplicates by a hash of the record). `shutdown_on_exit` exports everything queued at exit.",
}


def seconds(value):
    """A delay from results.json (seconds or "inf") as a number."""
    if value is None:
        return None
    return float("inf") if value == "inf" else value


def add_added_delays(results):
    """SPEC D9a: each run's p99 over every tracked event minus the same client's steady p99 (`added_delay_s`;
    "inf" when the run left more than 1 % of its events undelivered, None without a steady run)."""
    steady = {r["client"]: seconds(r.get("p99_all_s")) for r in results if r["scenario"] == "steady"}
    for r in results:
        base, value = steady.get(r["client"]), seconds(r.get("p99_all_s"))
        if base is None or value is None or base == float("inf"):
            r["added_delay_s"] = None
        elif value == float("inf"):
            r["added_delay_s"] = "inf"
        else:
            r["added_delay_s"] = round(value - base, 3)


def delay_cell(value):
    value = seconds(value)
    if value is None:
        return "—"
    return "∞" if value == float("inf") else f"{value:,.2f}"


def reference_for(wire, scenario, by_key):
    """The reference client of a wire in a scenario (SPEC D9a): the wire's official client when it ran and lost
    nothing, else Segment's client in the same scenario when it lost nothing; None when neither qualifies."""
    for client in (REFERENCE.get(wire), FALLBACK_REFERENCE):
        r = by_key.get((client, scenario)) if client else None
        if r is not None and r["lost"] == 0 and r.get("added_delay_s") is not None:
            return r
    return None


def summary_lines(clients, scenarios, by_key):
    """The added-delay table (Outbox beside each wire's reference) and the outage's last arrivals (SPEC D9a)."""
    rows = []
    for client in [c for c in CLIENTS if is_outbox(c) and c in clients]:
        wire = WIRE[client]
        for name in [s for s in FAULTS if s in scenarios]:
            ours = by_key.get((client, name))
            if ours is None:
                continue
            ref = reference_for(wire, name, by_key)
            a = seconds(ours.get("added_delay_s"))
            b = seconds(ref.get("added_delay_s")) if ref else None
            if a is None or b is None:
                verdict = "—"
            else:
                verdict = "**yes**" if a <= b + 1 else "**no**"
            rows.append(f"| {wire} | {name} | {client} | {fmt(ours['lost'])} / {fmt(ours['kept'])} | "
                        f"{delay_cell(ours.get('added_delay_s'))} | "
                        f"{ref['client'] if ref else 'none lost nothing'} | "
                        f"{delay_cell(ref.get('added_delay_s')) if ref else '—'} | {verdict} |")
    lines = []
    if rows:
        lines += ["", "## Added delay: Outbox beside each wire's reference client (SPEC D9a)", "",
                  "Added delay = the run's p99 delay over *all* tracked events (an event not delivered within the "
                  "run counts as infinite: ∞ once more than 1 % are missing) minus the same client's p99 in "
                  "**steady**. The reference is the wire's official client when it lost nothing in that scenario "
                  "and queues rather than sends inside the tracking call; App Center and GA4 have no official "
                  "Python client and Mixpanel's sends inside the call (on /track and /import alike), and there, as "
                  "where the wire's client lost something, Segment's client in the same scenario stands in. The "
                  "aim: Outbox lost 0 and kept 0, and its added delay ≤ the reference's + 1 s.", "",
                  "| wire | scenario | Outbox | lost / kept | added delay s | reference | its added delay s | "
                  "≤ reference + 1 s |",
                  "| --- | --- | --- | ---: | ---: | --- | ---: | --- |"] + rows
    if "outage" in scenarios:
        outage = [by_key[(c, "outage")] for c in clients if (c, "outage") in by_key]
        if outage:
            until = fault_end_s(next(file for name, file, _, _ in SCENARIOS if name == "outage"))
            lines += ["", f"## Outage: the last event's arrival after the server's recovery ({until:g} s after the "
                          "mock's start)", "",
                      "| wire | client | delivered within the run | last arrival after recovery s |",
                      "| --- | --- | ---: | ---: |"]
            for r in sorted(outage, key=lambda r: list(WIRE.values()).index(WIRE[r["client"]])):
                lines.append(f"| {WIRE[r['client']]} | {r['client']} | {fmt(r['delivered'])} of {fmt(r['tracked'])} | "
                             f"{after_recovery_cell(r.get('last_after_recovery_s'))} |")
    return lines


def after_recovery_cell(value):
    """The last arrival after the recovery; a client whose last arrival came before it sent nothing after it."""
    if value is not None and value < 0:
        return "none after it"
    return fmt(value, 2)


def kept_cell(r):
    if not is_outbox(r["client"]):
        return "—"
    if "delivered_on_relaunch" in r:
        return f"{fmt(r['kept'])} ({fmt(r['delivered_on_relaunch'])} sent on relaunch)"
    return fmt(r["kept"])


def merge(previous, results, clients, scenarios, skipped, invocations):
    """`--merge`: this invocation's runs over an earlier results.json — an earlier run of the same client and scenario
    is replaced, the others kept; clients and scenarios in their usual order; the earlier notes of what was not run
    kept unless this invocation ran that client; the invocations listed, oldest first (the report names each)."""
    ran = {(r["client"], r["scenario"]) for r in results}
    kept = [r for r in previous.get("results", []) if (r["client"], r["scenario"]) not in ran]
    merged = kept + results
    seen_clients = {r["client"] for r in merged} | set(clients)
    seen_scenarios = {r["scenario"] for r in merged} | set(scenarios)
    ordered_clients = [c for c in CLIENTS if c in seen_clients] + sorted(seen_clients - set(CLIENTS))
    names = [s[0] for s in SCENARIOS]
    ordered_scenarios = [s for s in names if s in seen_scenarios] + sorted(seen_scenarios - set(names))
    earlier_skipped = [note for note in previous.get("skipped", [])
                       if not any(note.startswith(f"{c}/") or note.startswith(f"{c} ") for c in clients)]
    earlier = previous.get("invocations") or [{"duration_s": previous.get("duration_s"), "clients": None,
                                               "scenarios": None}]
    return merged, ordered_clients, ordered_scenarios, earlier_skipped + skipped, earlier + invocations


def invocations_text(invocations):
    """How the runs came about, for the report's first paragraph."""
    if len(invocations) == 1:
        return f"all runs in one invocation: **{invocations[0]['duration_s'] / 60:.1f} min** wall time"
    parts = []
    for one in invocations:
        what = (", ".join(one["clients"]) + " × " + ", ".join(one["scenarios"])) if one.get("clients") else "the rest"
        at = f" on {one['at']}" if one.get("at") else ""
        minutes = f"{one['duration_s'] / 60:.1f} min" if one.get("duration_s") is not None else "? min"
        parts.append(f"{minutes}{at} ({what})")
    return (f"runs from {len(invocations)} invocations merged with `--merge`, each one's wall time: "
            + "; ".join(parts))


def load_note(results):
    """What else the machine was doing: the 1-min load average as the runs started (2 cores: above 2, other work
    shared them), throughput runs apart."""
    def span(rows):
        loads = [r["load_avg"] for r in rows if r.get("load_avg") is not None]
        return f"{min(loads):.1f}–{max(loads):.1f} ({len(loads)} runs)" if loads else "not recorded"
    alone = [r for r in results if r["scenario"] == "throughput"]
    others = [r for r in results if r["scenario"] != "throughput"]
    return ("- The machine's 1-min load average as each run started (2 cores: above 2, other work shared them, and "
            f"speeds and delays suffer): throughput runs {span(alone)}, the others {span(others)}; runs without a "
            "figure came from an invocation that did not record it.")


def not_run_notes(clients, scenarios, skipped):
    """What was not run: the throughput runs left out by design (NO_THROUGHPUT; an earlier results.json may hold their
    note already), then what the runs reported."""
    planned = [f"{c}/throughput (its default consumer makes one request per call: minutes for 100 000)"
               for c in clients if c in NO_THROUGHPUT and "throughput" in scenarios]
    return planned + [note for note in skipped
                      if not any(note.startswith(f"{c}/throughput") for c in NO_THROUGHPUT)]


def write_report(out, results, clients, scenarios, duration_s, skipped, binaries, invocations=None):
    os.makedirs(out, exist_ok=True)
    invocations = invocations or [{"duration_s": round(duration_s, 1)}]
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"duration_s": round(sum(one.get("duration_s") or 0 for one in invocations), 1),
                   "invocations": invocations, "binaries": binaries, "results": results, "skipped": skipped}, f,
                  indent=1)
    by_key = {(r["client"], r["scenario"]): r for r in results}
    v = versions()
    lines = [
        "# `make compare`: official analytics clients and Outbox under the same faults",
        "",
        f"Generated by `make compare` (scripts/compare/compare.py) on "
        f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"{invocations_text(invocations)} on this 2-core machine "
        f"(runs 3 at a time, each on its own outbox-mock). Clients: "
        + ", ".join(dict.fromkeys(v[c] for c in clients if c in v)) + f"; Outbox: `outbox emit` ({binaries}).",
        "",
        "Scenarios (Fixtures/scenarios/ and Fixtures/scenarios/compare/): "
        + "; ".join(f"**{name}** — {what}" for name, _, _, what in SCENARIOS if name in scenarios)
        + f". Fault runs track {PACED['count']} events at {PACED['rate']:.0f}/s, so that the fault falls inside the "
          f"tracking; a run ends {CAP_S:.0f} s after the client's last call at the latest, and whatever has not "
          "reached the mock by then is **lost** — except what Outbox still holds in its store (**kept**).",
        "",
        "Columns: tracked = calls made; delivered = unique events at the mock; duplicated = re-sent events the mock "
        "absorbed; p50/p99 = delivery delay of the delivered events (arrival minus the event's own timestamp, from the "
        "mock's `delay_ms`); p99 all = the p99 delay over every tracked event, one not delivered within the run "
        "counting as infinite (∞ once more than 1 % are missing; from the per-event delays in `/_mock/logs`); added = "
        "p99 all minus the same client's p99 all in steady (SPEC D9a); "
        "calls/s = tracked ÷ time spent inside the tracking calls, measured in each client's own process (Outbox: "
        "`outbox emit`'s `in_calls_us`); drain = delivered ÷ (last arrival − first call). The throughput rows run "
        "one at a time, after the others, so that no other run shares the 2 cores.",
        "",
        "| wire | client | scenario | tracked | delivered | lost | kept | duplicated | p50 delay s | p99 delay s | "
        "p99 all s | added s | calls/s | drain ev/s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for client in sorted(clients, key=lambda c: list(WIRE.values()).index(WIRE[c])):
        for name in scenarios:
            r = by_key.get((client, name))
            if r is None:
                continue
            delay = r.get("delay_ms") or {}
            lines.append(
                f"| {WIRE[client]} | {client} | {name} | {fmt(r['tracked'])} | {fmt(r['delivered'])} | "
                f"{'**' + fmt(r['lost']) + '**' if r['lost'] else '0'} | {kept_cell(r)} | "
                f"{fmt(r['duplicated'])} | {fmt(delay.get('p50') / 1000 if 'p50' in delay else None, 2)} | "
                f"{fmt(delay.get('p99') / 1000 if 'p99' in delay else None, 2)} | {delay_cell(r.get('p99_all_s'))} | "
                f"{delay_cell(r.get('added_delay_s'))} | {fmt(r.get('calls_per_s'))} | "
                f"{fmt(r.get('drain_eps'))} |")
    pair_lines = []
    for wire, ours, theirs in PAIRS:
        a, b = by_key.get((ours, "throughput")), by_key.get((theirs, "throughput"))
        if not a or not b:
            continue
        calls = (a.get("calls_per_s") or 0) / b["calls_per_s"] if b.get("calls_per_s") else None
        drain = (a.get("drain_eps") or 0) / b["drain_eps"] if b.get("drain_eps") else None
        pair_lines.append(f"| {wire} | {ours} / {theirs} | {fmt(a.get('calls_per_s'))} / {fmt(b.get('calls_per_s'))} | "
                          f"{fmt(calls, 2)}× | {fmt(a.get('drain_eps'))} / {fmt(b.get('drain_eps'))} | {fmt(drain, 2)}× | "
                          f"{fmt(a['lost'])} / {fmt(b['lost'])} |")
    lines += summary_lines(clients, scenarios, by_key)
    if pair_lines:
        lines += ["", "## Outbox against each wire's own client (throughput: 100 000 events, healthy server)", "",
                  "| wire | Outbox / client | calls/s | Outbox's ratio | drain ev/s | Outbox's ratio | lost |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"] + pair_lines
    lines += ["", "![lost, p99 delay and added delay per client and scenario](compare.svg)", "",
              "## Why each client lost what it lost", ""]
    for client in clients:
        lines.append(f"- **{client}** — {NOTES[client]}")
    lines += ["", "Notes on the method:", "",
              "- Behind the TLS front (Mixpanel on both paths, PostHog) the outage is nginx's 502 rather than a "
              "refused connection, and a lost acknowledgement is a 502 after the mock recorded the body: these "
              "clients retry these as they retry a refused connection.",
              "- The poison scenario answers 400 with a body in Mixpanel's shape on every wire. On Amplitude's that "
              "is a 400 naming no event, which Amplitude does not send for a bad event (it lists the events by "
              "index): its client retries the whole batch until its attempts run out, where Amplitude's own answer "
              "would have dropped only the poison event; Outbox takes it as R1's 400 and bisects. GA4 never answers "
              "400 at all.",
              "- In the paced rows drain ev/s is bounded by the tracking rate (20/s): it says whether a client kept "
              "up, not how fast it can go; the ok and exit rows show that.",
              "- In the throughput rows Outbox's store is given 256 MiB (`--max-storage-bytes`): its default 10 MiB "
              "cap would evict the oldest of 100 000 events (S2). The Python clients run with their default queues, "
              "which drop what does not fit (segment and posthog 10 000 events, the OpenTelemetry batch processor "
              "2 048): that is their lost column there.",
              load_note(results),
              "- delivered counts unique events at the mock within the cap; Outbox's `kept` are still in its store "
              "when the cap ends the run, and the figure in brackets is what a relaunch on the same store sent "
              "(not added to delivered)."]
    not_run = not_run_notes(clients, scenarios, skipped)
    if not_run:
        lines += ["", "Not run: " + "; ".join(not_run) + "."]
    lines += ["", "Each client runs as published at the version scripts/compare/venv.sh pins, with its own retry "
              "rules. Raw figures of this run: compare/results.json.", ""]
    with open(os.path.join(out, "REPORT.md"), "w") as f:
        f.write("\n".join(lines))


def plot(out, results, clients, scenarios):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by_key = {(r["client"], r["scenario"]): r for r in results}
    fig, axes = plt.subplots(1, 3, figsize=(20, 5))
    width = 0.8 / len(clients)
    # An infinite added delay (more than 1 % undelivered) is drawn hatched, just above the highest finite bar.
    finite = [seconds(r.get("added_delay_s")) for r in results]
    finite = [value for value in finite if value is not None and value != float("inf")]
    ceiling = max(finite + [1.0]) * 1.1
    for index, client in enumerate(clients):
        xs = [s + (index - (len(clients) - 1) / 2) * width for s in range(len(scenarios))]
        lost = []
        p99 = []
        added, infinite = [], []
        for name in scenarios:
            r = by_key.get((client, name))
            lost.append(100.0 * r["lost"] / r["tracked"] if r and r["tracked"] else 0)
            p99.append((r.get("delay_ms") or {}).get("p99", 0) / 1000 if r else 0)
            value = seconds(r.get("added_delay_s")) if r else None
            infinite.append(value == float("inf"))
            added.append(ceiling if value == float("inf") else (value or 0))
        axes[0].bar(xs, lost, width, label=client)
        axes[1].bar(xs, p99, width, label=client)
        bars = axes[2].bar(xs, added, width, label=client)
        for bar, inf in zip(bars, infinite):
            if inf:
                bar.set_hatch("//")
                bar.set_alpha(0.5)
    for axis, title in zip(axes, ["lost (% of tracked)", "p99 delivery delay of the delivered (s)",
                                  "added delay: p99 over all tracked − steady p99 (s; hatched: ∞)"]):
        axis.set_xticks(range(len(scenarios)))
        axis.set_xticklabels(scenarios)
        axis.set_title(title)
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend()
    fig.suptitle("make compare: the same faults, each client on its own outbox-mock")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "compare.svg"), metadata={"Date": None})


def report_again(out):
    """`--report-only`: the report and the plot of OUT/results.json as it stands, with today's notes."""
    with open(os.path.join(out, "results.json")) as f:
        previous = json.load(f)
    results = previous["results"]
    _, clients, scenarios, skipped, invocations = merge(previous, [], [], [], [], [])
    clients = [c for c in clients if any(r["client"] == c for r in results)]
    add_added_delays(results)
    write_report(out, results, clients, scenarios, previous.get("duration_s") or 0, skipped,
                 previous.get("binaries", ".build/release/outbox, .build/release/outbox-mock"), invocations)
    plot(out, results, clients, scenarios)
    print(f"compare: wrote {out}/REPORT.md and compare.svg again from {out}/results.json")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mock", default=os.path.join(ROOT, ".build/release/outbox-mock"))
    parser.add_argument("--outbox", default=os.path.join(ROOT, ".build/release/outbox"))
    parser.add_argument("--out", default=os.path.join(ROOT, "compare"))
    parser.add_argument("--only", default=",".join(CLIENTS))
    parser.add_argument("--scenarios", default=",".join(s[0] for s in SCENARIOS))
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--merge", action="store_true",
                        help="keep OUT/results.json's runs that this invocation does not repeat, and report them all")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: write OUT/REPORT.md and compare.svg again from OUT/results.json")
    args = parser.parse_args()
    if args.report_only:
        report_again(args.out)
        return
    started = time.time()
    tools = Tools(args)
    clients = [c for c in args.only.split(",") if c]
    scenarios = [s for s in args.scenarios.split(",") if s]
    skipped = []
    if "otel" in clients and not otlp_served(tools):
        clients.remove("otel")
        skipped.append("otel (this outbox-mock does not serve OTLP/HTTP yet: POST /v1/logs answers 404)")
    # The fault runs last longest: start them first so that the short ones fill the gaps. The throughput runs
    # measure speed: they go last, one at a time.
    runs = [(c, s) for c in clients for s in SCENARIOS if s[0] in scenarios
            and not (s[2] is THROUGHPUT and c in NO_THROUGHPUT)]
    order = sorted((cs for cs in runs if cs[1][2] is not THROUGHPUT), key=lambda cs: cs[1][2] is BURST)
    alone = [cs for cs in runs if cs[1][2] is THROUGHPUT]
    results = []

    def report(client, name, future):
        try:
            r = future.result()
        except Exception as error:  # one broken run is reported, the others go on
            skipped.append(f"{client}/{name} failed: {error}")
            print(f"compare: {client} {name}: FAILED: {error}", file=sys.stderr, flush=True)
            return
        results.append(r)
        print(f"compare: {client:14} {name:10} tracked {r['tracked']:6} delivered {r['delivered']:6} "
              f"lost {r['lost']:6} kept {r['kept']:5} dup {r['duplicated']:5} ({r['ended']}, {r['wall_s']} s)",
              flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(Run(tools, c, s).execute): (c, s[0]) for c, s in order}
        for future in concurrent.futures.as_completed(futures):
            report(*futures[future], future)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        for c, s in alone:
            report(c, s[0], pool.submit(Run(tools, c, s).execute))
    duration = time.time() - started
    binaries = ", ".join(os.path.relpath(path, ROOT) if path.startswith(ROOT) else path
                         for path in (tools.outbox, tools.mock))
    invocations = [{"at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "duration_s": round(duration, 1), "clients": clients, "scenarios": scenarios}]
    if args.merge:
        try:
            with open(os.path.join(args.out, "results.json")) as f:
                previous = json.load(f)
        except (OSError, ValueError) as error:
            sys.exit(f"compare: --merge needs {args.out}/results.json: {error}")
        results, clients, scenarios, skipped, invocations = merge(previous, results, clients, scenarios, skipped,
                                                                   invocations)
    add_added_delays(results)
    write_report(args.out, results, clients, scenarios, duration, skipped, binaries, invocations)
    plot(args.out, results, clients, scenarios)
    shutil.rmtree(tools.work, ignore_errors=True)
    print(f"compare: wrote {args.out}/REPORT.md and compare.svg in {duration:.0f} s")


if __name__ == "__main__":
    main()
