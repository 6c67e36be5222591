#!/usr/bin/env python3
"""SPEC D16 (docs/BEHAVIOUR.md): one destination's fault never delays another. A two-destination engine (OTLP and
PostHog, each on its own outbox-mock speaking that wire, so that a fault hits one destination only) tracks 10 000
events under every named scenario of Fixtures/scenarios/, applied to one destination at a time; the other's p99
delivery delay must stay within 10 % (or 0.5 s) of a run with no fault, and it must hold every event exactly once.

Usage: scripts/destinations-scenarios.py [BIN_DIR] [EVENTS] [SCENARIO ...]
  BIN_DIR: where `outbox` and `outbox-mock` are (default .build/release); EVENTS: 10000.
Prints a table and writes destinations-scenarios.json beside the current directory's files.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bin_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/release")
events = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
scenario_dir = os.path.join(ROOT, "Fixtures/scenarios")
named = sorted(name[:-5] for name in os.listdir(scenario_dir) if name.endswith(".json") and name != "ok.json")
scenarios = sys.argv[3:] or named
DESTINATIONS = {"ops": "otlp", "product": "posthog"}


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def fault_end_s(scenario):
    """When the scenario's last timed fault ends (seconds after the mock starts); 0 for one without an end."""
    if scenario == "ok":
        return 0
    with open(os.path.join(scenario_dir, scenario + ".json")) as f:
        ends = [rule.get("match", {}).get("until_s") for rule in json.load(f).get("rules", [])]
    return max([end for end in ends if end is not None], default=0)


class Mock:
    def __init__(self, scenario, work):
        self.log = open(os.path.join(work, f"mock-{time.monotonic_ns()}.log"), "w+")
        arguments = [os.path.join(bin_dir, "outbox-mock"), "--port", "0"]
        if scenario != "ok":
            arguments += ["--scenario", scenario]
        self.process = subprocess.Popen(arguments, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        self.url = None
        while self.url is None and time.monotonic() < deadline:
            self.log.seek(0)
            found = re.search(r"listening on (http\S+)", self.log.read())
            if found:
                self.url = found.group(1)
            else:
                time.sleep(0.05)   # polling a log file: there is nothing to await
        if self.url is None:
            raise SystemExit("outbox-mock did not start")

    def stop(self):
        self.process.terminate()
        self.process.wait()


def tracking_s(scenario):
    """Tracking spans the fault, so that the healthy destination is measured while the other is in it."""
    return max(25, fault_end_s(scenario) + 10)


def run(fault_on, scenario, seconds):
    """One run: `scenario` on the destination `fault_on` (None: no fault), the other on a healthy mock; the events
    tracked evenly over `seconds`."""
    with tempfile.TemporaryDirectory() as work:
        mocks = {name: Mock(scenario if name == fault_on else "ok", work) for name in DESTINATIONS}
        try:
            arguments = [os.path.join(bin_dir, "outbox"), "emit", "--store", os.path.join(work, "store.outbox"),
                         "--count", str(events), "--rate", str(round(events / seconds, 1)),
                         "--wait-delivered", "--timeout", "300"]
            for name, wire in DESTINATIONS.items():
                arguments += ["--to", f"{name}={wire},endpoint={mocks[name].url}"]
            environment = dict(os.environ, OUTBOX_PRODUCT_API_KEY="phc_destinations_scenarios")
            done = subprocess.run(arguments, capture_output=True, text=True, env=environment)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            report = json.loads(lines[-1]) if lines else {}
            result = {"fault_on": fault_on, "scenario": scenario, "exit": done.returncode}
            for name, wire in DESTINATIONS.items():
                stats = get_json(mocks[name].url + "/_mock/stats")
                vendor = stats.get("vendors", {}).get(wire, {})
                mine = report.get("destinations", {}).get(name, {})
                result[name] = {"unique": vendor.get("events_unique", 0), "duplicates": vendor.get("events_duplicate", 0),
                                "p99_ms": (stats.get("delay_ms") or {}).get("p99"),
                                "dead_letters": mine.get("dead_letters"), "pending": mine.get("pending"),
                                "disabled": mine.get("disabled_reason")}
            return result
        finally:
            for mock in mocks.values():
                mock.stop()


rows = []
baselines = {}   # by tracking time: the rate sets how fast batches fill, and so the p99 of a healthy run
failures = 0
for scenario in scenarios:
    seconds = tracking_s(scenario)
    if seconds not in baselines:
        baselines[seconds] = baseline = run(None, "ok", seconds)
        rows.append(baseline)
        print(f"no fault, {events} events over {seconds} s: ops p99 {baseline['ops']['p99_ms']} ms, "
              f"product p99 {baseline['product']['p99_ms']} ms", flush=True)
    baseline = baselines[seconds]
    for fault_on in DESTINATIONS:
        healthy = next(name for name in DESTINATIONS if name != fault_on)
        result = run(fault_on, scenario, seconds)
        rows.append(result)
        base = baseline[healthy]["p99_ms"] or 0
        got = result[healthy]["p99_ms"] or 0
        within = got <= base + max(0.1 * base, 500)
        once = result[healthy]["unique"] == events and result[healthy]["pending"] == 0
        faulty = result[fault_on]
        # The faulty destination holds every event once: delivered, or dead-lettered / left pending as its
        # scenario makes it (a 401 stops sending; a poison or a too-large log is refused).
        accounted = faulty["unique"] + (faulty["dead_letters"] or 0) + (faulty["pending"] or 0) >= events
        ok = within and once and accounted
        failures += not ok
        result.update(healthy=healthy, within=within, once=once, accounted=accounted, baseline_p99_ms=base)
        print(f"{scenario:17} on {fault_on:8} healthy {healthy}: p99 {got} ms (no fault {base}) "
              f"{'within' if within else 'NOT within'}; unique {result[healthy]['unique']} dup "
              f"{result[healthy]['duplicates']}; faulty: unique {faulty['unique']} dup {faulty['duplicates']} "
              f"dead {faulty['dead_letters']} pending {faulty['pending']} disabled {faulty['disabled']}"
              f"{'' if ok else '  <- FAILED'}", flush=True)
with open("destinations-scenarios.json", "w") as f:
    json.dump(rows, f, indent=1)
sys.exit(1 if failures else 0)
