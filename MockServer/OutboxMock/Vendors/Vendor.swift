import Foundation
import NIOHTTP1

/// The ingestion APIs the mock speaks (SPEC V1, V3). Every event the server records carries one.
public enum Vendor: String, CaseIterable, Codable, Sendable {
    /// Outbox's own wire, App Center's (SPEC W1): `POST /logs`.
    case appcenter
    /// Segment's tracking API: `/v1/batch` and the single-call paths.
    case segment
    /// PostHog's capture API: v0 `/batch/`, `/capture/`, `/e/`, `/i/v0/e/`; v1 `/i/v1/analytics/events`.
    case posthog
    /// Snowplow's collector: tracker protocol 2 `POST /com.snowplowanalytics.snowplow/tp2`, `GET /i`.
    case snowplow
    /// Mixpanel's ingestion API: `/track`, `/engage`, `/groups`, `/import`.
    case mixpanel
    /// OpenTelemetry's OTLP/HTTP: `/v1/logs`, `/v1/traces`, `/v1/metrics`.
    case otlp

    /// The vendor whose ingestion API owns `path` (without its query), nil when none does. Routing is by
    /// path alone: a wrong method on a known path gets that vendor's 405, not App Center's 404.
    static func route(path: String) -> Vendor? {
        switch path {
        case "/logs": .appcenter
        case _ where SegmentWire.paths.contains(path): .segment
        case _ where PostHogWire.paths.contains(path): .posthog
        case SnowplowWire.postPath, SnowplowWire.getPath: .snowplow
        case _ where MixpanelWire.paths.contains(path): .mixpanel
        case "/v1/logs", "/v1/traces", "/v1/metrics": .otlp
        default: nil
        }
    }
}

/// The part of a request a vendor's decoder reads: its head and its body, already decompressed
/// (gzip and deflate, by the pipeline's decompressor).
struct VendorRequest {
    var method: HTTPMethod
    var uri: String
    var path: String
    var headers: HTTPHeaders
    var body: UnsafeBufferPointer<UInt8>

    /// The query's parameters in order, `+` and `%XX` decoded.
    var query: [(String, String)] {
        guard let q = uri.firstIndex(of: "?") else { return [] }
        return FormFields.parse(Array(uri.utf8[uri.utf8.index(after: q)...]))
    }

