#!/usr/bin/env python3
"""The added delay of `make compare` (SPEC D9a), its wires' tables and `--merge`, on figures made up here: no mock, no
client.

    python3 scripts/compare/test_compare.py
"""
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clients  # noqa: E402
import compare  # noqa: E402


def run(client, scenario, p99_all_s, lost=0, kept=0, tracked=300):
    return {"client": client, "scenario": scenario, "p99_all_s": p99_all_s, "lost": lost, "kept": kept,
            "tracked": tracked, "delivered": tracked - lost - kept}


class P99OverTracked(unittest.TestCase):
    def test_with_everything_delivered_it_is_the_mocks_p99(self):
        # The mock's rank: the ⌈0.99·n⌉-th smallest (MockStats.DelayPercentiles).
        delays = list(range(1, 301))
        self.assertEqual(compare.p99_over_tracked(delays, 300), 297)

    def test_an_undelivered_event_counts_as_infinite(self):
        # 297 delivered of 300: the 297th is the p99; one fewer and the p99 is one of the missing.
        self.assertEqual(compare.p99_over_tracked(list(range(1, 298)), 300), 297)
        self.assertEqual(compare.p99_over_tracked(list(range(1, 297)), 300), math.inf)

    def test_nothing_tracked_has_no_p99(self):
        self.assertIsNone(compare.p99_over_tracked([], 0))

    def test_results_json_has_no_infinity(self):
        self.assertEqual(compare.json_delay(math.inf), "inf")
        self.assertEqual(compare.json_delay(1234.5678), 1.235)
        json.dumps(compare.json_delay(math.inf), allow_nan=False)


class EventTime(unittest.TestCase):
    def test_each_wire_where_the_mock_reads_it(self):
        at = 1_700_000_000_123.0
        self.assertAlmostEqual(compare.event_ms("appcenter", {"timestamp": "2023-11-14T22:13:20.123Z"}), at, 3)
        self.assertAlmostEqual(compare.event_ms("segment", {"timestamp": "2023-11-14T22:13:20.123+00:00"}), at, 3)
        self.assertAlmostEqual(compare.event_ms("posthog", {"timestamp": "2023-11-14T23:13:20.123+01:00"}), at, 3)
        self.assertEqual(compare.event_ms("otlp", {"timeUnixNano": "1700000000123000000"}), at)
        # As /_mock/logs writes it: the record under `logRecord`; the Python SDK's records carry only the observed time.
        self.assertEqual(compare.event_ms("otlp", {"vendor": "otlp", "logRecord": {"timeUnixNano": "1700000000123000000"}}), at)
        self.assertEqual(compare.event_ms("otlp", {"logRecord": {"timeUnixNano": "0", "observedTimeUnixNano": "1700000000123000000"}}), at)
        self.assertEqual(compare.event_ms("snowplow", {"dtm": "1700000000000", "ttm": "1700000000123"}), at)
        self.assertEqual(compare.event_ms("snowplow", {"dtm": "1700000000123"}), at)
        self.assertAlmostEqual(compare.event_ms("mixpanel", {"properties": {"time": 1700000000.123}}), at, 3)
        self.assertEqual(compare.event_ms("mixpanel", {"properties": {"time": at}}), at)
        # Sensors and Amplitude: the record's `time` in ms; GA4: each event's `timestamp_micros`.
        self.assertEqual(compare.event_ms("sensors", {"type": "track", "time": 1700000000123}), at)
        self.assertEqual(compare.event_ms("amplitude", {"event_type": "order", "time": 1700000000123}), at)
        self.assertEqual(compare.event_ms("ga4", {"name": "order", "timestamp_micros": 1700000000123000}), at)

    def test_an_event_without_a_time_has_none(self):
        self.assertIsNone(compare.event_ms("segment", {}))
        self.assertIsNone(compare.event_ms("otlp", {"timeUnixNano": "soon"}))
        self.assertIsNone(compare.event_ms("ga4", {"name": "order"}))
        self.assertIsNone(compare.event_ms("sensors", {"type": "profile_set"}))


