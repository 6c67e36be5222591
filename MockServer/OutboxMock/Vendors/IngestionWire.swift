import NIOHTTP1

/// One ingestion API the mock speaks (SPEC W1, V1–V4), App Center's as much as the others: the paths it owns, how it
/// reads a request whose body was read, how it answers a status a scenario injects, and its error shape for a request
/// refused before its body could be read. A new ingestion wire is a type conforming to this and a case of `Vendor`
/// whose `wire` names it; the connection handler and the recording know no wire by name.
protocol IngestionWire {
    static var vendor: Vendor { get }
    /// Whether `path` (without its query) is one of this wire's.
    static func owns(path: String) -> Bool
    /// Fills `prepared` (its normal answer, the logs or events to record, their names and reporting cutoffs) from the
    /// request; `failure`: what went wrong reading the body.
    static func prepare(_ request: WireInput, failure: (status: Int, reason: String)?, into prepared: inout PreparedRequest,
                        context: inout WireContext)
    /// How the wire answers a status a scenario injects without a body (SPEC V2).
    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse
    /// The wire's error shape for a request refused before its body could be read.
    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse
}

/// A request as the connection handler read it, for a wire to prepare.
struct WireInput {
    var request: VendorRequest
    var head: HTTPRequestHead
    var install: String?
    /// What the server keeps of the body when its logs are accepted (the gzip it came in, or the JSON).
    var kept: () -> StoredBody.Bytes
}

/// A connection's reusable state that wires read with: the JSON tape's storage (kept from request to request, so
/// steady traffic allocates almost nothing), the reporting cutoff's cache, the configured App-Secret.
struct WireContext {
    var tokens = JSONTokenStorage()
    var cutoff: ReportingCutoff
    var appSecret: String?
    /// The most a connection keeps of a request's buffers (the tape's storage, the body) for the next request.
    static let maxRetainedBytes = 4 * 1024 * 1024
}

extension Vendor {
    /// The wire that speaks this vendor's API: the one place a vendor is mapped to its code.
    var wire: any IngestionWire.Type {
        switch self {
        case .appcenter: AppCenterWire.self
        case .segment: SegmentWire.self
        case .posthog: PostHogWire.self
        case .snowplow: SnowplowWire.self
        case .mixpanel: MixpanelWire.self
        case .otlp: OTLPHTTPWire.self
        }
    }

    /// Where this vendor's logs or events go, for the answer to a path no wire owns.
    var ingestionPaths: String {
        switch self {
        case .appcenter: "App Center: POST /logs?api-version=1.0.0"
        case .otlp: "OTLP/HTTP: POST /v1/logs"
        case .posthog: "PostHog: POST /batch/, /capture/, /e/, /i/v0/e/, /i/v1/analytics/events"
        case .segment: "Segment and RudderStack: POST /v1/batch, /v1/track, /v1/identify, …"
        case .mixpanel: "Mixpanel: POST /track, /engage, /groups, /import"
        case .snowplow: "Snowplow: POST \(SnowplowWire.postPath), GET \(SnowplowWire.getPath)"
        }
    }

    /// The vendor whose ingestion API owns `path` (without its query), nil when none does. Routing is by path alone:
    /// a wrong method on a known path gets that vendor's 405, not a 404.
    static func route(path: String) -> Vendor? {
        allCases.first { $0.wire.owns(path: path) }
    }
}

/// The vendors decoded through `VendorBatch` (all but App Center, whose logs are validated in place): they share how
/// a request is prepared from their `decode`.
protocol VendorBatchWire: IngestionWire {
    static func decode(_ request: VendorRequest) -> VendorBatch
}

extension VendorBatchWire {
    static func prepare(_ input: WireInput, failure: (status: Int, reason: String)?, into prepared: inout PreparedRequest,
                        context: inout WireContext) {
        let batch = VendorWires.decode(vendor, input.request, failure: failure)
        prepared.vendorBatch = batch
        prepared.injected = batch.injected
        if batch.renderedWhenRead != nil, !batch.events.isEmpty { prepared.storedBody = input.kept() }
        prepared.normal = batch.normal
        prepared.logCount = batch.eventCount
        prepared.logNames = batch.names
        prepared.cutoffs = batch.events.map { $0.timestampMs.map { context.cutoff.cutoff(forTimestamp: $0) } ?? .max }
    }
}

extension SegmentWire: VendorBatchWire {
    static var vendor: Vendor { .segment }
    static func owns(path: String) -> Bool { paths.contains(path) }
    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse { injectedStatus }
    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse {
        error(status, status == 413 ? "payload_too_large" : "invalid_request", reason)
    }
}

extension PostHogWire: VendorBatchWire {
    static var vendor: Vendor { .posthog }
    static func owns(path: String) -> Bool { paths.contains(path) }
    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse { error(status, reason) }
}

extension SnowplowWire: VendorBatchWire {
    static var vendor: Vendor { .snowplow }
    static func owns(path: String) -> Bool { path == postPath || path == getPath }
    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse { error(status, reason) }
}

extension MixpanelWire: VendorBatchWire {
    static var vendor: Vendor { .mixpanel }
    static func owns(path: String) -> Bool { paths.contains(path) }
}

extension OTLPHTTPWire: VendorBatchWire {
    static var vendor: Vendor { .otlp }
    static func owns(path: String) -> Bool { path == "/v1/logs" || path == "/v1/traces" || path == "/v1/metrics" }
}
