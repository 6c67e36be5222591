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
    /// Amplitude's HTTP V2 API: `/2/httpapi`.
    case amplitude
    /// Sensors Analytics' data access: `POST /sa?project=P`, a form of gzipped base64 records (SPEC D11).
    case sensors
    /// GA4's Measurement Protocol: `POST /mp/collect`, `/debug/mp/collect` (SPEC D12).
    case ga4
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

/// One event of a request, accepted by its wire's validation, before de-duplication: an App Center log as much as
/// another vendor's event.
struct VendorEvent: Sendable {
    /// The vendor's de-duplication key (SPEC V3); nil when the event has none (and no `id`), and is then always unique.
    var key: String?
    /// What a scenario's `log_name` matches (SPEC V4b).
    var name: String?
    /// The vendor's event timestamp, epoch ms, for delivery delays and late events (SPEC M7, V4b).
    var timestampMs: Int64?
    /// The event as received, on one line; empty when it is read from the request's kept body (`span`).
    var json: [UInt8]
    /// Where the event is in the request's kept body: an App Center log object's bytes, or an OTLP record's index as
    /// a one-element range (its JSON is rendered when `/_mock/logs` reads it, not on arrival, where it was most of the
    /// decoder's cost). nil: the event is its own `json`.
    var span: Range<Int>? = nil
    /// An App Center log's id: its de-duplication key, kept in the server's flat table of ids (`UUIDSet`, SPEC M2).
    var id: UUIDKey? = nil
    /// An App Center log's type; every other vendor's event is an `.event`.
    var type: LogType = .event

    /// OTLP: the record's place among its request's accepted records.
    var recordIndex: Int? { span?.lowerBound }
}

extension VendorEvent {
    /// An accepted App Center log, read back from the request's body.
    init(_ log: ValidatedLog) {
        self.init(key: nil, name: log.name, timestampMs: log.timestampMs, json: [], span: log.span, id: log.id,
                  type: log.type)
    }
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
    /// GA4: events accepted with a 2xx that GA4 would drop for breaking its rules (SPEC D12).
    var invalid = 0
    /// The healthy server's answer.
    var normal: HTTPResponse
    /// The vendor's answer to a status a scenario injects without a body: its error or success shape.
    var injected: @Sendable (Int) -> HTTPResponse
    /// OTLP: how to decode the request's body again to render its events' JSON when they are read.
    var renderedWhenRead: OTLPSource?
    /// The install the events are counted under (SPEC M2 `installs`): App Center's `Install-ID`; nil for vendors
    /// without one.
    var install: String?
    /// Whether the kept body has whitespace between tokens: the events read from it are then minified.
    var minify = false

    /// Whether the events are read back from the request's body, which the server then keeps (`StoredBody`).
    var readsKeptBody: Bool { events.contains { $0.span != nil } }

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
        let request = VendorRequest(method: head.method, uri: head.uri, path: path, headers: head.headers, body: body)
        var context = WireContext(cutoff: ReportingCutoff(timeZone: MockServer.Configuration.defaultReportTimeZone))
        return vendor.wire.read(WireInput(request: request, head: head, install: head.headers.first(name: "install-id")),
                                failure: failure, context: &context)
    }

    /// A path no wire owns: the mock's default wire, App Center's (Outbox's own, SPEC W1), answers it, with a 404 that
    /// lists every wire's paths and in its shape for a status a scenario injects.
    static func unrouted(_ request: VendorRequest) -> VendorBatch {
        let wire = Vendor.appcenter.wire
        return .refusedWhole(wire.vendor, AppCenterWire.notFound(request.path), injected: wire.injected(request))
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