class Wires(unittest.TestCase):
    def test_every_client_has_its_wire_vendor_and_way_to_run(self):
        for client in compare.CLIENTS:
            self.assertIn(client, compare.VENDOR, client)
            self.assertIn(client, compare.NOTES, client)
            if compare.is_outbox(client):
                self.assertIn(client, compare.OUTBOX_WIRE, client)
                self.assertIn(compare.WIRE[client], compare.REFERENCE, client)  # the summary's row needs one
            else:
                self.assertIn(client, clients.CLIENTS, client)
                self.assertIn(client, compare.PACKAGES, client)

    def test_each_wires_reference_is_an_official_client_of_that_wire(self):
        for wire, reference in compare.REFERENCE.items():
            if reference is not None:
                self.assertEqual(compare.WIRE[reference], wire)
                self.assertFalse(compare.is_outbox(reference))

    def test_the_four_round_4_wires(self):
        # D11–D14: Outbox on each; the official client beside it where one exists (GA4 has none), each queueing
        # client the wire's reference, Mixpanel's (sent inside the call) not.
        for wire, ours, theirs in [("Sensors", "outbox-sensors", "sensors"), ("GA4", "outbox-ga4", None),
                                   ("Amplitude", "outbox-amplitude", "amplitude"),
                                   ("Mixpanel", "outbox-mixpanel", "mixpanel-import")]:
            self.assertEqual(compare.WIRE[ours], wire)
            self.assertIn(ours, compare.CLIENTS)
            if theirs:
                self.assertEqual(compare.WIRE[theirs], wire)
                self.assertIn((wire, ours, theirs), compare.PAIRS)
        self.assertEqual(compare.OUTBOX_WIRE["outbox-sensors"][:2], ["--destination", "sensors"])
        self.assertEqual(compare.ENDPOINT_PATH["outbox-sensors"], compare.ENDPOINT_PATH["sensors"])
        self.assertTrue(compare.ENDPOINT_PATH["sensors"].startswith("/sa?project="))
        self.assertIn("mixpanel-import", compare.TLS_CLIENTS)    # its retries are mounted on https:// only
        self.assertIn("mixpanel-import", compare.NO_THROUGHPUT)  # one request per call
        self.assertEqual([compare.REFERENCE[w] for w in ("Sensors", "GA4", "Amplitude", "Mixpanel")],
                         ["sensors", None, "amplitude", None])

    def test_the_newer_wires_secrets_go_in_the_environment_not_argv(self):
        for client, env in compare.OUTBOX_ENV.items():
            flags = compare.OUTBOX_WIRE[client]
            for value in env.values():
                self.assertNotIn(value, flags)


class AddedDelay(unittest.TestCase):
    def test_minus_the_same_clients_steady_p99(self):
        results = [run("outbox", "steady", 2.5), run("outbox", "outage", 9.0), run("segment", "steady", 0.5),
                   run("segment", "outage", 32.5), run("outbox", "flaky", "inf", kept=50)]
        compare.add_added_delays(results)
        self.assertEqual([r["added_delay_s"] for r in results], [0.0, 6.5, 0.0, 32.0, "inf"])

    def test_none_without_a_steady_run(self):
        results = [run("posthog", "outage", 3.0)]
        compare.add_added_delays(results)
        self.assertIsNone(results[0]["added_delay_s"])

    def test_reference_is_the_wires_client_when_it_lost_nothing_else_segments(self):
        results = [run("segment", "steady", 0.5), run("segment", "outage", 32.5), run("posthog", "steady", 0.5),
                   run("posthog", "outage", "inf", lost=200), run("posthog", "flaky", 4.0)]
        compare.add_added_delays(results)
        by_key = {(r["client"], r["scenario"]): r for r in results}
        self.assertEqual(compare.reference_for("PostHog", "flaky", by_key)["client"], "posthog")
        self.assertEqual(compare.reference_for("PostHog", "outage", by_key)["client"], "segment")
        self.assertEqual(compare.reference_for("App Center", "outage", by_key)["client"], "segment")
        self.assertIsNone(compare.reference_for("App Center", "flaky", by_key))

    def test_the_summary_sets_outbox_beside_its_reference(self):
        results = [run("outbox", "steady", 2.5), run("outbox", "outage", 9.0), run("outbox", "throttle", "inf", kept=50),
                   run("segment", "steady", 0.5), run("segment", "outage", 8.0), run("segment", "throttle", 6.0)]
        results[1]["last_after_recovery_s"] = 6.5
        compare.add_added_delays(results)
        lines = compare.summary_lines(["outbox", "segment"], ["steady", "outage", "throttle"],
                                      {(r["client"], r["scenario"]): r for r in results})
        rows = [line for line in lines if line.startswith("| App Center |")]
        self.assertIn("| App Center | outage | outbox | 0 / 0 | 6.50 | segment | 7.50 | **yes** |", rows)
        self.assertIn("| App Center | throttle | outbox | 0 / 50 | ∞ | segment | 5.50 | **no** |", rows)
        self.assertIn("| App Center | outbox | 300 of 300 | 6.50 |", rows)


