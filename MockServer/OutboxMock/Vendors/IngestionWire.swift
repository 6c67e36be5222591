import NIOHTTP1

/// One ingestion API the mock speaks (SPEC W1, V1–V4), App Center's as much as the others: the paths it owns, how it
/// reads a request whose body was read, how it answers a status a scenario injects, and its error shape for a request
/// refused before its body could be read. A new ingestion wire is a type conforming to this and a case of `Vendor`
/// whose `wire` names it; the connection handler and the recording know no wire by name.
protocol IngestionWire {
    static var vendor: Vendor { get }
    /// Whether `path` (without its query) is one of this wire's.
    static func owns(path: String) -> Bool
    /// Reads the request into the batch every wire fills: its normal answer and injected answers, the events to
    /// record (App Center's logs among them), their count and names; `failure`: what went wrong reading the body.
    static func read(_ request: WireInput, failure: (status: Int, reason: String)?, context: inout WireContext)
        -> VendorBatch
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
        case .amplitude: AmplitudeWire.self
        case .sensors: SensorsWire.self
        case .ga4: GA4Wire.self
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
        case .amplitude: "Amplitude: POST /2/httpapi"
        case .sensors: "Sensors Analytics: POST /sa?project=NAME"
        case .ga4: "GA4: POST /mp/collect, /debug/mp/collect"
        }
    }

    /// The vendor whose ingestion API owns `path` (without its query), nil when none does. Routing is by path alone:
    /// a wrong method on a known path gets that vendor's 405, not a 404.
    static func route(path: String) -> Vendor? {
        allCases.first { $0.wire.owns(path: path) }
    }
}

/// The vendors whose decoder reads the body alone (all but App Center, whose refusals come in its own order, before
/// and after the body's, and whose logs are validated in place on the connection's reused tape): they share the
/// refusals made before their decoder runs.
protocol VendorBatchWire: IngestionWire {
    static func decode(_ request: VendorRequest) -> VendorBatch
}

extension VendorBatchWire {
    static func read(_ input: WireInput, failure: (status: Int, reason: String)?, context: inout WireContext)
        -> VendorBatch {
        let request = input.request
        if let failure {
            return .refusedWhole(vendor, error(failure.status, failure.reason, request), injected: injected(request))
        }
        // The pipeline inflates gzip and deflate; anything else (PostHog v1's zstd) would reach the decoder as
        // bytes it cannot read.
        if let encoding = request.headers.first(name: "content-encoding")?.lowercased(),
           !["gzip", "deflate", "identity"].contains(encoding) {
            return .refusedWhole(vendor, error(415, "Content-Encoding \(encoding) is not supported (gzip and deflate are)",
                                               request), injected: injected(request))
        }
        return decode(request)
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

extension AmplitudeWire: VendorBatchWire {
    static var vendor: Vendor { .amplitude }
    static func owns(path: String) -> Bool { paths.contains(path) }
    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse { error(status, reason) }
}

extension SensorsWire: VendorBatchWire {
    static var vendor: Vendor { .sensors }
    static func owns(path: String) -> Bool { path == Self.path }
    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse { error(status, reason) }
}

extension GA4Wire: VendorBatchWire {
    static var vendor: Vendor { .ga4 }
    static func owns(path: String) -> Bool { path == collectPath || path == debugPath }
    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse { error(status, reason) }
}
