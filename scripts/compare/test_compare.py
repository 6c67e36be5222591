#!/usr/bin/env python3
"""The added delay of `make compare` (SPEC D9a), on figures made up here: no mock, no client.

    python3 scripts/compare/test_compare.py
"""
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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

    def test_an_event_without_a_time_has_none(self):
        self.assertIsNone(compare.event_ms("segment", {}))
        self.assertIsNone(compare.event_ms("otlp", {"timeUnixNano": "soon"}))


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
