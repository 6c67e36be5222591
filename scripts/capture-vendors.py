#!/usr/bin/env python3
"""Captures real requests of the official Python analytics clients as fixtures (SPEC V5).

    python3 -m venv .build/vendor-venv
    .build/vendor-venv/bin/pip install segment-analytics-python==2.4.0 posthog==7.91.1 \
        snowplow-tracker==1.1.0 mixpanel==5.4.1
    .build/vendor-venv/bin/python scripts/capture-vendors.py Fixtures/vendors
    .build/vendor-venv/bin/python scripts/capture-vendors.py --against http://127.0.0.1:8080

With `--against URL` the same clients make the same calls against a running mock instead, save nothing, and
print one JSON object: the errors each client reported (its on_error / on_failure callbacks, exceptions).

Each client runs unmodified but for the host it sends to: a small capture server on 127.0.0.1 that
answers every request 200 with `{"status":1,"results":{}}` (a reply each of them takes as success:
Segment and Snowplow take any 2xx, PostHog a 200 whose `results` names no refused event, Mixpanel a body whose
`status` is 1) and saves what it received — method, URI, headers in order, and the body as it came
over the wire (compressed bodies stay compressed, so a replay exercises gzip too). Ids (messageId, uuid,
eid, $insert_id) are kept: the tests replay each request twice and expect the second to be all duplicates.
"""
import base64
import gzip
import json
import os
import sys
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CAPTURED = []
LOCK = threading.Lock()
AGAINST = None          # the mock's URL in --against mode
ERRORS = {}             # vendor -> error messages the clients reported


def failed(vendor):
    """An error callback for `vendor`'s client."""
    def callback(*args):
        ERRORS.setdefault(vendor, []).append(repr(args[0])[:200])
    return callback


def emit(directory, vendor, name, client, description, what):
    """Saves the request the last calls made (capture mode); against a mock there is nothing to save."""
    if AGAINST is None:
        save(directory, vendor, name, client, description, one(take(), what))


