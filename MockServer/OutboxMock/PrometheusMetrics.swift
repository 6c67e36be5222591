/// `GET /_mock/metrics` (SPEC M9): the stats in Prometheus' text exposition format (version 0.0.4),
/// rendered from the recorded counts when scraped — nothing is counted twice, and the ingestion path
/// does no extra work for it.
///
/// Why a small writer of our own rather than swift-prometheus (2.4.1): its registry holds live metric
/// objects that the hot path would have to update as requests arrive, and its histogram takes only single
/// observations — it cannot be given the bucket counts the mock already keeps. Rendering from our counters
/// at scrape time would mean replaying every recorded delay into a fresh histogram on each scrape, or
/// counting everything twice on the hot path. The text format itself is a few lines of code (below); its
/// escaping rules are those of the exposition-format specification.
public enum PrometheusMetrics {
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Everything one scrape shows, read under one lock so that the families agree with each other.
    struct Snapshot {
        var stats: MockStats
        var histogram: DelayHistogram
        /// Ingestion requests whose head was read and whose answer is not yet written.
        var inFlight: Int
        /// Sum of the delivery delays the histogram counts, ms.
        var delaySumMs: Int64
    }

    static func render(_ snapshot: Snapshot) -> [UInt8] {
        var w = PrometheusTextWriter()
        let stats = snapshot.stats

        w.family("outbox_mock_requests_total", type: "counter",
                 help: "Ingestion requests answered, by HTTP status (faults that answer nothing are only in "
                     + "outbox_mock_faults_total).")
        for (status, count) in stats.statusCounts.sorted(by: { $0.key < $1.key }) {
            w.sample("outbox_mock_requests_total", [("status", status)], count)
        }

        let appCenter = stats.vendor(.appcenter)
        w.family("outbox_mock_logs_total", type: "counter",
                 help: "App Center logs: received (duplicates included), unique, duplicate, refused by "
                     + "validation.")
        w.sample("outbox_mock_logs_total", [("state", "received")], stats.logsReceived)
        w.sample("outbox_mock_logs_total", [("state", "unique")], stats.logsUnique)
        w.sample("outbox_mock_logs_total", [("state", "duplicate")], stats.logsDuplicate)
        w.sample("outbox_mock_logs_total", [("state", "refused")], appCenter.eventsRefused)

        w.family("outbox_mock_vendor_events_total", type: "counter",
                 help: "Events by vendor: received (duplicates included), unique, duplicate, refused by "
                     + "validation.")
        for vendor in Vendor.allCases {
            let v = stats.vendor(vendor)
            for (state, value) in [("received", v.eventsReceived), ("unique", v.eventsUnique),
                                   ("duplicate", v.eventsDuplicate), ("refused", v.eventsRefused)] {
                w.sample("outbox_mock_vendor_events_total", [("vendor", vendor.rawValue), ("state", state)], value)
            }
        }

        w.family("outbox_mock_faults_total", type: "counter",
                 help: "Scenario (or replayed) faults injected, by kind.")
        for (kind, count) in stats.faults.sorted(by: { $0.key < $1.key }) {
            w.sample("outbox_mock_faults_total", [("kind", kind)], count)
        }

        w.family("outbox_mock_in_flight", type: "gauge",
                 help: "Ingestion requests in progress: head read, answer not yet written.")
        w.sample("outbox_mock_in_flight", [], snapshot.inFlight)

        w.family("outbox_mock_delivery_delay_ms", type: "histogram",
                 help: "Delivery delay of unique logs and events: arrival minus the event's timestamp, ms.")
        var cumulative = 0
        for bucket in snapshot.histogram.buckets {
            cumulative += bucket.count
            // The live page's buckets are "below N ms" and delays are whole milliseconds, so "< N" is exactly
            // Prometheus' "le N-1": the same counts, with no observation moved across a bound.
            let le = bucket.belowMs.map { String($0 - 1) } ?? "+Inf"
            w.sample("outbox_mock_delivery_delay_ms_bucket", [("le", le)], cumulative)
        }
        if snapshot.histogram.buckets.last?.belowMs != nil {
            w.sample("outbox_mock_delivery_delay_ms_bucket", [("le", "+Inf")], cumulative)
        }
        w.sample("outbox_mock_delivery_delay_ms_sum", [], snapshot.delaySumMs)
        w.sample("outbox_mock_delivery_delay_ms_count", [], cumulative)
        return w.out
    }
}

/// Prometheus' text exposition format: `# HELP` / `# TYPE` lines, then `name{label="value"} number` lines.
/// Public so that `outbox fleet --metrics-port` renders its own counters with the same writer.
public struct PrometheusTextWriter {
    public private(set) var out: [UInt8] = []

    public init() {}

    public mutating func family(_ name: String, type: String, help: String) {
        out.append(contentsOf: "# HELP \(name) ".utf8)
        // HELP text escapes backslash and line feed.
        for byte in help.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
            default: out.append(byte)
            }
        }
        out.append(contentsOf: "\n# TYPE \(name) \(type)\n".utf8)
    }

    public mutating func sample<N: BinaryInteger>(_ name: String, _ labels: [(String, String)], _ value: N) {
        sample(name, labels, formatted: String(value))
    }

    /// A gauge that is not a whole number (a rate): Swift's shortest round-trip text, which Prometheus' parser
    /// reads; `NaN` and `±Inf` as the format spells them.
    public mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
        let text = value.isNaN ? "NaN" : value.isInfinite ? (value < 0 ? "-Inf" : "+Inf") : String(value)
        sample(name, labels, formatted: text)
    }

    private mutating func sample(_ name: String, _ labels: [(String, String)], formatted value: String) {
        out.append(contentsOf: name.utf8)
        if !labels.isEmpty {
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in labels.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: key.utf8)
                out.append(contentsOf: "=\"".utf8)
                Self.appendLabelValue(value, to: &out)
                out.append(UInt8(ascii: "\""))
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: value.utf8)
        out.append(UInt8(ascii: "\n"))
    }

    /// Label values escape backslash, double quote and line feed; anything else is UTF-8 as is. Fault kinds
    /// can come from a replayed recording, so they are not trusted to be plain words.
    static func appendLabelValue(_ value: String, to out: inout [UInt8]) {
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
            default: out.append(byte)
            }
        }
    }
}

extension MockCore {
    /// One consistent reading of every count `/_mock/metrics` shows, taken under the state's lock once.
    func metricsSnapshot() -> PrometheusMetrics.Snapshot {
        state.withLockedValue { s in
            PrometheusMetrics.Snapshot(stats: s.stats(), histogram: s.delayHistogram, inFlight: s.inFlight,
                                       delaySumMs: s.delays.reduce(0, &+))
        }
    }
}
