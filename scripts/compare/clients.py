#!/usr/bin/env python3
"""One official analytics client, as an application would use it, against one mock (SPEC V6).

    .build/vendor-venv/bin/python scripts/compare/clients.py CLIENT URL --count N [--rate R] [--poison-every K]
                                                            [--exit-without-flush]

CLIENT is segment, posthog, snowplow, mixpanel, mixpanel-import, otel, sensors or amplitude; each runs unmodified
but for the host it sends to (URL; an https URL for the clients whose retries need TLS, with REQUESTS_CA_BUNDLE
naming the front's certificate; Sensors' URL is its whole endpoint, `…/sa?project=P`, as its SDK takes it).
Tracks N events named "order" (every K-th one "poison"), paced at R per second when --rate is given, then prints
one JSON line: tracked, failed (calls that raised or returned a refusal), the seconds spent inside the calls and
the wall-clock time of the first call. Then, as an app that keeps running, it calls the client's own flush and
stays alive until the driver ends it (scripts/compare/compare.py caps each run); with --exit-without-flush it
returns at once instead, and the interpreter exits as an app would (the clients' atexit hooks run).
"""
import argparse
import json
import sys
import threading
import time
import urllib.parse

ERRORS = []


def on_error(*args):
    ERRORS.append(repr(args[0])[:200])


def segment(url):
    from segment.analytics import Client
    client = Client("WK_compare", host=url, on_error=on_error)

    def track(i, name):
        ok, _ = client.track("user-1", name, {"i": i, "price": 9.99, "sku": "A-1"})
        return ok
    return track, client.flush


def posthog(url):
    from posthog import Posthog
    client = Posthog("phc_compare", host=url, disable_geoip=True, on_error=on_error)

    def track(i, name):
        return client.capture(name, distinct_id="user-1", properties={"i": i, "price": 9.99, "sku": "A-1"}) is not None
    return track, client.flush


def snowplow(url):
    from snowplow_tracker import Emitter, StructuredEvent, Subject, Tracker
    parts = urllib.parse.urlsplit(url)
    emitter = Emitter(parts.hostname, protocol=parts.scheme, port=parts.port, method="post",
                      on_failure=lambda count, events: on_error(f"failed {count}, {len(events)} kept"))
    tracker = Tracker(namespace="compare", emitters=emitter, app_id="compare", subject=Subject().set_user_id("user-1"))

    def track(i, name):
        tracker.track(StructuredEvent(category="shop", action=name, label="A-1", property_=str(i), value=9.99))
        return True
    return track, tracker.flush


def mixpanel(url):
    from mixpanel import Consumer, Mixpanel, MixpanelException
    # api_host= is the client's normal configuration: https, with its urllib3 retry adapter (total=4; the
    # adapter is mounted on https:// only, so over http the client does not retry).
    mp = Mixpanel("mp_compare", consumer=Consumer(api_host=urllib.parse.urlsplit(url).netloc))

    def track(i, name):
        try:
            mp.track("user-1", name, {"i": i, "price": 9.99, "sku": "A-1"})
            return True
        except MixpanelException as error:   # the library keeps nothing: the event is gone unless the app keeps it
            on_error(error)
            return False
    return track, lambda: None


def mixpanel_import(url):
    from mixpanel import Consumer, Mixpanel, MixpanelException
    from mixpanel.credentials import ServiceAccountCredentials
    # The import path (`import_data` → POST /import) with a service account, the library's recommended
    # authentication there: HTTP Basic and `?project_id=`. The credentials go to the consumer, which sends.
    credentials = ServiceAccountCredentials(username="compare.sa", secret="compare-secret", project_id="1")
    mp = Mixpanel("mp_compare", consumer=Consumer(api_host=urllib.parse.urlsplit(url).netloc, credentials=credentials))

    def track(i, name):
        try:
            mp.import_data(None, "user-1", name, time.time(), {"i": i, "price": 9.99, "sku": "A-1"})
            return True
        except MixpanelException as error:   # as track(): sent inside the call, kept nowhere
            on_error(error)
            return False
    return track, lambda: None


def sensors(url):
    import sensorsanalytics
    # AsyncBatchConsumer: the SDK's consumer that queues (1 000) and sends from its own thread, 100 a request, every
    # 3 s or at 20 queued; DefaultConsumer and BatchConsumer send inside track().
    sa = sensorsanalytics.SensorsAnalytics(sensorsanalytics.AsyncBatchConsumer(url))

    def track(i, name):
        try:
            sa.track("user-1", name, {"i": i, "price": 9.99, "sku": "A-1"})
            return True
        except sensorsanalytics.SensorsAnalyticsException as error:   # the queue is full
            on_error(error)
            return False
    return track, sa.flush


def amplitude(url):
    from amplitude import Amplitude, BaseEvent, Config

    def callback(event, code, message):   # called for every event, sent or dropped
        if code != 200:
            on_error(f"{code} {message}")
    client = Amplitude("amp_compare", Config(server_url=url + "/2/httpapi", callback=callback))

    def track(i, name):
        client.track(BaseEvent(event_type=name, user_id="user-1", device_id="device-1",
                               event_properties={"i": i, "price": 9.99, "sku": "A-1"}))
        return True
    return track, client.flush


def otel(url):
    from opentelemetry._logs import SeverityNumber
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    provider = LoggerProvider(resource=Resource.create({"service.name": "compare"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=url + "/v1/logs")))
    logger = provider.get_logger("analytics", "1.0")

    def track(i, name):
        # The record's own timestamp, so that the mock can measure the delivery delay (SPEC V4b: timeUnixNano).
        logger.emit(timestamp=time.time_ns(), severity_number=SeverityNumber.INFO, body=name,
                    attributes={"i": i, "price": 9.99, "sku": "A-1"})
        return True
    return track, provider.force_flush


CLIENTS = {"segment": segment, "posthog": posthog, "snowplow": snowplow, "mixpanel": mixpanel,
           "mixpanel-import": mixpanel_import, "otel": otel, "sensors": sensors, "amplitude": amplitude}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=sorted(CLIENTS))
    parser.add_argument("url")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--rate", type=float)
    parser.add_argument("--poison-every", type=int)
    parser.add_argument("--exit-without-flush", action="store_true")
    args = parser.parse_args()
    track, flush = CLIENTS[args.client](args.url.rstrip("/"))
    tracked = failed = 0
    in_calls = 0.0
    first_wall = time.time()
    start = time.perf_counter()
    for i in range(args.count):
        if args.rate:
            wait = start + i / args.rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        poison = args.poison_every and (i + 1) % args.poison_every == 0
        before = time.perf_counter()
        ok = track(i, "poison" if poison else "order")
        in_calls += time.perf_counter() - before
        tracked += 1
        failed += 0 if ok else 1
    print(json.dumps({"tracked": tracked, "failed": failed, "in_calls_s": round(in_calls, 4),
                      "loop_s": round(time.perf_counter() - start, 4), "first_call_wall": first_wall}), flush=True)
    if args.exit_without_flush:
        return
    flush()
    print(json.dumps({"flushed": True, "errors": ERRORS[:5], "error_count": len(ERRORS)}), flush=True)
    threading.Event().wait()   # a long-running app: the driver ends the process at its cap


if __name__ == "__main__":
    sys.exit(main())