class Capture(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with LOCK:
            CAPTURED.append({"method": self.command, "uri": self.path,
                             "headers": [[k, v] for k, v in self.headers.items()], "raw": body})
        reply = b'{"status":1,"results":{}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_POST = _handle
    do_GET = _handle

    def log_message(self, *args):
        pass


def take():
    """The requests captured since the last call."""
    with LOCK:
        out = list(CAPTURED)
        CAPTURED.clear()
    return out


def plain_body(request):
    raw = request["raw"]
    encoding = next((v for k, v in request["headers"] if k.lower() == "content-encoding"), "").lower()
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "deflate":
        return zlib.decompress(raw)
    return raw


def count_events(vendor, request):
    """How many events the request carries, read the way the vendor's API defines its body."""
    if request["method"] == "GET":
        return 1
    body = plain_body(request)
    if vendor == "mixpanel":
        form = urllib.parse.parse_qs(body.decode())
        data = form["data"][0] if "data" in form else body.decode()
        try:
            value = json.loads(data)
        except ValueError:
            value = json.loads(base64.b64decode(data))
        return len(value) if isinstance(value, list) else 1
    value = json.loads(body)
    if vendor == "snowplow":
        return len(value["data"])
    return len(value["batch"]) if "batch" in value else 1


def save(directory, vendor, name, client, description, request):
    os.makedirs(os.path.join(directory, vendor), exist_ok=True)
    headers = [[k, v] for k, v in request["headers"]]
    out = {"client": client, "description": description, "method": request["method"], "uri": request["uri"],
           "headers": headers}
    encoded = any(k.lower() == "content-encoding" for k, _ in headers)
    try:
        if encoded:
            raise UnicodeDecodeError("", b"", 0, 1, "compressed")
        out["body"] = request["raw"].decode("utf-8")
    except UnicodeDecodeError:
        out["body_base64"] = base64.b64encode(request["raw"]).decode()
    out["expect"] = {"status": 200, "events": count_events(vendor, request)}
    path = os.path.join(directory, vendor, name + ".json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{path}: {request['method']} {request['uri'].split('?')[0]} {out['expect']['events']} events")


def one(requests, what):
    if len(requests) != 1:
        raise SystemExit(f"{what}: expected 1 request, captured {len(requests)}")
    return requests[0]


def capture_segment(host, directory):
    import segment.analytics as analytics
    from segment.analytics import Client
    client_name = "segment-analytics-python " + analytics.VERSION
    for gz in (False, True):
        client = Client("WK_test_123", host=host, gzip=gz, on_error=failed("segment"))
        if gz:
            for i in range(3):
                client.track("user-1", "Order Completed", {"order": i, "price": 9.99, "sku": "A-1"})
        else:
            client.track("user-1", "Order Completed", {"order": 0, "price": 9.99, "sku": "A-1"})
            client.identify("user-1", {"email": "user-1@example.com", "plan": "pro"})
            client.page("user-1", "Docs", "Getting started", {"url": "https://example.com/docs"})
            client.screen("user-1", "Settings", "Privacy", {"tab": "privacy"})
            client.group("user-1", "group-7", {"name": "Acme"})
            client.alias("user-1", "anon-42")
            client.track(anonymous_id="anon-42", event="Song Played", properties={"song": "Blue", "seconds": 212})
        client.flush()
        client.shutdown()
        if gz:
            emit(directory, "segment", "batch-gzip", client_name,
                 "3 × track(), flush(); Client(gzip=True): /v1/batch, gzip body, Basic auth and writeKey", "segment")
        else:
            emit(directory, "segment", "batch-all-types", client_name,
                 "track, identify, page, screen, group, alias, anonymous track; flush(): one /v1/batch", "segment")


def capture_posthog(host, directory):
    import posthog
    from posthog import Posthog
    client_name = "posthog " + posthog.VERSION
    runs = [
        ("batch-v0", {}, "3 × capture(), flush(): the default v0 /batch/"),
        ("batch-v0-gzip", {"gzip": True}, "3 × capture() with gzip=True: v0 /batch/, gzip body"),
        ("events-v1", {"capture_mode": "v1"}, "3 × capture() with capture_mode='v1': /i/v1/analytics/events"),
        ("events-v1-deflate", {"capture_mode": "v1", "capture_compression": "deflate"},
         "3 × capture() with capture_mode='v1', capture_compression='deflate'"),
    ]
    for name, options, description in runs:
        client = Posthog("phc_test_key_123", host=host, disable_geoip=True, on_error=failed("posthog"), **options)
        for i in range(3):
            client.capture("Order Completed", distinct_id="user-1",
                           properties={"order": i, "price": 9.99, "sku": "A-1"})
        client.flush()
        client.shutdown()
        emit(directory, "posthog", name, client_name, description, "posthog " + name)


def capture_snowplow(host, directory):
    from snowplow_tracker import Emitter, SelfDescribing, SelfDescribingJson, StructuredEvent, Subject, Tracker
    from snowplow_tracker import _version
    client_name = "snowplow-tracker " + _version.__version__
    port = int(host.rsplit(":", 1)[1])
    post = Emitter("127.0.0.1", protocol="http", port=port, method="post", batch_size=4,
                   on_failure=failed("snowplow"))
    tracker = Tracker(namespace="ns1", emitters=post, app_id="app-1", subject=Subject().set_user_id("user-1"))
    for i in range(3):
        tracker.track(SelfDescribing(SelfDescribingJson("iglu:com.acme/order_completed/jsonschema/1-0-0",
                                                        {"order": i, "price": 9.99, "sku": "A-1"})))
    tracker.track(StructuredEvent(category="shop", action="order", label="A-1", property_="p", value=9.99))
    tracker.flush()
    emit(directory, "snowplow", "tp2-post", client_name,
         "3 self-describing events and 1 structured event, Emitter(method='post'): tp2", "snowplow post")
    get = Emitter("127.0.0.1", protocol="http", port=port, method="get", on_failure=failed("snowplow"))
    tracker = Tracker(namespace="ns1", emitters=get, app_id="app-1", subject=Subject().set_user_id("user-1"))
    tracker.track(StructuredEvent(category="shop", action="order", label="A-1", property_="p", value=9.99))
    tracker.flush()
    emit(directory, "snowplow", "i-get", client_name,
         "1 structured event, Emitter(method='get'): GET /i with the event in the query", "snowplow get")


def capture_mixpanel(host, directory):
    import mixpanel
    from mixpanel import BufferedConsumer, Consumer, Mixpanel
    client_name = "mixpanel " + mixpanel.__version__
    urls = {"events_url": host + "/track", "people_url": host + "/engage", "groups_url": host + "/groups",
            "import_url": host + "/import"}
    mp = Mixpanel("mp_token_123", consumer=Consumer(**urls))
    mp.track("user-1", "Order Completed", {"order": 0, "price": 9.99, "sku": "A-1"})
    emit(directory, "mixpanel", "track", client_name, "track() with the default Consumer: form data=, verbose=1",
         "mixpanel track")
    mp.people_set("user-1", {"$email": "user-1@example.com", "plan": "pro"})
    emit(directory, "mixpanel", "engage", client_name, "people_set(): /engage", "mixpanel engage")
    mp.group_set("company", "Acme", {"size": 40})
    emit(directory, "mixpanel", "groups", client_name, "group_set(): /groups", "mixpanel groups")
    mp.import_data("mp_api_key", "user-1", "Order Imported", time.time() - 86400 * 10,
                   {"order": 9, "price": 9.99}, api_secret="mp_api_secret")
    emit(directory, "mixpanel", "import", client_name, "import_data() with api_secret: /import, Basic auth",
         "mixpanel import")
    buffered = Mixpanel("mp_token_123", consumer=BufferedConsumer(**urls))
    for i in range(3):
        buffered.track("user-1", "Order Completed", {"order": i, "price": 9.99, "sku": "A-1"})
    buffered._consumer.flush()
    emit(directory, "mixpanel", "track-buffered", client_name,
         "3 × track() with BufferedConsumer, flush(): data= holds a JSON array", "mixpanel buffered")


def main():
    global AGAINST
    if len(sys.argv) > 2 and sys.argv[1] == "--against":
        AGAINST = sys.argv[2].rstrip("/")
        for vendor, run in [("segment", capture_segment), ("posthog", capture_posthog),
                            ("snowplow", capture_snowplow), ("mixpanel", capture_mixpanel)]:
            try:
                run(AGAINST, None)
            except Exception as error:  # Mixpanel raises what the others report through callbacks
                failed(vendor)(error)
        print(json.dumps({"errors": ERRORS}))
        return
    directory = sys.argv[1] if len(sys.argv) > 1 else "Fixtures/vendors"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"http://127.0.0.1:{server.server_address[1]}"
    capture_segment(host, directory)
    capture_posthog(host, directory)
    capture_snowplow(host, directory)
    capture_mixpanel(host, directory)
    server.shutdown()


if __name__ == "__main__":
    main()
