// OTLP/HTTP on the mock (SPEC V1–V4b): a self-contained decoder, with no state and no I/O, that the vendor
// routing calls with a request it has already matched and gunzipped. Wiring it takes a few lines:
//
//     guard let signal = OTLPSignal(path: path) else { … 404 … }
//     guard let encoding = OTLPEncoding(contentType: headers["content-type"]) else {
//         let e = OTLPDecoder.errorBody(encoding: .protobuf, status: 415, message: OTLPEncoding.unsupportedMessage)
//         … answer 415 with e.contentType, e.body …
//     }
//     do {
//         let decoded = try OTLPDecoder.decode(signal: signal, encoding: encoding, body: gunzippedBody)
//         for record in decoded.records { … dedup on record.dedupKey; a unique one logs record.json … }
//         // decoded.refused.count counts in events_refused
//         let ok = OTLPDecoder.successBody(signal: signal, encoding: encoding, partial: decoded.partialSuccess)
//         … answer 200 with ok.contentType, ok.body …
//     } catch {
//         let e = OTLPDecoder.errorBody(encoding: encoding, status: error.status, message: error.message)
//         … answer error.status (400) with e.contentType, e.body …
//     }
//
// What it implements (the OTLP specification's "OTLP/HTTP" section and opentelemetry-proto v1.11.0):
// - `/v1/logs`, `/v1/traces`, `/v1/metrics`; `application/x-protobuf` and `application/json` bodies.
// - OTLP/JSON's differences from proto3's JSON mapping: ids in hex (OTLPHexIDs), unknown fields ignored; enums as
//   integers and 64-bit integers as strings or numbers are what swift-protobuf reads anyway.
// - One record per log record, span or metric data point, each with its de-duplication key (SPEC V3, V4b, D3): a
//   span's (traceId, spanId); a log record's `log.record.uid` attribute when it has one; else a log record's or
//   data point's 128-bit hash of its bytes together with its resource's
//   and scope's (and, for a data point, its metric's without the other points). The bytes are a log record's as
//   received in protobuf (OTLPWire), else the decoded message re-encoded by swift-protobuf: the same for a sender
//   that, like every OTLP exporter, writes fields in number order.
// - `log_name` (SPEC V4b): a log record's body when it is a string, else its `eventName`; a span's name; a data
//   point's metric name. The event time for the delivery delay: a log record's `timeUnixNano`, else its
//   `observedTimeUnixNano` (the Python SDK sets only that one unless the caller passes a timestamp); a span's
//   `endTimeUnixNano` (an SDK exports a span when it ends), else its start; a data point's `timeUnixNano`.
// - Validation, as the OTLP data model defines the ids: a trace id is 16 bytes and a span id 8, and all zeros is
//   not a valid id; they are required on spans and optional (empty) on log records, exemplars and a span's
//   parent. A record that breaks it is refused alone, in `partial_success` inside the 200 (SPEC V3). The
//   collector's decoder refuses a wrong length for the whole request, with a 400; the specification lets a
//   server accept the rest, which keeps a client's good records countable. A body that does not parse is a 400 whose body is a google.rpc.Status, encoded as the
//   request was, as OTLP/HTTP specifies for every 4xx and 5xx.
import Foundation
import SwiftProtobuf
import OTLPProto
import Synchronization

/// The OTLP signal a request carries, from its path.
enum OTLPSignal: String, Sendable, CaseIterable {
    case logs, traces, metrics

    /// `/v1/logs`, `/v1/traces` or `/v1/metrics`, with or without a query string; nil for anything else.
    init?(path: String) {
        let bare = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        switch bare {
        case "/v1/logs": self = .logs
        case "/v1/traces": self = .traces
        case "/v1/metrics": self = .metrics
        default: return nil
        }
    }

    var path: String { "/v1/\(rawValue)" }

    /// What the specification calls one item of this signal, for messages.
    var recordNoun: String {
        switch self {
        case .logs: "log records"
        case .traces: "spans"
        case .metrics: "data points"
        }
    }
}

