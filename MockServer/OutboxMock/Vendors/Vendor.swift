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

/// Decodes a request for the vendor `route` found (SPEC V1–V3), through its wire.
enum VendorWires {
    /// Decodes a request whose body was read; `failure` is what went wrong reading it (too large, not
    /// valid gzip), answered in the vendor's error shape.
    static func decode(_ vendor: Vendor, head: HTTPRequestHead, path: String, body: UnsafeBufferPointer<UInt8>,
                       failure: (status: Int, reason: String)?) -> VendorBatch {
        decode(vendor, VendorRequest(method: head.method, uri: head.uri, path: path, headers: head.headers, body: body),
               failure: failure)
    }

    static func decode(_ vendor: Vendor, _ request: VendorRequest, failure: (status: Int, reason: String)?) -> VendorBatch {
        let wire = vendor.wire
        if let failure {
            return .refusedWhole(vendor, wire.error(failure.status, failure.reason, request), injected: wire.injected(request))
        }
        // The pipeline inflates gzip and deflate; anything else (PostHog v1's zstd) would reach the decoder as
        // bytes it cannot read.
        if let encoding = request.headers.first(name: "content-encoding")?.lowercased(),
           !["gzip", "deflate", "identity"].contains(encoding) {
            return .refusedWhole(vendor, wire.error(415, "Content-Encoding \(encoding) is not supported (gzip and deflate are)",
                                                    request), injected: wire.injected(request))
        }
        guard let batchWire = wire as? any VendorBatchWire.Type else {
            // App Center's logs are validated in place (`AppCenterWire.prepare`), never as a vendor batch.
            return .refusedWhole(vendor, AppCenterWire.notFound(request.path), injected: wire.injected(request))
        }
        return batchWire.decode(request)
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
