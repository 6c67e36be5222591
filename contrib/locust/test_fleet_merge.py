"""SPEC F7: the master's merge of shards' delay histograms gives the percentiles of the union of every shard's raw
delays, within HdrHistogram's precision (3 significant digits); averaging the shards' percentiles would not.

Run: .build/locust-venv/bin/python -m unittest contrib/locust/test_fleet_merge.py (make fleet-distributed and
make test do)."""
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hdrh.histogram import HdrHistogram  # noqa: E402

import fleet_merge  # noqa: E402


def shard_summary(delays, lost=0, cross=0):
    """A shard's closing object as `outbox fleet` writes it: its delays in a histogram of the same precision, given
    as the recorded values' [highest equivalent value, count] pairs (hdrhistogram-swift's recordedValues())."""
    histogram = HdrHistogram(1, 86_400_000, 3)
    for delay in delays:
        histogram.record_value(delay)
    pairs = [[item.value_iterated_to, item.count_at_value_iterated_to] for item in histogram.get_recorded_iterator()]
    return {"devices": 10, "tracked": len(delays), "delivered": len(delays), "duplicates": 0, "dead_lettered": 0,
            "evicted": 0, "pending": 0, "lost": lost, "cross_mock_duplicates": cross, "events_per_s": 100.0,
            "peak_rss_kib": 1000, "cpu_s": 1.0, "delay_histogram": pairs}


def exact_percentile(values, percentile):
    """The value below which `percentile` % of `values` lie, ranked as HdrHistogram ranks: the
    int(p / 100 · n + 0.5)-th smallest."""
    ordered = sorted(values)
    rank = max(1, int(percentile / 100 * len(ordered) + 0.5))
    return ordered[min(rank, len(ordered)) - 1]


class MergeTests(unittest.TestCase):
    def test_merged_percentiles_are_the_unions_within_precision(self):
        rng = random.Random(7)
        # Three shards with different delay shapes: a fast one, a slow one behind retries, one in between.
        shards = [[max(1, int(rng.lognormvariate(3, 0.6))) for _ in range(20_000)],
                  [max(1, int(rng.lognormvariate(7, 1.2))) for _ in range(5_000)],
                  [max(1, int(rng.expovariate(1 / 400))) for _ in range(12_000)]]
        merged, histogram = fleet_merge.merge({i: shard_summary(d) for i, d in enumerate(shards)}, 3)
        union = [d for shard in shards for d in shard]
        self.assertTrue(merged["passed"], merged["problems"])
        self.assertEqual(histogram.get_total_count(), len(union))
        # The union recorded directly into one histogram: the merge gives exactly its percentiles.
        direct = HdrHistogram(1, 86_400_000, 3)
        for delay in union:
            direct.record_value(delay)
        for percentile in [50, 90, 99, 99.9]:
            self.assertEqual(histogram.get_value_at_percentile(percentile), direct.get_value_at_percentile(percentile))
            exact = exact_percentile(union, percentile)
            got = histogram.get_value_at_percentile(percentile)
            # 3 significant digits: a value's bucket is at most 1/1000 of it wide (and 1 ms below 2 048 ms).
            self.assertLessEqual(abs(got - exact), max(1, exact / 1000), f"p{percentile}: {got} against {exact}")
        self.assertEqual(merged["delay_ms"]["max"], histogram.get_max_value())
        self.assertLessEqual(abs(merged["delay_ms"]["max"] - max(union)), max(1, max(union) / 1000))
        # What averaging would have said is far off: the merge is not an average.
        average_p50 = sum(exact_percentile(s, 50) for s in shards) / 3
        self.assertGreater(abs(average_p50 - exact_percentile(union, 50)), exact_percentile(union, 50))

    def test_counts_add_and_failures_name_their_shard(self):
        merged, _ = fleet_merge.merge({0: shard_summary([5] * 10), 1: shard_summary([7] * 20, lost=2, cross=1)}, 3)
        self.assertEqual(merged["tracked"], 30)
        self.assertEqual(merged["lost"], 2)
        self.assertEqual(merged["cross_mock_duplicates"], 1)
        self.assertFalse(merged["passed"])
        self.assertIn("shard 1: lost 2", merged["problems"])
        self.assertIn("shard 1: cross_mock_duplicates 1", merged["problems"])
        self.assertIn("shard 2 never reported", merged["problems"])

    def test_a_shard_that_failed_is_a_failure_not_a_count(self):
        merged, _ = fleet_merge.merge({0: shard_summary([5]), 1: {"error": "outbox fleet exited 2: not an outbox-mock"}}, 2)
        self.assertFalse(merged["passed"])
        self.assertEqual(merged["tracked"], 1)
        self.assertTrue(any(p.startswith("shard 1: outbox fleet exited 2") for p in merged["problems"]))

    def test_the_page_is_self_contained(self):
        summaries = {0: shard_summary([5, 9]), 1: shard_summary([70])}
        summaries[0]["samples"] = [[0.0, 0, 0], [1.0, 2, 1], [2.0, 2, 2]]
        merged, histogram = fleet_merge.merge(summaries, 2)
        page = fleet_merge.html(merged, histogram, summaries)
        self.assertIn("<polyline", page)
        self.assertNotIn("<script", page)
        self.assertIn("passed", page)


if __name__ == "__main__":
    unittest.main()