/// The body encoding, from the request's Content-Type.
enum OTLPEncoding: Sendable {
    case protobuf, json

    /// OTLP/HTTP's two media types, parameters (`; charset=utf-8`) and case ignored; nil for any other, which
    /// the specification answers with 415 Unsupported Media Type.
    init?(contentType: String?) {
        guard let contentType else { return nil }
        let media = contentType.split(separator: ";", maxSplits: 1).first?
            .trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        switch media {
        case "application/x-protobuf": self = .protobuf
        case "application/json": self = .json
        default: return nil
        }
    }

    var contentType: String {
        switch self {
        case .protobuf: "application/x-protobuf"
        case .json: "application/json"
        }
    }

    static let unsupportedMessage = "OTLP/HTTP takes Content-Type application/x-protobuf or application/json"
}

/// A request the decoder refuses whole: the answer is `status` with `OTLPDecoder.errorBody`.
enum OTLPError: Error, Equatable, Sendable {
    /// The body is not an Export…ServiceRequest in the encoding its Content-Type names.
    case malformedBody(String)

    var status: Int {
        switch self {
        case .malformedBody: 400
        }
    }

    var message: String {
        switch self {
        case .malformedBody(let message): message
        }
    }
}

/// One log record, span or metric data point.
struct OTLPRecord: Sendable {
    /// The de-duplication key: `span:` + trace id + span id in hex, or `log:`/`metric:` + a 128-bit hash in hex.
    let dedupKey: String
    /// What a scenario's `match.log_name` compares (SPEC V4b).
    let logName: String
    /// The event time for the delivery delay, nil when the record carries none.
    let timeUnixNano: UInt64?
    private let render: @Sendable () -> String

    /// The record as received, as one OTLP/JSON object (`{"resource":…,"scope":…,"logRecord"|"span"|"metric":…}`,
    /// a metric holding just this data point) for `/_mock/logs`. Rendered on each call, so that duplicates cost
    /// nothing: read it once per unique record.
    var json: String { render() }

    init(dedupKey: String, logName: String, timeUnixNano: UInt64?, render: @escaping @Sendable () -> String) {
        self.dedupKey = dedupKey
        self.logName = logName
        self.timeUnixNano = timeUnixNano
        self.render = render
    }
}

/// What one request holds: its accepted records in order, and the refused ones by their position among all the
/// request's records (accepted and refused, in order) with the reason.
struct OTLPDecoded: Sendable {
    let signal: OTLPSignal
    let records: [OTLPRecord]
    let refused: [(index: Int, reason: String)]

    /// What `partial_success` reports: nil when nothing was refused.
    var partialSuccess: (rejected: Int, message: String)? {
        guard !refused.isEmpty else { return nil }
        let shown = refused.prefix(3).map(\.reason).joined(separator: "; ")
        let more = refused.count > 3 ? "; and \(refused.count - 3) more" : ""
        return (refused.count, "\(refused.count) \(signal.recordNoun) refused: \(shown)\(more)")
    }
}

enum OTLPDecoder {
    typealias LogsRequest = Opentelemetry_Proto_Collector_Logs_V1_ExportLogsServiceRequest
    typealias TracesRequest = Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceRequest
    typealias MetricsRequest = Opentelemetry_Proto_Collector_Metrics_V1_ExportMetricsServiceRequest

    /// Decodes one request body (already gunzipped) into its records.
    static func decode(signal: OTLPSignal, encoding: OTLPEncoding, body: [UInt8]) throws(OTLPError) -> OTLPDecoded {
        switch signal {
        case .logs:
            let request = try parse(body, encoding, as: LogsRequest.self)
            return try logs(request, layout: encoding == .protobuf ? OTLPWire.logsLayout(body) : nil)
        case .traces: return try traces(parse(body, encoding, as: TracesRequest.self))
        case .metrics: return try metrics(parse(body, encoding, as: MetricsRequest.self))
        }
    }