class Merge(unittest.TestCase):
    def previous(self):
        return {"duration_s": 570.0, "skipped": ["mixpanel/throughput (…)", "otel/outage failed: boom"],
                "results": [run("segment", "steady", 0.5), run("segment", "outage", 32.5),
                            run("amplitude", "steady", 9.8), run("amplitude", "poison", "inf", lost=249)]}

    def test_a_rerun_replaces_its_runs_and_keeps_the_others(self):
        new = [run("amplitude", "poison", 5.0), run("outbox-amplitude", "poison", 2.5)]
        results, clients_, scenarios, skipped, invocations = compare.merge(
            self.previous(), new, ["outbox-amplitude", "amplitude"], ["poison"], [], [{"duration_s": 60.0,
                                                                                      "clients": ["amplitude"],
                                                                                      "scenarios": ["poison"]}])
        keys = sorted((r["client"], r["scenario"]) for r in results)
        self.assertEqual(keys, [("amplitude", "poison"), ("amplitude", "steady"), ("outbox-amplitude", "poison"),
                                ("segment", "outage"), ("segment", "steady")])
        self.assertEqual(next(r for r in results if r["client"] == "amplitude" and r["scenario"] == "poison")["lost"], 0)
        # In the usual order: the clients as CLIENTS lists them, the scenarios as SCENARIOS does.
        self.assertEqual(clients_, ["segment", "outbox-amplitude", "amplitude"])
        self.assertEqual(scenarios, ["steady", "outage", "poison"])
        self.assertEqual(skipped, ["mixpanel/throughput (…)", "otel/outage failed: boom"])
        self.assertEqual([one["duration_s"] for one in invocations], [570.0, 60.0])
        compare.add_added_delays(results)
        by_key = {(r["client"], r["scenario"]): r for r in results}
        self.assertAlmostEqual(by_key[("amplitude", "poison")]["added_delay_s"], -4.8)

    def test_a_rerun_client_drops_its_earlier_notes(self):
        _, _, _, skipped, _ = compare.merge(self.previous(), [run("otel", "outage", 3.0)], ["otel"], ["outage"], [],
                                            [])
        self.assertEqual(skipped, ["mixpanel/throughput (…)"])

    def test_the_report_names_each_invocation(self):
        one = [{"duration_s": 570.0}]
        self.assertIn("all runs in one invocation: **9.5 min**", compare.invocations_text(one))
        text = compare.invocations_text(one + [{"at": "2026-11-28 04:05 UTC", "duration_s": 60.0,
                                                "clients": ["amplitude"], "scenarios": ["poison"]}])
        self.assertIn("2 invocations merged with `--merge`", text)
        self.assertIn("9.5 min (the rest)", text)
        self.assertIn("1.0 min on 2026-11-28 04:05 UTC (amplitude × poison)", text)

    def test_results_json_lists_the_invocations(self):
        with tempfile.TemporaryDirectory() as out:
            results = [dict(run("segment", "steady", 0.5), duplicated=0)]
            compare.add_added_delays(results)
            invocations = [{"duration_s": 570.0}, {"duration_s": 60.0, "clients": ["segment"], "scenarios": ["steady"]}]
            compare.write_report(out, results, ["segment"], ["steady"], 60.0, [], "b", invocations)
            with open(os.path.join(out, "results.json")) as f:
                written = json.load(f)
            self.assertEqual(written["duration_s"], 630.0)
            self.assertEqual(written["invocations"], invocations)


