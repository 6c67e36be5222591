import FoundationEssentials

/// The seam between delivery and a destination's wire (SPEC D1–D6). The delivery machine, the store, batching and
/// the retry rules are the same for every destination; what differs sits behind this protocol: where a request goes
/// and with which credentials, how a batch becomes a body, how large a request and a log may be, and what an
/// answer means. A new wire is one conformer, its `DestinationSpec` and a case of `Destination` (docs/ARCHITECTURE.md,
/// "Destinations"). A wire holds its credentials from its initialiser.
///
/// Encoding happens at send time from the stored, wire-neutral log (D2), and is deterministic per log: a resend of
/// a log carries the same record, but for the times stamped per attempt.
protocol DeliveryWire: Sendable {
    var destination: Destination { get }
    /// The install the requests come from (`Install-ID`; the anonymous id of the vendors' events).
    var installID: UUID { get }
    /// The request's URL and its headers: content type, credentials and the user's `headers` (the driver adds
    /// `Content-Encoding`).
    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings
    /// The uncompressed body of a batch.
    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8]
    /// The largest uncompressed request body the destination takes, in bytes (SPEC D6); nil: none of its own
    /// (a 413 still splits the batch, R1).
    var maxRequestBytes: Int? { get }
    /// The largest uncompressed log (one record or event in the body) it takes; a larger one is dead-lettered.
    var maxLogBytes: Int? { get }
    /// What an answer means for its batch: R1, plus what the wire adds.
    func outcome(of result: TransferResult, nowWallMs: Int64) -> DeliveryMachine.Outcome
    /// The most logs one request carries (GA4's 25 events); nil: `batchSize` alone. The claim takes no more, and a
    /// batch claimed larger under another wire is split before it is sent.
    var maxLogsPerRequest: Int? { get }
    /// Whether the driver may gzip the body (W1): not where the wire compresses its own payload (Sensors' gzipped
    /// `data_list`) or the server documents no `Content-Encoding` (GA4).
    var acceptsGzipBody: Bool { get }
    /// Why the destination must never receive `log` (GA4: older than it takes), or nil: the log is dead-lettered
    /// with this reason before any request, as an oversize one is.
    func refusal(of log: StoredLog, times: WireTimes) -> String?
}

/// The times one attempt stamps (SPEC A9, D7a): the send time, and each log's event time — corrected by the
/// server's clock (App Center, OTLP), or as the device's clock reads them (PostHog, Segment: their servers correct
/// by the send time themselves).
struct WireTimes {
    /// A9's send time and event times.
    var sentAtMs: Int64
    var timestamp: (StoredLog) -> Int64
    /// D7a: the device's wall clock at this attempt, and each log's time as that minus its age on the boot clock
    /// (its wall-clock capture time when the boot changed).
    var deviceNowMs: Int64
    var deviceTimestamp: (StoredLog) -> Int64

    init(sentAtMs: Int64, timestamp: @escaping (StoredLog) -> Int64,
         deviceNowMs: Int64? = nil, deviceTimestamp: ((StoredLog) -> Int64)? = nil) {
        self.sentAtMs = sentAtMs
        self.timestamp = timestamp
        self.deviceNowMs = deviceNowMs ?? sentAtMs
        self.deviceTimestamp = deviceTimestamp ?? timestamp
    }

    /// SPEC D7a: a log's time on a wire whose server corrects by the send time: the send time minus the log's age
    /// on the boot clock, so that a wall clock stepped between capture and send does not move it; the wall-clock
    /// capture time when the boot changed (the boot clock's age is unknown then).
    static func deviceTime(of log: StoredLog, nowWallMs: Int64, nowMonoNs: Int64, nowBoot: Int64) -> Int64 {
        guard log.boot == nowBoot, nowBoot != 0, nowMonoNs >= log.monoNs else { return log.wallMs }
        return nowWallMs - (nowMonoNs - log.monoNs) / 1_000_000
    }
}

extension DeliveryWire {
    var maxRequestBytes: Int? { nil }
    var maxLogBytes: Int? { nil }
    var maxLogsPerRequest: Int? { nil }
    var acceptsGzipBody: Bool { true }
    func refusal(of log: StoredLog, times: WireTimes) -> String? { nil }

    func outcome(of result: TransferResult, nowWallMs: Int64) -> DeliveryMachine.Outcome {
        DeliveryMachine.classify(result, nowWallMs: nowWallMs)
    }

    /// The URL a batch is posted to (SPEC D1). A base URL gets the wire's `path` appended, a trailing slash of the
    /// base dropped; an endpoint whose path already ends in `path` (a trailing slash aside) is the whole URL and is
    /// used as it is — OpenTelemetry's convention, where `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` is the full URL and the
    /// base one gets `/v1/logs` appended. `query` (App Center's `api-version=1.0.0`) goes in unless the endpoint
    /// already has it; an endpoint's own query is kept, after the path.
    static func url(_ endpoint: String, _ path: String, query: String? = nil) -> String {
        let parts = endpoint.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let base = String(parts[0])
        let ownQuery = parts.count > 1 ? String(parts[1]) : nil
        // The path starts at the first slash after the authority: `http://logs` is a host, not a path.
        let basePath = base[base.afterScheme...].firstIndex(of: "/").map { base[$0...] } ?? ""
        func trimmed(_ text: Substring) -> Substring {
            var text = text
            while text.hasSuffix("/") { text = text.dropLast() }
            return text
        }
        let wirePath = trimmed(Substring(path))
        var queries: [String] = []
        if let query, !(ownQuery ?? "").split(separator: "&").contains(Substring(query)) { queries.append(query) }
        if let ownQuery, !ownQuery.isEmpty { queries.append(ownQuery) }
        let queryText = queries.isEmpty ? "" : "?" + queries.joined(separator: "&")
        if !wirePath.isEmpty, trimmed(basePath).hasSuffix(wirePath) { return base + queryText }
        return (base.hasSuffix("/") ? String(base.dropLast()) : base) + path + queryText
    }

    /// `Install-ID` (every wire sends it: a load balancer can route by it), then the user's own headers.
    func commonHeaders(_ headers: [HeaderField]) -> [(String, String)] {
        [("Install-ID", installID.uuidString.lowercased())] + headers.map { ($0.name, $0.value) }
    }
}
