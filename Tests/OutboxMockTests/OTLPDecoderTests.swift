import Foundation
import OutboxTestSupport
import SwiftProtobuf
import Testing
@testable import OutboxMock
import OTLPProto

/// One request of Fixtures/vendors/otlp: NAME.request.json (method, path, headers as sent) and NAME.body.
private struct OTLPFixture {
    let path: String
    let headers: [(String, String)]
    let body: [UInt8]

    static func load(_ name: String) throws -> OTLPFixture {
        let dir = fixturesPath("vendors/otlp")
        let meta = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(name).request.json"))) as? [String: Any])
        let pairs = try #require(meta["headers"] as? [[String]])
        let body = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(name).body")))
        return OTLPFixture(path: try #require(meta["path"] as? String),
                           headers: pairs.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }, body: body)
    }

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    /// Decoded as the mock will: signal from the path, encoding from Content-Type, gunzipped per Content-Encoding.
    func decode() throws -> OTLPDecoded {
        let signal = try #require(OTLPSignal(path: path))
        let encoding = try #require(OTLPEncoding(contentType: header("Content-Type")))
        let plain = header("Content-Encoding") == "gzip" ? try TestGzip.decompress(body) : body
        return try OTLPDecoder.decode(signal: signal, encoding: encoding, body: plain)
    }
}

private typealias LogsRequest = Opentelemetry_Proto_Collector_Logs_V1_ExportLogsServiceRequest
private typealias LogRecord = Opentelemetry_Proto_Logs_V1_LogRecord

private func jsonObject(_ text: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
}

/// A logs request with one resource and scope holding `records`, as protobuf bytes.
private func logsBody(service: String = "shop", scope: String = "analytics", _ records: [LogRecord]) throws -> [UInt8] {
    var request = LogsRequest()
    var resourceLogs = Opentelemetry_Proto_Logs_V1_ResourceLogs()
    var attribute = Opentelemetry_Proto_Common_V1_KeyValue()
    attribute.key = "service.name"
    attribute.value.stringValue = service
    resourceLogs.resource.attributes = [attribute]
    var scopeLogs = Opentelemetry_Proto_Logs_V1_ScopeLogs()
    scopeLogs.scope.name = scope
    scopeLogs.logRecords = records
    resourceLogs.scopeLogs = [scopeLogs]
    request.resourceLogs = [resourceLogs]
    return try request.serializedBytes()
}

private func logRecord(_ body: String, time: UInt64 = 1_700_000_000_000_000_000) -> LogRecord {
    var record = LogRecord()
    record.timeUnixNano = time
    record.body.stringValue = body
    record.severityNumber = .info
    return record
}

@Suite("OTLP/HTTP decoder (SPEC V1–V5)")
struct OTLPDecoderTests {
    // MARK: - Captured fixtures of the official Python exporter (SPEC V5)

    // SPEC V5, V4b: the Python exporter's 50-record batch gives 50 distinct records, named by their body, timed by
    // timeUnixNano where the caller set it and by observedTimeUnixNano where not.
    @Test func pythonLogBatchDecodes() throws {
        let fixture = try OTLPFixture.load("python-logs-50")
        #expect(fixture.header("User-Agent") == "OTel-OTLP-Exporter-Python/1.45.2")
        let decoded = try fixture.decode()
        #expect(decoded.records.count == 50)
        #expect(decoded.refused.isEmpty)
        #expect(Set(decoded.records.map(\.dedupKey)).count == 50)
        #expect(decoded.records.allSatisfy { $0.dedupKey.hasPrefix("log:") && $0.dedupKey.count == 4 + 32 })
        #expect(decoded.records[0].logName == "Order Completed")
        #expect(decoded.records[1].logName == "Product Viewed 1")
        #expect(decoded.records[10].timeUnixNano == 1_795_332_336_000_000_010)
        let observed = try #require(decoded.records[1].timeUnixNano)
        #expect(observed > 1_795_332_336_000_000_010)  // the SDK's observed time, later than the set ones
        let first = try jsonObject(decoded.records[0].json)
        let record = try #require(first["logRecord"] as? [String: Any])
        #expect(record["severityNumber"] as? Int == 9)  // OTLP/JSON: enums as integers
        #expect((first["scope"] as? [String: Any])?["name"] as? String == "analytics")
        #expect(first["resource"] is [String: Any])
    }