class ReportCells(unittest.TestCase):
    def test_a_client_that_sent_nothing_after_the_recovery(self):
        self.assertEqual(compare.after_recovery_cell(-20.65), "none after it")
        self.assertEqual(compare.after_recovery_cell(3.456), "3.46")
        self.assertEqual(compare.after_recovery_cell(None), "—")

    def test_the_throughput_runs_left_out_are_named_once(self):
        notes = compare.not_run_notes(["segment", "mixpanel", "mixpanel-import"], ["steady", "throughput"],
                                      ["mixpanel/throughput (…)", "otel/outage failed: boom"])
        self.assertEqual([note.split(" ")[0] for note in notes],
                         ["mixpanel/throughput", "mixpanel-import/throughput", "otel/outage"])
        self.assertEqual(compare.not_run_notes(["mixpanel"], ["steady"], []), [])

    def test_the_load_note_sets_the_throughput_runs_apart(self):
        results = [dict(run("segment", "throughput", 1.0), load_avg=1.2), dict(run("segment", "steady", 0.5), load_avg=3.5),
                   dict(run("outbox", "steady", 2.5), load_avg=11.75), run("outbox", "flaky", 4.0)]
        note = compare.load_note(results)
        self.assertIn("throughput runs 1.2–1.2 (1 runs), the others 3.5–11.8 (2 runs)", note)
        self.assertIn("not recorded", compare.load_note([run("outbox", "throughput", 1.0)]))

    def test_report_only_writes_the_report_again_from_results_json(self):
        with tempfile.TemporaryDirectory() as out:
            results = [dict(run("segment", "steady", 0.5), duplicated=0), dict(run("segment", "outage", 8.0), duplicated=0)]
            compare.add_added_delays(results)
            compare.write_report(out, results, ["segment"], ["steady", "outage"], 60.0, ["x/y (…)"], "b",
                                 [{"duration_s": 60.0}])
            os.unlink(os.path.join(out, "REPORT.md"))
            try:
                compare.report_again(out)
            except ImportError:   # matplotlib is in the vendor venv only: the report is written before the plot
                pass
            with open(os.path.join(out, "REPORT.md")) as f:
                report = f.read()
            self.assertIn("| Segment | segment | outage | 300 | 300 | 0 | — | 0 |", report)
            self.assertIn("all runs in one invocation: **1.0 min**", report)
            self.assertIn("Not run: x/y (…).", report)


class FaultEnd(unittest.TestCase):
    def test_the_last_timed_faults_end(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"rules": [{"match": {"after_s": 2, "until_s": 22}, "action": "refuse"},
                                 {"match": {"requests": [1]}, "respond": {"status": 503}}]}, f)
        try:
            self.assertEqual(compare.fault_end_s(f.name), 22)
        finally:
            os.unlink(f.name)

    def test_the_outage_recovers_22_s_after_the_mocks_start(self):
        outage = next(file for name, file, _, _ in compare.SCENARIOS if name == "outage")
        self.assertEqual(compare.fault_end_s(outage), 22)
        flaky = next(file for name, file, _, _ in compare.SCENARIOS if name == "flaky")
        self.assertIsNone(compare.fault_end_s(flaky))

    def test_steady_is_the_fault_runs_load_on_a_healthy_server(self):
        steady = next(s for s in compare.SCENARIOS if s[0] == "steady")
        self.assertIs(steady[2], compare.PACED)
        with open(steady[1]) as f:
            self.assertEqual(json.load(f)["rules"], [])


if __name__ == "__main__":
    unittest.main()
