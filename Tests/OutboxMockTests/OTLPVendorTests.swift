import Foundation
import NIOHTTP1
import SwiftProtobuf
import Testing
@testable import OutboxMock
import OTLPProto

/// A request of Fixtures/vendors/otlp (NAME.request.json and NAME.body), sent over real HTTP.
private struct OTLPRequestFixture {
    let name: String
    let path: String
    let headers: [(String, String)]
    let body: [UInt8]

    /// Every fixture, in name order.
    static func all() throws -> [OTLPRequestFixture] {
        let dir = fixturesPath("vendors/otlp")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".request.json") }
            .map { String($0.dropLast(".request.json".count)) }.sorted()
        return try names.map { name in
            let meta = try #require(try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(name).request.json"))) as? [String: Any])
            // Host, Content-Length and Connection are the test client's own.
            let skip: Set<String> = ["host", "content-length", "connection"]
            let headers = (meta["headers"] as? [[String]] ?? []).compactMap { pair -> (String, String)? in
                guard pair.count == 2, !skip.contains(pair[0].lowercased()) else { return nil }
                return (pair[0], pair[1])
            }
            return OTLPRequestFixture(name: name, path: try #require(meta["path"] as? String), headers: headers,
                                      body: try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(name).body"))))
        }
    }

    static func named(_ name: String) throws -> OTLPRequestFixture {
        try #require(try all().first { $0.name == name })
    }

    var isJSON: Bool { headers.contains { $0.0.lowercased() == "content-type" && $0.1.hasPrefix("application/json") } }

    func send(_ port: Int) throws -> TestResponse {
        try TestConnection(port: port).request("POST", path, headers: headers, body: body)
    }
}

/// Records in each captured request, counted by the fixtures' README (not by the decoder under test).
private let recordsIn = ["python-logs-50": 50, "python-logs-gzip": 3, "python-traces": 4, "python-metrics": 5,
                         "spec-logs": 1, "spec-trace": 1, "spec-metrics": 4]

private func post(_ port: Int, _ path: String, contentType: String?, _ body: [UInt8],
                  extra: [(String, String)] = []) throws -> TestResponse {
    let headers = (contentType.map { [("Content-Type", $0)] } ?? []) + extra
    return try TestConnection(port: port).request("POST", path, headers: headers, body: body)
}