    /// The 200's body: an empty Export…ServiceResponse (zero bytes in protobuf, `{}` in JSON), or one whose
    /// `partial_success` counts the refused records (`rejected_log_records`, `rejected_spans` or
    /// `rejected_data_points`) and says why.
    static func successBody(signal: OTLPSignal, encoding: OTLPEncoding,
                            partial: (rejected: Int, message: String)?) -> (contentType: String, body: [UInt8]) {
        let rejected = Int64(partial?.rejected ?? 0), message = partial?.message ?? ""
        switch signal {
        case .logs:
            var response = Opentelemetry_Proto_Collector_Logs_V1_ExportLogsServiceResponse()
            if partial != nil {
                response.partialSuccess.rejectedLogRecords = rejected
                response.partialSuccess.errorMessage = message
            }
            return (encoding.contentType, encode(response, encoding))
        case .traces:
            var response = Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceResponse()
            if partial != nil {
                response.partialSuccess.rejectedSpans = rejected
                response.partialSuccess.errorMessage = message
            }
            return (encoding.contentType, encode(response, encoding))
        case .metrics:
            var response = Opentelemetry_Proto_Collector_Metrics_V1_ExportMetricsServiceResponse()
            if partial != nil {
                response.partialSuccess.rejectedDataPoints = rejected
                response.partialSuccess.errorMessage = message
            }
            return (encoding.contentType, encode(response, encoding))
        }
    }

    /// The body of any 4xx or 5xx: a google.rpc.Status in the request's encoding (OTLP/HTTP, "Failures").
    /// `code` is the google.rpc.Code that google/rpc/code.proto maps to the HTTP status; OTLP clients read only
    /// `message`, which they log.
    static func errorBody(encoding: OTLPEncoding, status: Int, message: String) -> (contentType: String, body: [UInt8]) {
        var body = Google_Rpc_Status()
        body.code = grpcCode(httpStatus: status)
        body.message = message
        return (encoding.contentType, encode(body, encoding))
    }

    static func grpcCode(httpStatus: Int) -> Int32 {
        switch httpStatus {
        case 400: 3        // INVALID_ARGUMENT
        case 401: 16       // UNAUTHENTICATED
        case 403: 7        // PERMISSION_DENIED
        case 404: 5        // NOT_FOUND
        case 409: 10       // ABORTED
        case 413, 429: 8   // RESOURCE_EXHAUSTED
        case 415: 3        // INVALID_ARGUMENT
        case 499: 1        // CANCELLED
        case 500: 13       // INTERNAL
        case 501: 12       // UNIMPLEMENTED
        case 502, 503: 14  // UNAVAILABLE
        case 504: 4        // DEADLINE_EXCEEDED
        default: 2         // UNKNOWN
        }
    }

    // MARK: - Parsing

    private static func parse<M: SwiftProtobuf.Message>(_ body: [UInt8], _ encoding: OTLPEncoding,
                                                       as type: M.Type) throws(OTLPError) -> M {
        do {
            switch encoding {
            case .protobuf:
                var options = BinaryDecodingOptions()
                options.discardUnknownFields = true
                return try M(serializedBytes: body, options: options)
            case .json:
                let rewritten = try OTLPHexIDs.hexToBase64(body)
                var options = JSONDecodingOptions()
                options.ignoreUnknownFields = true  // OTLP/JSON: receivers MUST ignore unknown fields
                return try M(jsonUTF8Bytes: rewritten, options: options)
            }
        } catch let error as OTLPError {
            throw error
        } catch {
            let form = encoding == .protobuf ? "protobuf" : "OTLP/JSON"
            throw .malformedBody("the body is not a \(M.protoMessageName) in \(form): \(error)")
        }
    }

    private static func bytes(_ message: some SwiftProtobuf.Message) throws(OTLPError) -> [UInt8] {
        do {
            return try message.serializedBytes()
        } catch {
            throw .malformedBody("\(type(of: message).protoMessageName) cannot be re-encoded: \(error)")
        }
    }

    /// The bytes as received when the wire walk found them, else the message re-encoded.
    private static func part(_ received: ArraySlice<UInt8>?,
                             _ message: some SwiftProtobuf.Message) throws(OTLPError) -> ArraySlice<UInt8> {
        if let received { return received }
        return try bytes(message)[...]
    }