    // SPEC V3: keys are stable across re-decoding, so a retried request is recognised record by record.
    @Test func keysAreStableAcrossDecodes() throws {
        let fixture = try OTLPFixture.load("python-logs-50")
        #expect(try fixture.decode().records.map(\.dedupKey) == fixture.decode().records.map(\.dedupKey))
        let spans = try OTLPFixture.load("python-traces")
        #expect(try spans.decode().records.map(\.dedupKey) == spans.decode().records.map(\.dedupKey))
        let metrics = try OTLPFixture.load("python-metrics")
        #expect(try metrics.decode().records.map(\.dedupKey) == metrics.decode().records.map(\.dedupKey))
    }

    // SPEC V1: gzip as the exporter's compression= sends it.
    @Test func pythonGzipBatchDecodes() throws {
        let fixture = try OTLPFixture.load("python-logs-gzip")
        #expect(fixture.header("Content-Encoding") == "gzip")
        let decoded = try fixture.decode()
        #expect(decoded.records.map(\.logName) == ["Signed Up 0", "Signed Up 1", "Signed Up 2"])
    }

    // SPEC V4b: spans are keyed by (traceId, spanId) and named by their name; the log records emitted inside the
    // "checkout" span carry its trace id, in hex, in their JSON.
    @Test func pythonTracesDecode() throws {
        let decoded = try OTLPFixture.load("python-traces").decode()
        #expect(decoded.records.map(\.logName) == ["db.query", "pay", "email", "checkout"])
        #expect(decoded.records.allSatisfy { $0.dedupKey.hasPrefix("span:") && $0.dedupKey.count == 5 + 32 + 16 })
        #expect(Set(decoded.records.map(\.dedupKey)).count == 4)
        let checkout = try #require(decoded.records.last)
        let traceID = String(checkout.dedupKey.dropFirst(5).prefix(32))
        let span = try #require(try jsonObject(checkout.json)["span"] as? [String: Any])
        #expect(span["traceId"] as? String == traceID)
        #expect(span["spanId"] as? String == String(checkout.dedupKey.suffix(16)))
        #expect(checkout.timeUnixNano != nil)
        let log = try #require(try OTLPFixture.load("python-logs-50").decode().records.first)
        #expect((try jsonObject(log.json)["logRecord"] as? [String: Any])?["traceId"] as? String == traceID)
    }