@Suite("OTLP/HTTP as the otlp vendor, over HTTP (SPEC V1–V5)")
struct OTLPVendorTests {
    // SPEC V5, V2, V3, V4: every captured request (protobuf, gzip, OTLP/JSON; logs, traces, metrics) is answered
    // 200 with an empty Export…ServiceResponse, its records counted once under `otlp`; replayed, all duplicates.
    @Test func capturedRequestsReplayWithCountsAndDeduplication() throws {
        let fixtures = try OTLPRequestFixture.all().filter { !$0.name.hasPrefix("malformed") }
        #expect(fixtures.map(\.name).sorted() == recordsIn.keys.sorted())
        try withServer { (server: MockServer) throws in
            var expected = MockStats.VendorStats.zero
            for fixture in fixtures {
                let records = try #require(recordsIn[fixture.name])
                for round in 0..<2 {
                    let response = try fixture.send(server.port)
                    #expect(response.status == 200, "\(fixture.name): \(response.text)")
                    // SPEC V2: zero bytes in protobuf, `{}` in JSON, typed as the request was.
                    #expect(response.header("Content-Type") == (fixture.isJSON ? "application/json" : "application/x-protobuf"))
                    #expect(response.body == (fixture.isJSON ? Array("{}".utf8) : []), "\(fixture.name)")
                    expected.requests += 1
                    expected.eventsReceived += records
                    if round == 0 { expected.eventsUnique += records } else { expected.eventsDuplicate += records }
                }
            }
            let stats = server.stats()
            #expect(stats.vendor(.otlp) == expected)
            #expect(expected.tuple == [14, 136, 68, 68, 0])
            #expect(stats.logsReceived == 0 && stats.requests == 14)
            for other in Vendor.allCases where other != .otlp {
                #expect(stats.vendors[other.rawValue] == .zero, "\(other)")
            }
            // SPEC V3, V4b: one stored event per unique record, named as log_name matches it.
            let events = server.vendorEvents()
            #expect(events.count == 68)
            #expect(events.allSatisfy { $0.vendor == .otlp })
            #expect(events.filter { $0.name == "Order Completed" }.count == 25)
            #expect(Set(events.compactMap(\.name)).isSuperset(of: ["checkout", "db.query", "orders", "my.gauge",
                                                                   "Example log record", "Signed Up 2"]))
            // SPEC V3, V4: /_mock/logs lines carry vendor "otlp" and the record's OTLP/JSON with its resource.
            let lines = try HTTP.get(server.port, "/_mock/logs").jsonLines
            #expect(lines.count == 68)
            #expect(lines.allSatisfy { $0["vendor"] as? String == "otlp" && $0["resource"] != nil })
            #expect(lines.filter { $0["logRecord"] != nil }.count == 54)
            #expect(lines.filter { $0["span"] != nil }.count == 5)
            #expect(lines.filter { $0["metric"] != nil }.count == 9)
            // SPEC V4: the JSON of /_mock/stats has the same counts.
            let json = try statsJSON(server.port)
            #expect((json["vendors"] as? [String: [String: Int]])?["otlp"]?["events_unique"] == 68)
        }
    }

    // SPEC V3, V5: the malformed capture (a truncated protobuf body) is a 400 whose body is a google.rpc.Status in
    // protobuf; a broken OTLP/JSON body gets one in JSON. Nothing is recorded.
    @Test func unparseableBodyIsA400WithStatusInTheRequestsEncoding() throws {
        try withServer { (server: MockServer) throws in
            let response = try OTLPRequestFixture.named("malformed-truncated").send(server.port)
            #expect(response.status == 400)
            #expect(response.header("Content-Type") == "application/x-protobuf")
            let status = try Google_Rpc_Status(serializedBytes: response.body)
            #expect(status.code == 3)  // INVALID_ARGUMENT
            #expect(status.message.contains("ExportLogsServiceRequest"))
            let json = try post(server.port, "/v1/traces", contentType: "application/json", Array(#"{"resourceSpans":["#.utf8))
            #expect(json.status == 400)
            #expect(json.header("Content-Type") == "application/json")
            let decoded = try Google_Rpc_Status(jsonUTF8Bytes: json.body)
            #expect(decoded.code == 3)
            #expect(decoded.message.contains("ExportTraceServiceRequest"))
            #expect(server.stats().vendor(.otlp).tuple == [2, 0, 0, 0, 0])
            #expect(server.vendorEvents().isEmpty)
        }
    }

    // SPEC V1: a Content-Type other than OTLP's two is 415 (the specification's answer), with a google.rpc.Status;
    // a GET is 405 with Allow.
    @Test func otherContentTypesAre415AndOtherMethods405() throws {
        let body = try OTLPRequestFixture.named("python-logs-50").body
        try withServer { (server: MockServer) throws in
            for type in ["text/plain", "application/protobuf", nil] as [String?] {
                let response = try post(server.port, "/v1/logs", contentType: type, body)
                #expect(response.status == 415, "\(type ?? "none")")
                let status = try Google_Rpc_Status(serializedBytes: response.body)
                #expect(status.message == OTLPEncoding.unsupportedMessage)
            }
            // Parameters and case are ignored.
            #expect(try post(server.port, "/v1/logs", contentType: "Application/X-Protobuf; charset=binary", body).status == 200)
            let get = try TestConnection(port: server.port).request("GET", "/v1/metrics")
            #expect(get.status == 405)
            #expect(get.header("Allow") == "POST")
            #expect(server.stats().vendor(.otlp).tuple == [5, 50, 50, 0, 0])
        }
    }

    // SPEC V3: records that break OTLP's id rules are refused alone: counted in events_refused and reported in
    // partial_success inside the 200; the good ones are recorded.
    @Test func refusedRecordsAreAnsweredInPartialSuccess() throws {
        let good = #"{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"ok"}"#
        let zero = #"{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000000","name":"zero"}"#
        let missing = #"{"traceId":"5b8efff798038103d269b633813fc60c","name":"missing"}"#
        let body = #"{"resourceSpans":[{"scopeSpans":[{"spans":["# + [good, zero, missing].joined(separator: ",") + "]}]}]}"
        try withServer { (server: MockServer) throws in
            let response = try post(server.port, "/v1/traces", contentType: "application/json", Array(body.utf8))
            #expect(response.status == 200)
            let partial = try #require(response.json["partialSuccess"] as? [String: Any])
            #expect(partial["rejectedSpans"] as? String == "2")
            #expect((partial["errorMessage"] as? String ?? "").hasPrefix("2 spans refused"))
            #expect(server.stats().vendor(.otlp).tuple == [1, 1, 1, 0, 2])
            #expect(server.vendorEvents().map(\.name) == ["ok"])
            // The same in protobuf: the answer is an ExportTraceServiceResponse.
            var request = try Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceRequest(
                jsonUTF8Bytes: Array(body.replacingOccurrences(of: "0000000000000000", with: "AAAAAAAAAAA=")
                    .replacingOccurrences(of: "5b8efff798038103d269b633813fc60c", with: "W47/95gDgQPSabYzgT/GDA==")
                    .replacingOccurrences(of: "eee19b7ec3c1b174", with: "7uGbfsPBsXQ=").utf8))
            request.resourceSpans[0].scopeSpans[0].spans[0].name = "ok again"
            let proto = try post(server.port, "/v1/traces", contentType: "application/x-protobuf",
                                 try request.serializedBytes())
            #expect(proto.status == 200)
            let answer = try Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceResponse(serializedBytes: proto.body)
            #expect(answer.partialSuccess.rejectedSpans == 2)
            // Same (traceId, spanId) as the first request's good span: a duplicate (SPEC V4b).
            #expect(server.stats().vendor(.otlp).tuple == [2, 2, 1, 1, 4])
        }
    }

    // SPEC V2, M8: a scenario's status reaches the exporter in OTLP's error shape (google.rpc.Status in the
    // request's encoding) with the rule's headers (429 + Retry-After); `match.vendor` picks otlp alone.
    @Test func scenarioErrorsInOTLPShape() throws {
        let scenario = #"{"rules":[{"match":{"vendor":"otlp","requests":"1"},"respond":{"status":429,"headers":{"Retry-After":"3"}}},"#
            + #"{"match":{"vendor":"otlp","requests":"2"},"respond":{"status":503}},"#
            + #"{"match":{"vendor":"otlp","requests":"4"},"respond":{"status":202}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let logs = try OTLPRequestFixture.named("python-logs-gzip")
            let throttled = try logs.send(server.port)
            #expect(throttled.status == 429)
            #expect(throttled.header("Retry-After") == "3")
            #expect(throttled.header("Content-Type") == "application/x-protobuf")
            #expect(try Google_Rpc_Status(serializedBytes: throttled.body).code == 8)  // RESOURCE_EXHAUSTED
            let json = try OTLPRequestFixture.named("spec-logs").send(server.port)
            #expect(json.status == 503)
            #expect(json.json["code"] as? Int == 14)  // UNAVAILABLE
            #expect(json.json["message"] as? String == "503 injected by the scenario")
            // Request 3 is Segment's: no rule names its vendor.
            let segment = try #require(try VendorFixture.all(.segment).first { $0.name == "batch-gzip" })
            #expect(try segment.send(server.port).status == 200)
            // A 2xx the scenario gives is an empty response, and records the records.
            let accepted = try logs.send(server.port)
            #expect(accepted.status == 202)
            #expect(accepted.body.isEmpty)
            #expect(server.stats().vendor(.otlp).tuple == [3, 3, 3, 0, 0])
        }
    }

    // SPEC V4b, X2: `log_name` matches a log record's string body (and a span's name): a poison record is refused.
    @Test func logNameMatchesBodiesAndSpanNames() throws {
        let scenario = #"{"rules":[{"match":{"log_name":"Signed Up 1"},"respond":{"status":400}},"#
            + #"{"match":{"log_name":"db.query"},"respond":{"status":500}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            #expect(try OTLPRequestFixture.named("python-logs-gzip").send(server.port).status == 400)
            #expect(try OTLPRequestFixture.named("python-traces").send(server.port).status == 500)
            #expect(try OTLPRequestFixture.named("python-metrics").send(server.port).status == 200)
        }
    }

    // SPEC V4b, M7: the delay uses the record's timeUnixNano (the spec example's is in 2018).
    @Test func delayComesFromTimeUnixNano() throws {
        try withServer { (server: MockServer) throws in
            #expect(try OTLPRequestFixture.named("spec-logs").send(server.port).status == 200)
            let expected = Int64(Date().timeIntervalSince1970 * 1000) - 1_544_712_660_300
            let p50 = server.stats().delayMs.p50
            #expect(abs(Int64(p50) - expected) < 60_000)
            #expect(server.stats().lateLogs == 1)
        }
    }

    // SPEC V1: a gzip body beyond the mock's decompressed limit is refused (413) in OTLP's error shape.
    @Test func gzipBombIsA413InOTLPShape() throws {
        let configuration = MockServer.Configuration(bodyLimit: 64 * 1024, decompressedLimit: 64 * 1024, threads: 2)
        try withServer(configuration) { (server: MockServer) throws in
            let bomb = TestGzip.compress([UInt8](repeating: 0, count: 1024 * 1024))
            let response = try post(server.port, "/v1/logs", contentType: "application/x-protobuf", bomb,
                                    extra: [("Content-Encoding", "gzip")])
            #expect(response.status == 413)
            #expect(try Google_Rpc_Status(serializedBytes: response.body).code == 8)
            #expect(server.stats().vendor(.otlp).tuple == [1, 0, 0, 0, 0])
        }
    }

    // SPEC V3: mutated captures through the framework's OTLP path get an answer and consistent counts, never a
    // crash (as VendorFuzzTests does for the other vendors; `OUTBOX_FUZZ_ITERATIONS`, `OUTBOX_FUZZ_SEED`).
    @Test func mutatedRequestsAreAnsweredAndCountedConsistently() throws {
        let environment = ProcessInfo.processInfo.environment
        let iterations = environment["OUTBOX_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? 2000
        let seed = environment["OUTBOX_FUZZ_SEED"].flatMap { UInt64($0) } ?? 5
        let plain = try OTLPRequestFixture.all().map { f -> (OTLPRequestFixture, [UInt8]) in
            let gzip = f.headers.contains { $0.0.lowercased() == "content-encoding" && $0.1 == "gzip" }
            return (f, gzip ? try TestGzip.decompress(f.body) : f.body)
        }
        // JSON's punctuation and hex digits, and protobuf's tags of the request's nesting (fields 1–3, wire type 2).
        let tokens = Array(#"{}[],:"\ 0-9aAfF.traceIdspanId"#.utf8) + [0x00, 0x0A, 0x12, 0x1A, 0x80]
        for iteration in 0..<iterations {
            var random = SplitMix64(seed: seed &+ UInt64(iteration))
            let (fixture, original) = plain[Int(random.next() % UInt64(plain.count))]
            var body = original
            for _ in 0...Int(random.next() % 8) {
                let at = body.isEmpty ? 0 : Int(random.next() % UInt64(body.count))
                switch random.next() % 4 {
                case 0 where !body.isEmpty: body[at] = UInt8(truncatingIfNeeded: random.next())
                case 1: body.insert(tokens[Int(random.next() % UInt64(tokens.count))], at: at)
                case 2 where !body.isEmpty: body.removeSubrange(at..<min(body.count, at + Int(random.next() % 64)))
                default: body = Array(body.prefix(at))
                }
            }
            var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: fixture.path)
            for (name, value) in fixture.headers where name.lowercased() != "content-encoding" {
                head.headers.add(name: name, value: value)
            }
            let batch = body.withUnsafeBufferPointer {
                VendorWires.decode(.otlp, head: head, path: fixture.path, body: $0, failure: nil)
            }
            #expect([200, 400].contains(batch.normal.status), "iteration \(iteration)")
            #expect(batch.events.count + batch.refused == batch.eventCount, "iteration \(iteration)")
            #expect(batch.normal.status == 200 || batch.events.isEmpty, "iteration \(iteration)")
            #expect(batch.events.allSatisfy { $0.key != nil }, "iteration \(iteration)")
            // Each accepted record renders from the body the server keeps, when it is read.
            if let source = batch.renderedWhenRead {
                var reader = StoredLogReader()
                let kept = StoredBody(.plain(body), minify: false, install: "", receivedAtMs: 0, vendor: .otlp, otlp: source)
                let rendered = batch.events.map { event in
                    let index = event.recordIndex ?? -1
                    return reader.json(of: StoredLog(id: .zero, type: .event, name: event.name, body: kept,
                                                     span: index..<index + 1))
                }
                #expect(rendered.allSatisfy { $0.first == UInt8(ascii: "{") && $0.last == UInt8(ascii: "}") },
                        "iteration \(iteration)")
            } else {
                #expect(batch.events.isEmpty, "iteration \(iteration)")
            }
        }
    }
}