    private static func encode(_ message: some SwiftProtobuf.Message, _ encoding: OTLPEncoding) -> [UInt8] {
        // Neither can fail for these messages (proto3, no Any, no well-known types with ranges): the fallbacks
        // are the empty message in each encoding.
        switch encoding {
        case .protobuf: return (try? message.serializedBytes()) ?? []
        case .json: return (try? message.jsonUTF8Bytes()) ?? Array("{}".utf8)
        }
    }

    // MARK: - Logs

    /// `layout` locates each record's bytes as received (protobuf); without it, or when it disagrees with what
    /// swift-protobuf decoded, the hash covers the records re-encoded (JSON).
    private static func logs(_ request: LogsRequest, layout: OTLPWire.LogsLayout?) throws(OTLPError) -> OTLPDecoded {
        var records = [OTLPRecord](), refused = [(index: Int, reason: String)](), index = 0
        let raw = layout.flatMap { layout in
            layout.records.map { $0.map(\.count) } == request.resourceLogs.map { $0.scopeLogs.map(\.logRecords.count) }
                ? layout : nil
        }
        for (r, resourceLogs) in request.resourceLogs.enumerated() {
            let resource = resourceLogs.resource
            let resourceBytes = try part(raw?.resources[r], resource)
            for (s, scopeLogs) in resourceLogs.scopeLogs.enumerated() {
                let scope = scopeLogs.scope
                var group = OTLPRecordHash(domain: "otlp.logs")
                group.add(resourceBytes)
                group.add(try part(raw?.scopes[r][s], scope))
                let groupJSON = OTLPGroupJSON(resource: resource, scope: scope)
                for (k, record) in scopeLogs.logRecords.enumerated() {
                    defer { index += 1 }
                    if let problem = IDRule.optionalTrace.problem(record.traceID, "traceId")
                        ?? IDRule.optionalSpan.problem(record.spanID, "spanId") {
                        refused.append((index, "resourceLogs[\(r)].scopeLogs[\(s)].logRecords[\(k)]: \(problem)"))
                        continue
                    }
                    // SPEC D3: a record that names itself by `log.record.uid` is that record whatever its bytes
                    // (a resend carries a newly corrected time); the hash of its bytes otherwise (V3).
                    let dedupKey: String
                    if let uid = Self.recordUID(record) {
                        dedupKey = "log.uid:" + uid
                    } else {
                        var hash = group
                        hash.add(try part(raw?.records[r][s][k], record))
                        dedupKey = "log:" + hash.hex
                    }
                    let name: String
                    if case .stringValue(let body) = record.body.value { name = body } else { name = record.eventName }
                    let time = record.timeUnixNano != 0 ? record.timeUnixNano : record.observedTimeUnixNano
                    records.append(OTLPRecord(dedupKey: dedupKey, logName: name,
                                              timeUnixNano: time == 0 ? nil : time) {
                        groupJSON.render("logRecord", record)
                    })
                }
            }
        }
        return OTLPDecoded(signal: .logs, records: records, refused: refused)
    }

    /// A log record's `log.record.uid` attribute (OpenTelemetry's semantic conventions: a unique id of the record),
    /// when it is a non-empty string.
    private static func recordUID(_ record: Opentelemetry_Proto_Logs_V1_LogRecord) -> String? {
        for attribute in record.attributes where attribute.key == "log.record.uid" {
            if case .stringValue(let uid)? = attribute.value.value, !uid.isEmpty { return uid }
        }
        return nil
    }

    // MARK: - Traces

