import FoundationEssentials
import Glibc
import Histogram

/// The closing object of SPEC F1, with exactly its keys; `summary.json` holds the same (F2) and the delay histogram
/// (F7, `FleetReport.summaryJSON`). A new figure of the
/// report is a field here and its key in `json` (and, for the page, a row in `FleetReport.html`).
struct FleetSummary {
    struct Delay { var p50: Int; var p90: Int; var p99: Int; var max: Int }

    var devices: Int
    var tracked: Int
    var delivered: Int
    var duplicates: Int
    var deadLettered: Int
    var evicted: Int
    var pending: Int
    var lost: Int?
    /// SPEC F6: logs recorded by more than one accounting mock; nil when the records were not read.
    var crossMockDuplicates: Int?
    var eventsPerSecond: Double
    var delay: Delay?
    var peakRSSKiB: Int
    var cpuSeconds: Double
    /// BEHAVIOUR D18: with several destinations (`--to`), each one's figures, in the list's order; the counts above
    /// add theirs. Empty with the single destination, whose closing object keeps F1's keys exactly.
    var destinations: [DestinationFigures] = []

    struct DestinationFigures {
        var name: String
        var wire: String
        var delivered: Int
        var duplicates: Int
        var deadLettered: Int
        var pending: Int
        var lost: Int?

        var json: String {
            let fields: [(String, String)] = [
                ("destination", jsonString(wire)), ("delivered", String(delivered)), ("duplicates", String(duplicates)),
                ("dead_lettered", String(deadLettered)), ("pending", String(pending)), ("lost", lost.map(String.init) ?? "null"),
            ]
            return jsonObject(fields)
        }
    }

    var json: String {
        let delayJSON = delay.map { #"{"p50":\#($0.p50),"p90":\#($0.p90),"p99":\#($0.p99),"max":\#($0.max)}"# } ?? "null"
        var fields: [(String, String)] = [
            ("devices", String(devices)), ("tracked", String(tracked)), ("delivered", String(delivered)),
            ("duplicates", String(duplicates)), ("dead_lettered", String(deadLettered)), ("evicted", String(evicted)),
            ("pending", String(pending)), ("lost", lost.map(String.init) ?? "null"),
            ("cross_mock_duplicates", crossMockDuplicates.map(String.init) ?? "null"),
            ("events_per_s", cFormat("%.1f", eventsPerSecond)), ("delay_ms", delayJSON),
            ("peak_rss_kib", String(peakRSSKiB)), ("cpu_s", cFormat("%.2f", cpuSeconds)),
        ]
        if !destinations.isEmpty {
            fields.append(("destinations", jsonObject(destinations.map { ($0.name, $0.json) })))
        }
        return jsonObject(fields)
    }
}

/// A JSON object of `fields`, in their order: each key quoted, each value already JSON.
private func jsonObject(_ fields: [(String, String)]) -> String {
    "{" + fields.map { "\(jsonString($0.0)):\($0.1)" }.joined(separator: ",") + "}"
}

/// SPEC F3: `report.html` — self-contained, its plots inline SVG drawn by `SVGChart` — and `summary.json`, the
/// closing object of the run; with `--metrics-port`, `metrics.prom` too: the last scrape's text, which agrees with
/// `summary.json` (a scrape can race the process's exit; the file cannot).
struct FleetReport {
    var summary: FleetSummary
    var json: String
    var samples: [FleetSample]
    var histogram: Histogram<UInt64>
    var title: String
    var command: String
    /// `GET /metrics`'s answer once the closing object is known (FleetMetrics.swift).
    var metrics: [UInt8]? = nil
    /// SPEC F9: the run through its scenario's fault; nil when the scenario refuses nothing in a window.
    var recovery: FleetRecovery? = nil

