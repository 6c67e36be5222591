"""SPEC F7 (docs/BEHAVIOUR.md): merging the closing objects of `outbox fleet` shards into one run.

Counts add; the delay histograms' `[value in ms, count]` pairs are recorded into one HdrHistogram(1, 86 400 000, 3),
the precision the shards' own histograms have, so the merged percentiles are those of the union of every shard's
delays (within HdrHistogram's precision), not an average of percentiles. Pure: no Locust, no I/O.
"""
from hdrh.histogram import HdrHistogram

COUNTS = ["devices", "tracked", "delivered", "duplicates", "dead_lettered", "evicted", "pending"]


def merged_histogram(shards):
    histogram = HdrHistogram(1, 86_400_000, 3)
    for shard in shards:
        for value, count in shard.get("delay_histogram") or []:
            histogram.record_value(max(1, min(int(value), 86_400_000)), int(count))
    return histogram


def merge(shards, expected):
    """`shards`: {index: summary} of the shards that reported; `expected`: how many there are. Returns the merged
    object and the problems that make the run fail (each naming its shard); an empty list means the run passed."""
    problems = []
    for index in range(expected):
        if index not in shards:
            problems.append(f"shard {index} never reported")
    for index in sorted(shards):
        summary = shards[index]
        if summary.get("error"):
            problems.append(f"shard {index}: {summary['error']}")
            continue
        if summary.get("lost") != 0:
            problems.append(f"shard {index}: lost {summary.get('lost')}")
        if summary.get("cross_mock_duplicates") != 0:
            problems.append(f"shard {index}: cross_mock_duplicates {summary.get('cross_mock_duplicates')}")
    reported = [shards[i] for i in sorted(shards) if not shards[i].get("error")]
    merged = {"shards": expected, "reported": sorted(shards)}
    for key in COUNTS:
        merged[key] = sum(int(s.get(key) or 0) for s in reported)
    for key in ["lost", "cross_mock_duplicates"]:
        values = [s.get(key) for s in reported]
        merged[key] = None if not values or any(v is None for v in values) else sum(values)
    merged["events_per_s"] = round(sum(float(s.get("events_per_s") or 0) for s in reported), 1)
    merged["peak_rss_kib"] = max([int(s.get("peak_rss_kib") or 0) for s in reported] or [0])
    merged["cpu_s"] = round(sum(float(s.get("cpu_s") or 0) for s in reported), 2)
    histogram = merged_histogram(reported)
    if histogram.get_total_count() > 0:
        merged["delay_ms"] = {"p50": histogram.get_value_at_percentile(50), "p90": histogram.get_value_at_percentile(90),
                              "p99": histogram.get_value_at_percentile(99), "max": histogram.get_max_value()}
    else:
        merged["delay_ms"] = None
    merged["passed"] = not problems
    merged["problems"] = problems
    return merged, histogram


def html(merged, histogram, shards):
    """A self-contained page: the merged figures, tracked and delivered over time per shard, the merged delay
    distribution (inline SVG, no script)."""
    def polyline(points, x_max, y_max, color, width=640, height=160):
        if not points:
            return ""
        coords = " ".join(f"{40 + (x / max(x_max, 1e-9)) * (width - 50):.1f},"
                          f"{height - 20 - (y / max(y_max, 1)) * (height - 30):.1f}" for x, y in points)
        return f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{coords}"/>'

    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    curves = []
    t_max = max([row[0] for s in shards.values() for row in (s.get("samples") or [])] or [1])
    y_max = max([row[1] for s in shards.values() for row in (s.get("samples") or [])] or [1])
    for index in sorted(shards):
        samples = shards[index].get("samples") or []
        color = colors[index % len(colors)]
        curves.append(polyline([(r[0], r[1]) for r in samples], t_max, y_max, color))
        curves.append(polyline([(r[0], r[2]) for r in samples if r[2] is not None], t_max, y_max, color)
                      .replace('stroke-width="1.5"', 'stroke-width="1.5" stroke-dasharray="4 3"'))
    legend = " ".join(f'<span style="color:{colors[i % len(colors)]}">shard {i}</span>' for i in sorted(shards))
    distribution = []
    if histogram.get_total_count() > 0:
        percentiles = [50, 75, 90, 95, 99, 99.9, 100]
        values = [histogram.get_value_at_percentile(p) for p in percentiles]
        top = max(values) or 1
        for row, (p, v) in enumerate(zip(percentiles, values)):
            distribution.append(f'<rect x="80" y="{10 + row * 22}" width="{max(1, v / top * 500):.1f}" height="16" '
                                f'fill="#1f77b4"/><text x="4" y="{23 + row * 22}">p{p}</text>'
                                f'<text x="{90 + v / top * 500:.1f}" y="{23 + row * 22}">{v} ms</text>')
    rows = "".join(f"<tr><td>{key}</td><td>{merged[key]}</td></tr>" for key in merged if key not in ("problems",))
    problems = "".join(f"<li>{p}</li>" for p in merged["problems"]) or "<li>none</li>"
    verdict = "passed: every shard reported once, nothing lost" if merged["passed"] else "FAILED"
    return f"""<!doctype html><meta charset="utf-8"><title>outbox fleet, merged</title>
<body style="font-family:sans-serif;max-width:760px">
<h1 style="font-size:18px">outbox fleet on Locust: {merged['shards']} shards — {verdict}</h1>
<table>{rows}</table><h2 style="font-size:15px">problems</h2><ul>{problems}</ul>
<h2 style="font-size:15px">tracked (solid) and delivered (dashed) over time, per shard: {legend}</h2>
<svg xmlns="http://www.w3.org/2000/svg" width="640" height="160">{''.join(curves)}
<text x="4" y="14">{y_max}</text><text x="580" y="155">{t_max:.0f} s</text></svg>
<h2 style="font-size:15px">delivery delay, all shards merged</h2>
<svg xmlns="http://www.w3.org/2000/svg" width="700" height="{20 + 22 * len(distribution)}">{''.join(distribution)}</svg>
</body>
"""