    private static func traces(_ request: TracesRequest) throws(OTLPError) -> OTLPDecoded {
        var records = [OTLPRecord](), refused = [(index: Int, reason: String)](), index = 0
        for (r, resourceSpans) in request.resourceSpans.enumerated() {
            let resource = resourceSpans.resource
            for (s, scopeSpans) in resourceSpans.scopeSpans.enumerated() {
                let groupJSON = OTLPGroupJSON(resource: resource, scope: scopeSpans.scope)
                for (k, span) in scopeSpans.spans.enumerated() {
                    defer { index += 1 }
                    if let problem = spanProblem(span) {
                        refused.append((index, "resourceSpans[\(r)].scopeSpans[\(s)].spans[\(k)]: \(problem)"))
                        continue
                    }
                    let time = span.endTimeUnixNano != 0 ? span.endTimeUnixNano : span.startTimeUnixNano
                    records.append(OTLPRecord(dedupKey: "span:" + OTLPHexIDs.hex(span.traceID)
                                                  + OTLPHexIDs.hex(span.spanID),
                                              logName: span.name, timeUnixNano: time == 0 ? nil : time) {
                        groupJSON.render("span", span)
                    })
                }
            }
        }
        return OTLPDecoded(signal: .traces, records: records, refused: refused)
    }

    private static func spanProblem(_ span: Opentelemetry_Proto_Trace_V1_Span) -> String? {
        if let problem = IDRule.requiredTrace.problem(span.traceID, "traceId")
            ?? IDRule.requiredSpan.problem(span.spanID, "spanId")
            ?? IDRule.optionalSpan.problem(span.parentSpanID, "parentSpanId") {
            return problem
        }
        for (l, link) in span.links.enumerated() {
            if let problem = IDRule.requiredTrace.problem(link.traceID, "traceId")
                ?? IDRule.requiredSpan.problem(link.spanID, "spanId") {
                return "links[\(l)]: \(problem)"
            }
        }
        return nil
    }

    // MARK: - Metrics

    private static func metrics(_ request: MetricsRequest) throws(OTLPError) -> OTLPDecoded {
        typealias Metric = Opentelemetry_Proto_Metrics_V1_Metric
        var records = [OTLPRecord](), refused = [(index: Int, reason: String)](), index = 0
        for (r, resourceMetrics) in request.resourceMetrics.enumerated() {
            let resource = resourceMetrics.resource, resourceBytes = try bytes(resource)
            for (s, scopeMetrics) in resourceMetrics.scopeMetrics.enumerated() {
                let scope = scopeMetrics.scope
                var group = OTLPRecordHash(domain: "otlp.metrics")
                group.add(resourceBytes)
                group.add(try bytes(scope))
                let groupJSON = OTLPGroupJSON(resource: resource, scope: scope)
                for (m, metric) in scopeMetrics.metrics.enumerated() {
                    // The metric without its points: name, unit, kind, temporality are part of each point's identity.
                    var shell = metric
                    switch shell.data {
                    case .gauge: shell.gauge.dataPoints = []
                    case .sum: shell.sum.dataPoints = []
                    case .histogram: shell.histogram.dataPoints = []
                    case .exponentialHistogram: shell.exponentialHistogram.dataPoints = []
                    case .summary: shell.summary.dataPoints = []
                    case nil: break
                    }
                    var metricHash = group
                    metricHash.add(try bytes(shell))
                    let place = "resourceMetrics[\(r)].scopeMetrics[\(s)].metrics[\(m)]"

                    // One closure per kind of point: append the record, or its refusal.
                    func point(_ p: some SwiftProtobuf.Message, _ k: Int, time: UInt64,
                               exemplars: [Opentelemetry_Proto_Metrics_V1_Exemplar],
                               single: @escaping @Sendable () -> Metric) throws(OTLPError) {
                        defer { index += 1 }
                        for (e, exemplar) in exemplars.enumerated() {
                            if let problem = IDRule.optionalTrace.problem(exemplar.traceID, "traceId")
                                ?? IDRule.optionalSpan.problem(exemplar.spanID, "spanId") {
                                refused.append((index, "\(place).dataPoints[\(k)].exemplars[\(e)]: \(problem)"))
                                return
                            }
                        }
                        var hash = metricHash
                        hash.add(try bytes(p))
                        records.append(OTLPRecord(dedupKey: "metric:" + hash.hex, logName: metric.name,
                                                  timeUnixNano: time == 0 ? nil : time) {
                            groupJSON.render("metric", single())
                        })
                    }
                    switch metric.data {
                    case .gauge(let g):
                        for (k, p) in g.dataPoints.enumerated() {
                            try point(p, k, time: p.timeUnixNano, exemplars: p.exemplars) {
                                var one = metric; one.gauge.dataPoints = [p]; return one
                            }
                        }
                    case .sum(let sum):
                        for (k, p) in sum.dataPoints.enumerated() {
                            try point(p, k, time: p.timeUnixNano, exemplars: p.exemplars) {
                                var one = metric; one.sum.dataPoints = [p]; return one
                            }
                        }
                    case .histogram(let h):
                        for (k, p) in h.dataPoints.enumerated() {
                            try point(p, k, time: p.timeUnixNano, exemplars: p.exemplars) {
                                var one = metric; one.histogram.dataPoints = [p]; return one
                            }
                        }
                    case .exponentialHistogram(let h):
                        for (k, p) in h.dataPoints.enumerated() {
                            try point(p, k, time: p.timeUnixNano, exemplars: p.exemplars) {
                                var one = metric; one.exponentialHistogram.dataPoints = [p]; return one
                            }
                        }
                    case .summary(let summary):
                        for (k, p) in summary.dataPoints.enumerated() {
                            try point(p, k, time: p.timeUnixNano, exemplars: []) {
                                var one = metric; one.summary.dataPoints = [p]; return one
                            }
                        }
                    case nil:
                        break  // a metric with no data holds no point to count
                    }
                }
            }
        }
        return OTLPDecoded(signal: .metrics, records: records, refused: refused)
    }