    // SPEC V4b: one record per metric data point, named by its metric.
    @Test func pythonMetricsDecode() throws {
        let decoded = try OTLPFixture.load("python-metrics").decode()
        #expect(decoded.records.map(\.logName).sorted()
                == ["checkout.duration", "cpu.temperature", "orders", "orders", "queue.depth"])
        #expect(Set(decoded.records.map(\.dedupKey)).count == 5)
        #expect(decoded.records.allSatisfy { $0.timeUnixNano != nil })
        let histogram = try #require(decoded.records.first { $0.logName == "checkout.duration" })
        let metric = try #require(try jsonObject(histogram.json)["metric"] as? [String: Any])
        let points = (metric["histogram"] as? [String: Any])?["dataPoints"] as? [Any]
        #expect(points?.count == 1)  // the record's JSON holds its own point only
    }

    // MARK: - OTLP/JSON (the opentelemetry-proto repository's examples)

    // SPEC V4b: OTLP/JSON's hex ids (upper-case in the spec's example) are read as hex: 16 and 8 bytes, where
    // proto3 JSON's base64 would have made 24 and 12 and the record would be refused.
    @Test func specJSONLogsUseHexIDs() throws {
        let decoded = try OTLPFixture.load("spec-logs").decode()
        #expect(decoded.refused.isEmpty)
        let record = try #require(decoded.records.first)
        #expect(decoded.records.count == 1)
        #expect(record.logName == "Example log record")
        #expect(record.timeUnixNano == 1_544_712_660_300_000_000)
        let json = try #require(try jsonObject(record.json)["logRecord"] as? [String: Any])
        #expect(json["traceId"] as? String == "5b8efff798038103d269b633813fc60c")
        #expect(json["spanId"] as? String == "eee19b7ec3c1b174")
        #expect(json["severityNumber"] as? Int == 10)
    }

    // SPEC V4b: a JSON span's key is its hex (traceId, spanId); parentSpanId is hex too.
    @Test func specJSONTraceUsesHexIDs() throws {
        let decoded = try OTLPFixture.load("spec-trace").decode()
        #expect(decoded.refused.isEmpty)
        #expect(decoded.records.map(\.dedupKey) == ["span:5b8efff798038103d269b633813fc60ceee19b7ec3c1b174"])
        #expect(decoded.records.first?.logName == "I'm a server span")
        #expect(decoded.records.first?.timeUnixNano == 1_544_712_661_000_000_000)  // its end
        let span = try #require(try jsonObject(decoded.records[0].json)["span"] as? [String: Any])
        #expect(span["parentSpanId"] as? String == "eee19b7ec3c1b173")
        #expect(span["kind"] as? Int == 2)
    }

    @Test func specJSONMetricsDecode() throws {
        let decoded = try OTLPFixture.load("spec-metrics").decode()
        #expect(decoded.refused.isEmpty)
        #expect(decoded.records.map(\.logName)
                == ["my.counter", "my.gauge", "my.histogram", "my.exponential.histogram"])
        #expect(decoded.records.allSatisfy { $0.timeUnixNano == 1_544_712_660_300_000_000 })
    }

    // SPEC V3: the same record sent as protobuf (hashed as received) and as OTLP/JSON (hashed re-encoded) has one
    // key, for a sender that writes fields in number order as OTLP exporters do; unknown JSON fields are ignored.
    @Test func protobufAndJSONOfOneRecordShareTheKey() throws {
        var record = logRecord("Order Completed", time: 1_544_712_660_300_000_000)
        record.traceID = Data([0x5B, 0x8E, 0xFF, 0xF7, 0x98, 0x03, 0x81, 0x03, 0xD2, 0x69, 0xB6, 0x33, 0x81, 0x3F, 0xC6, 0x0C])
        record.spanID = Data([0xEE, 0xE1, 0x9B, 0x7E, 0xC3, 0xC1, 0xB1, 0x74])
        let proto = try OTLPDecoder.decode(signal: .logs, encoding: .protobuf, body: logsBody([record]))
        let json = #"""
            {"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shop"}}]},
             "scopeLogs":[{"scope":{"name":"analytics"},"logRecords":[{"timeUnixNano":"1544712660300000000",
             "severityNumber":9,"body":{"stringValue":"Order Completed"},
             "traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","futureField":{"x":1}}]}]}]}
            """#
        let fromJSON = try OTLPDecoder.decode(signal: .logs, encoding: .json, body: Array(json.utf8))
        #expect(fromJSON.records.count == 1)
        #expect(fromJSON.records.map(\.dedupKey) == proto.records.map(\.dedupKey))
    }

    // MARK: - De-duplication (SPEC V3, V4b)

    // SPEC V3: the wire walk finds each record's bytes as received, the very bytes swift-protobuf decodes, so the
    // hash covers the record itself; a truncated body has no layout (and the decoder answers 400 before).
    @Test func wireLayoutFindsEachRecordsBytes() throws {
        let body = try OTLPFixture.load("python-logs-50").body
        let layout = try #require(OTLPWire.logsLayout(body))
        let slices = try #require(layout.records.first?.first)
        #expect(layout.records.map { $0.map(\.count) } == [[50]])
        let request = try LogsRequest(serializedBytes: body)
        let decoded = request.resourceLogs[0].scopeLogs[0].logRecords
        for (slice, record) in zip(slices, decoded) {
            #expect(try LogRecord(serializedBytes: Array(slice)) == record)
        }
        #expect(try Opentelemetry_Proto_Common_V1_InstrumentationScope(serializedBytes: Array(layout.scopes[0][0]))
                == request.resourceLogs[0].scopeLogs[0].scope)
        #expect(OTLPWire.logsLayout(try OTLPFixture.load("malformed-truncated").body) == nil)
    }

    // SPEC V3: a record repeated, in the same request or a retried one, has the same key: the mock counts it once.
    @Test func repeatedRecordsShareTheirKey() throws {
        let record = logRecord("Signed Up")
        let once = try OTLPDecoder.decode(signal: .logs, encoding: .protobuf, body: logsBody([record]))
        let twice = try OTLPDecoder.decode(signal: .logs, encoding: .protobuf, body: logsBody([record, record]))
        #expect(twice.records.count == 2)
        #expect(Set(twice.records.map(\.dedupKey)) == Set(once.records.map(\.dedupKey)))
        let retried = try OTLPFixture.load("python-traces")
        let keys = try retried.decode().records.map(\.dedupKey) + retried.decode().records.map(\.dedupKey)
        #expect(Set(keys).count == keys.count / 2)
    }

    // SPEC V4b: the log record hash covers resource and scope, and each field of the record.
    @Test func logKeyCoversResourceScopeAndFields() throws {
        func key(_ body: [UInt8]) throws -> String {
            try #require(try OTLPDecoder.decode(signal: .logs, encoding: .protobuf, body: body).records.first).dedupKey
        }
        let base = try key(logsBody([logRecord("Signed Up")]))
        #expect(try key(logsBody(service: "other", [logRecord("Signed Up")])) != base)
        #expect(try key(logsBody(scope: "other", [logRecord("Signed Up")])) != base)
        #expect(try key(logsBody([logRecord("Signed Up", time: 1)])) != base)
        var withAttribute = logRecord("Signed Up")
        withAttribute.attributes = [{ var kv = Opentelemetry_Proto_Common_V1_KeyValue(); kv.key = "plan"; kv.value.stringValue = "pro"; return kv }()]
        #expect(try key(logsBody([withAttribute])) != base)
        var withSpan = logRecord("Signed Up")
        withSpan.spanID = Data([1, 2, 3, 4, 5, 6, 7, 8])
        #expect(try key(logsBody([withSpan])) != base)
    }

    // SPEC D3: a record carrying `log.record.uid` is keyed by it alone: a resend with another time (A9 corrected
    // anew) is the same record; two uids are two records; an empty uid falls back to the hash.
    @Test func logRecordUIDIsTheKeyWhenPresent() throws {
        func record(_ uid: String, time: UInt64) -> LogRecord {
            var record = logRecord("Signed Up", time: time)
            var kv = Opentelemetry_Proto_Common_V1_KeyValue()
            kv.key = "log.record.uid"
            kv.value.stringValue = uid
            record.attributes = [kv]
            return record
        }
        func keys(_ records: [LogRecord]) throws -> [String] {
            try OTLPDecoder.decode(signal: .logs, encoding: .protobuf, body: logsBody(records)).records.map(\.dedupKey)
        }
        let uid = "0193a5b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b"
        let first = try keys([record(uid, time: 1_700_000_000_000_000_000)])
        let resent = try keys([record(uid, time: 1_700_000_003_000_000_000)])
        #expect(first == ["log.uid:" + uid])
        #expect(resent == first)
        #expect(try keys([record("0193a5b2-7c4d-7e8f-9a0b-000000000001", time: 1)]) != first)
        let empty = try keys([record("", time: 1)])
        #expect(empty.allSatisfy { $0.hasPrefix("log:") })
    }

    // MARK: - Validation and partial_success (SPEC V3)

    // SPEC V3: spans whose ids break OTLP's rules are refused alone, in partial_success inside the 200.
    @Test func badSpanIDsAreRefusedInPartialSuccess() throws {
        let good = #"{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"ok"}"#
        let short = #"{"traceId":"5b8efff798038103d269b633813fc6","spanId":"eee19b7ec3c1b174","name":"short"}"#
        let zero = #"{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000000","name":"zero"}"#
        let missing = #"{"traceId":"5b8efff798038103d269b633813fc60c","name":"missing"}"#
        let body = #"{"resourceSpans":[{"scopeSpans":[{"spans":["# + [good, short, zero, missing].joined(separator: ",") + "]}]}]}"
        let decoded = try OTLPDecoder.decode(signal: .traces, encoding: .json, body: Array(body.utf8))
        #expect(decoded.records.map(\.logName) == ["ok"])
        #expect(decoded.refused.map(\.index) == [1, 2, 3])
        #expect(decoded.refused[0].reason.contains("traceId must be 16 bytes, got 15"))
        #expect(decoded.refused[1].reason.contains("spanId is all zeros"))
        #expect(decoded.refused[2].reason.contains("spanId is missing"))
        let partial = try #require(decoded.partialSuccess)
        #expect(partial.rejected == 3)

        let proto = OTLPDecoder.successBody(signal: .traces, encoding: .protobuf, partial: partial)
        #expect(proto.contentType == "application/x-protobuf")
        let response = try Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceResponse(serializedBytes: proto.body)
        #expect(response.partialSuccess.rejectedSpans == 3)
        #expect(response.partialSuccess.errorMessage.hasPrefix("3 spans refused: resourceSpans[0].scopeSpans[0].spans[1]"))

        let json = OTLPDecoder.successBody(signal: .traces, encoding: .json, partial: partial)
        #expect(json.contentType == "application/json")
        let object = try jsonObject(String(decoding: json.body, as: UTF8.self))
        #expect((object["partialSuccess"] as? [String: Any])?["rejectedSpans"] as? String == "3")
    }

    // SPEC V3: on log records the ids are optional, but when present they have OTLP's lengths.
    @Test func logRecordIDsAreOptionalButSized() throws {
        var bad = logRecord("bad")
        bad.spanID = Data([1, 2, 3])
        let decoded = try OTLPDecoder.decode(signal: .logs, encoding: .protobuf,
                                             body: logsBody([logRecord("no ids"), bad]))
        #expect(decoded.records.map(\.logName) == ["no ids"])
        #expect(decoded.refused.map(\.index) == [1])
        #expect(decoded.refused.first?.reason.contains("spanId must be 8 bytes, got 3") == true)
        #expect(decoded.partialSuccess?.message.hasPrefix("1 log records refused") == true)
    }

    // SPEC V2: an accepted request is answered with an empty Export…ServiceResponse: no bytes, or {}.
    @Test func successBodiesAreEmptyResponses() throws {
        for signal in OTLPSignal.allCases {
            let proto = OTLPDecoder.successBody(signal: signal, encoding: .protobuf, partial: nil)
            #expect(proto.body.isEmpty)
            #expect(proto.contentType == "application/x-protobuf")
            #expect(OTLPDecoder.successBody(signal: signal, encoding: .json, partial: nil).body == Array("{}".utf8))
        }
        let empty = try OTLPDecoder.decode(signal: .metrics, encoding: .protobuf, body: [])
        #expect(empty.records.isEmpty && empty.refused.isEmpty && empty.partialSuccess == nil)
    }

    // MARK: - Refused requests (SPEC V2, V3)

    // SPEC V3: a body that does not parse is a 400 whose body is a google.rpc.Status in the request's encoding.
    @Test func malformedFixtureIsA400WithStatus() throws {
        let fixture = try OTLPFixture.load("malformed-truncated")
        let error = try #require(throws: OTLPError.self) { try fixture.decode() }
        #expect(error.status == 400)
        #expect(error.message.contains("ExportLogsServiceRequest"))
        let proto = OTLPDecoder.errorBody(encoding: .protobuf, status: error.status, message: error.message)
        let status = try Google_Rpc_Status(serializedBytes: proto.body)
        #expect(status.code == 3)  // INVALID_ARGUMENT
        #expect(status.message == error.message)
        let json = OTLPDecoder.errorBody(encoding: .json, status: 503, message: "down")
        let object = try jsonObject(String(decoding: json.body, as: UTF8.self))
        #expect(object["code"] as? Int == 14)  // UNAVAILABLE
        #expect(object["message"] as? String == "down")
    }

    // SPEC V3: OTLP/JSON ids that are not hex make the body unreadable (400), as in the collector.
    @Test func nonHexJSONIDIsA400() throws {
        let body = #"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"}]}]}]}"#
        let error = try #require(throws: OTLPError.self) {
            try OTLPDecoder.decode(signal: .traces, encoding: .json, body: Array(body.utf8))
        }
        #expect(error.message.contains("traceId \"zz8e"))
        #expect(throws: OTLPError.self) {
            try OTLPDecoder.decode(signal: .logs, encoding: .json, body: Array(#"{"resourceLogs":[{"#.utf8))
        }
        #expect(throws: OTLPError.self) {
            try OTLPDecoder.decode(signal: .logs, encoding: .json, body: Array("[1]".utf8))
        }
    }

    // SPEC V1: the paths and media types of OTLP/HTTP.
    @Test func pathsAndContentTypes() {
        #expect(OTLPSignal(path: "/v1/logs") == .logs)
        #expect(OTLPSignal(path: "/v1/traces?x=1") == .traces)
        #expect(OTLPSignal(path: "/v1/metrics") == .metrics)
        #expect(OTLPSignal(path: "/v1/log") == nil)
        #expect(OTLPEncoding(contentType: "application/x-protobuf") == .protobuf)
        #expect(OTLPEncoding(contentType: "Application/JSON; charset=utf-8") == .json)
        #expect(OTLPEncoding(contentType: "text/plain") == nil)
        #expect(OTLPEncoding(contentType: nil) == nil)
    }

    // The hex and base64 helpers against known values (RFC 4648 test vectors).
    @Test func hexAndBase64() throws {
        #expect(OTLPHexIDs.base64Encode(Array("foobar".utf8)) == Array("Zm9vYmFy".utf8))
        #expect(OTLPHexIDs.base64Encode(Array("fo".utf8)) == Array("Zm8=".utf8))
        #expect(OTLPHexIDs.base64Decode(ArraySlice("Zm9vYg==".utf8)) == Array("foob".utf8))
        #expect(OTLPHexIDs.base64Decode(ArraySlice("Zm9v!g==".utf8)) == nil)
        #expect(OTLPHexIDs.hexDecode(ArraySlice("0aFf".utf8)) == [0x0A, 0xFF])
        #expect(OTLPHexIDs.hexDecode(ArraySlice("0aF".utf8)) == nil)
        #expect(OTLPHexIDs.hex([0x0A, 0xFF]) == "0aff")
        // Keys inside string values and escaped quotes are not mistaken for id keys.
        let text = #"{"key":"traceId","value":{"stringValue":"a\"traceId\":\"zz"},"spanId":"0102"}"#
        #expect(try String(decoding: OTLPHexIDs.hexToBase64(Array(text.utf8)), as: UTF8.self)
                == #"{"key":"traceId","value":{"stringValue":"a\"traceId\":\"zz"},"spanId":"AQI="}"#)
    }

    // Speed of the decoder on the captured 50-record batch (BENCHMARKS.md): OTLP_BENCH=1 to run it.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["OTLP_BENCH"] != nil))
    func decodeSpeed() throws {
        let fixture = try OTLPFixture.load("python-logs-50")
        let rounds = 400
        var keys = 0
        let clock = ContinuousClock()
        let elapsed = try clock.measure {
            for _ in 0..<rounds { keys += try fixture.decode().records.count }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("OTLP decode: \(String(format: "%.2f", seconds / Double(keys) * 1e6)) µs per record "
              + "(\(rounds) × 50-record protobuf batch)")
        let json = try fixture.decode().records
        let renderTime = clock.measure { for record in json { keys += record.json.count } }
        let renderSeconds = Double(renderTime.components.attoseconds) / 1e18 + Double(renderTime.components.seconds)
        print("OTLP record JSON: \(String(format: "%.2f", renderSeconds / 50 * 1e6)) µs per record")
        #expect(keys > 0)
    }
}