    func write(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data((summaryJSON + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/summary.json"))
        try Data(html().utf8).write(to: URL(fileURLWithPath: directory + "/report.html"))
        if let metrics { try Data(metrics).write(to: URL(fileURLWithPath: directory + "/metrics.prom")) }
    }

    /// SPEC F7: the closing object, and beside its keys `delay_histogram`: the delay histogram's recorded values as
    /// `[value in ms, count]` pairs (`recordedValues()`: hdrhistogram-swift has no compressed encoder), so that the
    /// shards of a run on several machines merge into one histogram exactly instead of averaging percentiles. Only
    /// the file carries them: the closing line stays one a reader can take in.
    /// `samples` too: `[seconds, tracked, delivered]` over the run (delivered: what the endpoint's mock counted, null
    /// when it is not one), for a merged report's curves per shard. SPEC F9's recovery figures (`FleetRecovery`), null
    /// when the scenario has no fault window.
    var summaryJSON: String {
        let recoveryJSON = (recovery?.jsonFields ?? FleetRecovery.nullFields).map { "\(jsonString($0.0)):\($0.1)" }
            .joined(separator: ",")
        let pairs = histogram.recordedValues().map { "[\($0.value),\($0.count)]" }.joined(separator: ",")
        let curve = samples.map { "[\(cFormat("%.1f", $0.t)),\($0.tracked),\($0.delivered.map(String.init) ?? "null")]" }
            .joined(separator: ",")
        return String(json.dropLast()) + ",\(recoveryJSON)" + #","delay_histogram":[\#(pairs)],"samples":[\#(curve)]}"#
    }

    func html() -> String {
        let lost = summary.lost.map(String.init) ?? "unknown (not an outbox-mock)"
        let verdict = summary.lost == 0 ? "<span class=ok>nothing lost</span>"
            : summary.lost == nil ? "<span class=warn>loss not counted</span>" : "<span class=bad>\(lost) lost</span>"
        var rows: [(String, String)] = [
            ("devices", "\(summary.devices)"), ("tracked", "\(summary.tracked)"), ("delivered", "\(summary.delivered)"),
            ("duplicates absorbed", "\(summary.duplicates)"), ("dead-lettered", "\(summary.deadLettered)"),
            ("evicted", "\(summary.evicted)"), ("pending", "\(summary.pending)"), ("lost", lost),
            ("events/s", cFormat("%.1f", summary.eventsPerSecond)),
            ("delay p50 / p90 / p99 / max", summary.delay.map { "\($0.p50) / \($0.p90) / \($0.p99) / \($0.max) ms" } ?? "–"),
            ("peak RSS", "\(summary.peakRSSKiB / 1024) MiB"), ("CPU", cFormat("%.1f s", summary.cpuSeconds)),
        ]
        for each in summary.destinations {
            let lost: String = each.lost.map(String.init) ?? "unknown"
            rows.append(("\(each.name) (\(each.wire))", "delivered \(each.delivered), duplicates \(each.duplicates), "
                         + "dead-lettered \(each.deadLettered), pending \(each.pending), lost \(lost)"))
        }
        rows += recoveryRows
        let table = rows.map { "<tr><th>\(escape($0.0))</th><td>\(escape($0.1))</td></tr>" }.joined(separator: "\n")
        return """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
        <style>
        body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}
        h1{font-size:20px;margin:0 0 4px} code{font-size:12px;color:#555}
        .grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:16px;margin-top:16px}
        figure{margin:0;background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px}
        figcaption{font-weight:600;margin:0 0 4px 4px} svg{width:100%;height:auto}
        table{border-collapse:collapse;background:#fff;border:1px solid #ddd} th,td{padding:3px 10px;text-align:left}
        th{font-weight:500;color:#555} td{font-variant-numeric:tabular-nums}
        .ok{color:#187a2f;font-weight:600}.bad{color:#b3261e;font-weight:600}.warn{color:#9a6700;font-weight:600}
        .top{display:flex;gap:24px;align-items:flex-start} pre{font-size:12px;white-space:pre-wrap;word-break:break-all}
        </style></head><body>
        <h1>\(escape(title)) — \(verdict)</h1>
        <code>\(escape(command))</code>
        <div class=top><table>\(table)</table></div>
        <div class=grid>
        <figure><figcaption>Delivered and pending over time</figcaption>\(deliveredChart())</figure>
        <figure><figcaption>Events per second</figcaption>\(rateChart())</figure>
        <figure><figcaption>Delivery delay (server arrival − event time)</figcaption>\(delayChart())</figure>
        <figure><figcaption>Requests per second: made by the devices (refused ones included), and answered by the mock by status</figcaption>\(statusChart())</figure>
        </div>
        <h2 style="font-size:15px">summary.json</h2><pre>\(escape(json))</pre>
        </body></html>

        """
    }

    /// SPEC F9's figures, beside the others in the table.
    private var recoveryRows: [(String, String)] {
        guard let recovery else { return [] }
        func figure(_ value: Double?, _ format: String) -> String { value.map { cFormat(format, $0) } ?? "–" }
        let windows = recovery.windows.map { cFormat("%.0f–%.0f s", $0.from, $0.until) }.joined(separator: ", ")
        return [
            ("fault (connections refused)", windows),
            ("requests per device per minute in the fault", figure(recovery.faultRequestsPerDevicePerMinute, "%.2f")),
            ("fault end → its backlog delivered", figure(recovery.recoverySeconds, "%.1f s")),
            ("requests/s: peak 10 s after / steady before", figure(recovery.recoveryPeakRPS, "%.1f") + " / "
                + figure(recovery.steadyRPS, "%.1f")),
        ]
    }

    /// The fault's windows, shaded on every chart over time.
    private var shaded: [(Double, Double)] { recovery?.windows.map { ($0.from, $0.until) } ?? [] }

    private func deliveredChart() -> String {
        var series: [SVGChart.Series] = [
            .init(name: "tracked", color: "#6b7280", points: samples.map { ($0.t, Double($0.tracked)) }),
        ]
        if samples.contains(where: { $0.delivered != nil }) {
            series.append(.init(name: "delivered", color: "#187a2f",
                                points: samples.compactMap { s in s.delivered.map { (s.t, Double($0)) } }))
            series.append(.init(name: "pending", color: "#d97706",
                                points: samples.compactMap { s in s.delivered.map { (s.t, Double(max(0, s.tracked - $0))) } }))
        }
        series.append(.init(name: "devices offline", color: "#b3261e", axis: .right,
                            points: samples.map { ($0.t, Double(summary.devices - $0.online)) }))
        return SVGChart(series: series, xLabel: "s", yLabel: "logs", rightLabel: "devices offline", shaded: shaded).lineChart()
    }

    private func rateChart() -> String {
        func perSecond(_ values: [(Double, Int)]) -> [(Double, Double)] {
            zip(values, values.dropFirst()).compactMap { a, b in
                b.0 > a.0 ? (b.0, Double(b.1 - a.1) / (b.0 - a.0)) : nil
            }
        }
        var series: [SVGChart.Series] = [
            .init(name: "tracked/s", color: "#6b7280", points: perSecond(samples.map { ($0.t, $0.tracked) })),
        ]
        let delivered = samples.compactMap { s in s.delivered.map { (s.t, $0) } }
        if !delivered.isEmpty {
            series.append(.init(name: "delivered/s", color: "#187a2f", points: perSecond(delivered)))
        }
        return SVGChart(series: series, xLabel: "s", yLabel: "events/s", shaded: shaded).lineChart()
    }

    private func statusChart() -> String {
        let statuses = Set(samples.flatMap { $0.statusCounts.keys }).sorted()
        var series: [SVGChart.Series] = []
        func perSecond(_ value: (FleetSample) -> Int) -> [(Double, Double)] {
            zip(samples, samples.dropFirst()).compactMap { a, b in
                b.t > a.t ? (b.t, Double(value(b) - value(a)) / (b.t - a.t)) : nil
            }
        }
        // SPEC F9: what the devices sent, counted by their engines: during a refusal the mock sees none of it.
        let counted = samples.filter(\.requestsCounted)
        func countedPerSecond(_ value: (FleetSample) -> Int) -> [(Double, Double)] {
            zip(counted, counted.dropFirst()).compactMap { a, b in
                b.t > a.t ? (b.t, Double(value(b) - value(a)) / (b.t - a.t)) : nil
            }
        }
        if counted.contains(where: { $0.requests > 0 }) {
            series.append(.init(name: "sent by devices", color: "#111827", points: countedPerSecond(\.requests)))
            if counted.contains(where: { $0.probes > 0 }) {
                series.append(.init(name: "probes", color: "#0891b2", points: countedPerSecond(\.probes)))
            }
        }
        for status in statuses {
            series.append(.init(name: status, color: Self.statusColor(status), points: perSecond { $0.statusCounts[status] ?? 0 }))
        }
        if samples.contains(where: { $0.noAnswer > 0 }) {
            series.append(.init(name: "no answer", color: "#7c3aed", points: perSecond(\.noAnswer)))
        }
        if series.isEmpty { return SVGChart.empty("no request counts") }
        return SVGChart(series: series, xLabel: "s", yLabel: "requests/s", shaded: shaded).lineChart()
    }

    static func statusColor(_ status: String) -> String {
        switch status.first {
        case "2": return "#187a2f"
        case "4": return status == "429" ? "#d97706" : "#b3261e"
        case "5": return status == "503" ? "#ea580c" : "#9f1239"
        default: return "#2563eb"
        }
    }

    /// Counts by delay bucket: 1–2–5 steps up to the largest delay recorded.
    private func delayChart() -> String {
        guard histogram.totalCount > 0 else { return SVGChart.empty("no delivered log of this run in the mock's records") }
        var bounds: [UInt64] = [1]
        let top = histogram.max
        var step = 0
        while bounds.last! <= top && bounds.count < 40 {
            let decade = UInt64(pow(10.0, Double(step / 3)))
            bounds.append([2, 5, 10][step % 3] * decade)
            step += 1
        }
        var bars: [(String, Double)] = []
        var lower: UInt64 = 0
        for upper in bounds {
            let count = histogram.count(within: lower...(upper - 1))
            bars.append(("< " + Self.durationLabel(upper), Double(count)))
            lower = upper
        }
        // Leading empty buckets say nothing.
        while bars.count > 1, bars.first?.1 == 0 { bars.removeFirst() }
        let marks = summary.delay.map { ["p50 \(Self.durationLabel(UInt64($0.p50)))", "p90 \(Self.durationLabel(UInt64($0.p90)))",
                                          "p99 \(Self.durationLabel(UInt64($0.p99)))", "max \(Self.durationLabel(UInt64($0.max)))"] } ?? []
        return SVGChart.barChart(bars, yLabel: "logs", note: marks.joined(separator: "   "))
    }

    static func durationLabel(_ ms: UInt64) -> String {
        if ms >= 60_000 && ms % 60_000 == 0 { return "\(ms / 60_000) min" }
        if ms >= 1000 && ms % 1000 == 0 { return "\(ms / 1000) s" }
        if ms >= 1000 { return cFormat("%.1f s", Double(ms) / 1000) }
        return "\(ms) ms"
    }
}

/// A small SVG writer for the report's plots: line charts on a shared time axis (with an optional right axis) and a
/// bar chart. Enough for four figures; no dependency, no script, so the report opens anywhere.
struct SVGChart {
    enum Axis { case left, right }

    struct Series {
        var name: String
        var color: String
        var axis: Axis = .left
        var points: [(Double, Double)]
    }

    var series: [Series]
    var xLabel: String
    var yLabel: String
    var rightLabel: String? = nil
    /// Time windows shaded behind the lines (SPEC F9's fault), in the x axis's units.
    var shaded: [(Double, Double)] = []

    static let width = 640.0
    static let height = 300.0
    static let left = 64.0, right = 56.0, top = 28.0, bottom = 40.0

    static func empty(_ message: String) -> String {
        "<svg viewBox=\"0 0 \(Int(width)) 80\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"16\" y=\"44\" font-size=\"13\" fill=\"#666\">\(escape(message))</text></svg>"
    }

    func lineChart() -> String {
        let plotW = Self.width - Self.left - Self.right
        let plotH = Self.height - Self.top - Self.bottom
        let all = series.flatMap(\.points)
        guard !all.isEmpty else { return Self.empty("no samples") }
        let maxX = Self.niceCeiling(max(1, all.map(\.0).max() ?? 1, shaded.map(\.1).max() ?? 0))
        let leftMax = Self.niceCeiling(series.filter { $0.axis == .left }.flatMap(\.points).map(\.1).max() ?? 1)
        let rightMax = Self.niceCeiling(series.filter { $0.axis == .right }.flatMap(\.points).map(\.1).max() ?? 1)
        func x(_ v: Double) -> Double { Self.left + v / maxX * plotW }
        func y(_ v: Double, _ axis: Axis) -> Double { Self.top + plotH - v / (axis == .left ? leftMax : rightMax) * plotH }

        var out = "<svg viewBox=\"0 0 \(Int(Self.width)) \(Int(Self.height))\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"11\">"
        out += Self.frame(plotW: plotW, plotH: plotH)
        for window in shaded where window.1 > window.0 {
            let from = x(max(0, window.0))
            out += "<rect class=\"fault\" x=\"\(f(from))\" y=\"\(f(Self.top))\" width=\"\(f(x(min(maxX, window.1)) - from))\" height=\"\(f(plotH))\" fill=\"#fde2e2\"><title>fault: connections refused \(cFormat("%.0f–%.0f s", window.0, window.1))</title></rect>"
            out += "<text x=\"\(f(from + 4))\" y=\"\(f(Self.top + 14))\" fill=\"#b3261e\">fault</text>"
        }
        let steps = Self.divisions(leftMax)
        for i in 0...steps {
            let value = leftMax * Double(i) / Double(steps)
            let py = y(value, .left)
            out += "<line x1=\"\(f(Self.left))\" y1=\"\(f(py))\" x2=\"\(f(Self.left + plotW))\" y2=\"\(f(py))\" stroke=\"#eee\"/>"
            out += "<text x=\"\(f(Self.left - 6))\" y=\"\(f(py + 4))\" text-anchor=\"end\" fill=\"#555\">\(Self.number(value))</text>"
            if series.contains(where: { $0.axis == .right }) {
                out += "<text x=\"\(f(Self.left + plotW + 6))\" y=\"\(f(py + 4))\" fill=\"#b3261e\">\(Self.number(rightMax * Double(i) / Double(steps)))</text>"
            }
        }
        let xSteps = Self.divisions(maxX)
        for i in 0...xSteps {
            let value = maxX * Double(i) / Double(xSteps)
            out += "<text x=\"\(f(x(value)))\" y=\"\(f(Self.top + plotH + 16))\" text-anchor=\"middle\" fill=\"#555\">\(Self.number(value))</text>"
        }
        out += "<text x=\"\(f(Self.left + plotW / 2))\" y=\"\(f(Self.height - 6))\" text-anchor=\"middle\" fill=\"#333\">\(escape(xLabel))</text>"
        out += "<text x=\"14\" y=\"\(f(Self.top + plotH / 2))\" text-anchor=\"middle\" fill=\"#333\" transform=\"rotate(-90 14 \(f(Self.top + plotH / 2)))\">\(escape(yLabel))</text>"
        if let rightLabel {
            let rx = Self.width - 10
            out += "<text x=\"\(f(rx))\" y=\"\(f(Self.top + plotH / 2))\" text-anchor=\"middle\" fill=\"#b3261e\" transform=\"rotate(90 \(f(rx)) \(f(Self.top + plotH / 2)))\">\(escape(rightLabel))</text>"
        }
        for s in series where !s.points.isEmpty {
            let path = s.points.map { "\(f(x($0.0))),\(f(y($0.1, s.axis)))" }.joined(separator: " ")
            out += "<polyline fill=\"none\" stroke=\"\(s.color)\" stroke-width=\"1.8\" points=\"\(path)\"/>"
        }
        var lx = Self.left + 8
        for s in series {
            out += "<rect x=\"\(f(lx))\" y=\"8\" width=\"12\" height=\"4\" fill=\"\(s.color)\"/>"
            out += "<text x=\"\(f(lx + 16))\" y=\"14\" fill=\"#333\">\(escape(s.name))</text>"
            lx += 28 + Double(s.name.count) * 6.2
        }
        return out + "</svg>"
    }

    static func barChart(_ bars: [(String, Double)], yLabel: String, note: String) -> String {
        let plotW = width - left - right
        let plotH = height - top - bottom
        let maxY = niceCeiling(bars.map(\.1).max() ?? 1)
        let slot = plotW / Double(max(1, bars.count))
        var out = "<svg viewBox=\"0 0 \(Int(width)) \(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"11\">"
        out += frame(plotW: plotW, plotH: plotH)
        let steps = divisions(maxY)
        for i in 0...steps {
            let value = maxY * Double(i) / Double(steps)
            let py = top + plotH - value / maxY * plotH
            out += "<line x1=\"\(f(left))\" y1=\"\(f(py))\" x2=\"\(f(left + plotW))\" y2=\"\(f(py))\" stroke=\"#eee\"/>"
            out += "<text x=\"\(f(left - 6))\" y=\"\(f(py + 4))\" text-anchor=\"end\" fill=\"#555\">\(number(value))</text>"
        }
        for (i, bar) in bars.enumerated() {
            let h = bar.1 / maxY * plotH
            let bx = left + Double(i) * slot + slot * 0.12
            out += "<rect x=\"\(f(bx))\" y=\"\(f(top + plotH - h))\" width=\"\(f(slot * 0.76))\" height=\"\(f(h))\" fill=\"#2563eb\"><title>\(escape(bar.0)): \(Int(bar.1))</title></rect>"
            let cx = left + (Double(i) + 0.5) * slot
            out += "<text x=\"\(f(cx))\" y=\"\(f(top + plotH + 16))\" text-anchor=\"middle\" fill=\"#555\" font-size=\"\(bars.count > 10 ? 9 : 11)\">\(escape(bar.0))</text>"
        }
        out += "<text x=\"14\" y=\"\(f(top + plotH / 2))\" text-anchor=\"middle\" fill=\"#333\" transform=\"rotate(-90 14 \(f(top + plotH / 2)))\">\(escape(yLabel))</text>"
        out += "<text x=\"\(f(left + 8))\" y=\"16\" fill=\"#333\">\(escape(note))</text>"
        return out + "</svg>"
    }

    private static func frame(plotW: Double, plotH: Double) -> String {
        "<rect x=\"\(f(left))\" y=\"\(f(top))\" width=\"\(f(plotW))\" height=\"\(f(plotH))\" fill=\"#fff\" stroke=\"#ccc\"/>"
    }

    /// 1, 2 or 5 times a power of ten, at least `value`.
    static func niceCeiling(_ value: Double) -> Double {
        guard value > 0, value.isFinite else { return 1 }
        let magnitude = pow(10, floor(log10(value)))
        for step in [1.0, 2, 5, 10] where step * magnitude >= value { return step * magnitude }
        return 10 * magnitude
    }

    /// Grid lines for an axis ending at a `niceCeiling`: steps of 0.2 × 10ⁿ for 1 × 10ⁿ, 0.5 for 2, 1 for 5.
    static func divisions(_ ceiling: Double) -> Int {
        guard ceiling > 0, ceiling.isFinite else { return 4 }
        let mantissa = (ceiling / pow(10, floor(log10(ceiling)))).rounded()
        return mantissa == 2 ? 4 : 5
    }

    static func number(_ value: Double) -> String {
        if value >= 1_000_000 { return cFormat("%.1fM", value / 1_000_000) }
        if value >= 10_000 { return cFormat("%.0fk", value / 1000) }
        if value >= 1000 { return cFormat("%.1fk", value / 1000) }
        if value == value.rounded() { return String(Int(value)) }
        return cFormat("%.1f", value)
    }
}

private func f(_ value: Double) -> String { cFormat("%.1f", value) }

func escape(_ text: String) -> String {
    var out = ""
    for character in text {
        switch character {
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "&": out += "&amp;"
        case "\"": out += "&quot;"
        default: out.append(character)
        }
    }
    return out
}