    // MARK: - Ids and JSON

    /// The OTLP data model's id rules: 16-byte trace ids and 8-byte span ids, all-zero ones invalid; optional ones
    /// may be empty, meaning absent.
    private enum IDRule {
        case requiredTrace, requiredSpan, optionalTrace, optionalSpan

        func problem(_ id: Data, _ name: String) -> String? {
            let size: Int, required: Bool
            switch self {
            case .requiredTrace: (size, required) = (16, true)
            case .requiredSpan: (size, required) = (8, true)
            case .optionalTrace: (size, required) = (16, false)
            case .optionalSpan: (size, required) = (8, false)
            }
            if id.isEmpty { return required ? "\(name) is missing" : nil }
            if id.count != size { return "\(name) must be \(size) bytes, got \(id.count)" }
            if id.allSatisfy({ $0 == 0 }) { return "\(name) is all zeros, which OTLP defines as invalid" }
            return nil
        }
    }

    static let jsonOptions: JSONEncodingOptions = {
        var options = JSONEncodingOptions()
        options.alwaysPrintEnumsAsInts = true  // OTLP/JSON: enums as integers
        return options
    }()
}

/// The JSON of one resource and scope, rendered once for all the records of theirs that are read: it costs as much
/// as a record's own, and `/_mock/logs` repeats it on each line.
final class OTLPGroupJSON: Sendable {
    private let resource: Opentelemetry_Proto_Resource_V1_Resource
    private let scope: Opentelemetry_Proto_Common_V1_InstrumentationScope
    private let prefix = Mutex<String?>(nil)

    init(resource: Opentelemetry_Proto_Resource_V1_Resource, scope: Opentelemetry_Proto_Common_V1_InstrumentationScope) {
        self.resource = resource
        self.scope = scope
    }

    /// `{"resource":…,"scope":…,"KEY":…}`, ids in hex.
    func render(_ key: String, _ message: some SwiftProtobuf.Message) -> String {
        let prefix = self.prefix.withLock { cached in
            if let cached { return cached }
            let made = "{\"resource\":" + Self.json(resource) + ",\"scope\":" + Self.json(scope)
            cached = made
            return made
        }
        return prefix + ",\"\(key)\":" + OTLPHexIDs.base64ToHex(Self.json(message)) + "}"
    }

    private static func json(_ message: some SwiftProtobuf.Message) -> String {
        (try? message.jsonString(options: OTLPDecoder.jsonOptions)) ?? "null"
    }
}