    /// The `Authorization` header's Basic user name (a write key or an API secret), nil without one.
    var basicUser: String? {
        guard let auth = headers.first(name: "authorization"), auth.lowercased().hasPrefix("basic ") else { return nil }
        let encoded = auth.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard let decoded = Base64.decode(Array(encoded.utf8)) else { return nil }
        let text = String(decoding: decoded, as: UTF8.self)
        return String(text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// The `Authorization` header's Bearer token, nil without one.
    var bearer: String? {
        guard let auth = headers.first(name: "authorization"), auth.lowercased().hasPrefix("bearer ") else { return nil }
        let token = auth.dropFirst(7).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}

/// One event of a vendor's request, accepted by its validation, before de-duplication.
struct VendorEvent: Sendable {
    /// The vendor's de-duplication key (SPEC V3); nil when the event has none, and is then always unique.
    var key: String?
    /// What a scenario's `log_name` matches (SPEC V4b).
    var name: String?
    /// The vendor's event timestamp, epoch ms, for delivery delays and late events (SPEC M7, V4b).
    var timestampMs: Int64?
    /// The event as received, on one line; empty when it is rendered only when read (`recordIndex`).
    var json: [UInt8]
    /// OTLP: the record's place among its request's accepted records. Its JSON is rendered from the request's
    /// kept body when `/_mock/logs` reads it, not on arrival, where it was most of the decoder's cost.
    var recordIndex: Int?
}

/// A vendor request as its decoder read it: the events to record, what a healthy server of that vendor
/// answers, and how it answers a status that a scenario injects.
struct VendorBatch {
    var vendor: Vendor
    /// Accepted events, recorded when the request's answer is the normal one (or a 2xx a scenario gives).
    var events: [VendorEvent] = []
    /// Events in the body, refused ones included (`min_logs`, `/_mock/requests`).
    var eventCount = 0
    /// Names of every event in the body, for `log_name` rules.
    var names: [String] = []
    /// Events the vendor's service refuses: in a 400 for the whole request, or one by one inside a 2xx.
    var refused = 0
    /// The healthy server's answer.
    var normal: HTTPResponse
    /// The vendor's answer to a status a scenario injects without a body: its error or success shape.
    var injected: @Sendable (Int) -> HTTPResponse
    /// OTLP: how to decode the request's body again to render its events' JSON when they are read.
    var renderedWhenRead: OTLPSource?

    init(vendor: Vendor, normal: HTTPResponse, injected: @escaping @Sendable (Int) -> HTTPResponse) {
        self.vendor = vendor
        self.normal = normal
        self.injected = injected
    }

    /// The same, answered with `normal` instead (a 405 with its `Allow` header).
    func with(normal: HTTPResponse) -> VendorBatch {
        var copy = self
        copy.normal = normal
        return copy
    }

    /// A request refused as a whole: every event in it counts as refused.
    static func refusedWhole(_ vendor: Vendor, _ response: HTTPResponse, events: Int = 0,
                             injected: @escaping @Sendable (Int) -> HTTPResponse) -> VendorBatch {
        var batch = VendorBatch(vendor: vendor, normal: response, injected: injected)
        batch.eventCount = events
        batch.refused = events
        return batch
    }
}

/// Decodes a request for the vendor `route` found (SPEC V1–V3).
enum VendorWires {
    /// Decodes a request whose body was read; `failure` is what went wrong reading it (too large, not
    /// valid gzip), answered in the vendor's error shape.
    static func decode(_ vendor: Vendor, head: HTTPRequestHead, path: String, body: UnsafeBufferPointer<UInt8>,
                       failure: (status: Int, reason: String)?) -> VendorBatch {
        let request = VendorRequest(method: head.method, uri: head.uri, path: path, headers: head.headers, body: body)
        if let failure {
            return .refusedWhole(vendor, error(vendor, failure.status, failure.reason, request),
                                 injected: injected(vendor, request))
        }
        // The pipeline inflates gzip and deflate; anything else (PostHog v1's zstd) would reach the decoder as
        // bytes it cannot read.
        if let encoding = head.headers.first(name: "content-encoding")?.lowercased(),
           !["gzip", "deflate", "identity"].contains(encoding) {
            return .refusedWhole(vendor, error(vendor, 415, "Content-Encoding \(encoding) is not supported (gzip and deflate are)",
                                               request), injected: injected(vendor, request))
        }
        return decode(vendor, request)
    }

    /// How the vendor answers a status a scenario injects without a body (SPEC V2).
    static func injected(_ vendor: Vendor, _ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        switch vendor {
        case .segment: SegmentWire.injected
        case .posthog: PostHogWire.injected(request)
        case .snowplow: SnowplowWire.injected(request)
        case .mixpanel: MixpanelWire.injected(request)
        case .otlp: OTLPHTTPWire.injected(request)
        case .appcenter: { MockCore.appCenterResponse(status: $0) }
        }
    }

    /// The vendor's error shape for a request refused before its body could be read.
    static func error(_ vendor: Vendor, _ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse {
        switch vendor {
        case .segment: SegmentWire.error(status, status == 413 ? "payload_too_large" : "invalid_request", reason)
        case .posthog: PostHogWire.error(status, reason)
        case .snowplow: SnowplowWire.error(status, reason)
        case .mixpanel: MixpanelWire.error(status, reason, request)
        case .otlp: OTLPHTTPWire.error(status, reason, request)
        case .appcenter: .json(status, status == 413 ? "TooLarge" : "Invalid", reason: reason)
        }
    }

    static func decode(_ vendor: Vendor, _ request: VendorRequest) -> VendorBatch {
        switch vendor {
        case .segment: SegmentWire.decode(request)
        case .posthog: PostHogWire.decode(request)
        case .snowplow: SnowplowWire.decode(request)
        case .mixpanel: MixpanelWire.decode(request)
        case .otlp: OTLPHTTPWire.decode(request)
        case .appcenter:
            // App Center's wire is the connection handler's own (LogValidator); it never routes here.
            .refusedWhole(vendor, .json(404, "NotFound", reason: "no vendor wire for \(request.path)"),
                          injected: { MockCore.appCenterResponse(status: $0) })
        }
    }
}

extension UUIDKey {
    /// The id of stored vendor events, which have no App Center id.
    static let zero = UUIDKey(high: 0, low: 0)

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }
}
