import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D1, D4, D5, D7: the engine's OTLP/HTTP destination against the real mock, which decodes OTLP as strictly as
/// the OpenTelemetry exporters' captures, through the scenarios of Fixtures/scenarios/.
@Suite("OTLP destination against the mock (SPEC D1, D5, D7)")
struct OTLPDestinationTests {
    static let fast = ["--testing", "--interval", "0.05", "--retry-intervals", "0.05,0.1,0.2,0.2,0.2,0.2,0.2,0.2",
                       "--batch-size", "25"]

    /// The `log.record.uid` of every OTLP record the mock holds (its `/_mock/logs` lines), with how often each appears.
    static func recordIDs(_ server: MockServer) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for event in server.vendorEvents() where event.vendor == .otlp {
            let line = jsonLines(event.json).first ?? [:]
            let record = line["logRecord"] as? [String: Any] ?? [:]
            for attribute in record["attributes"] as? [[String: Any]] ?? [] where attribute["key"] as? String == "log.record.uid" {
                if let id = (attribute["value"] as? [String: Any])?["stringValue"] as? String { counts[id, default: 0] += 1 }
            }
        }
        return counts
    }

    static func otlpUnique(_ server: MockServer) -> Int? { server.stats().vendors["otlp"]?.eventsUnique }

    // SPEC D7: `emit --destination otlp` delivers every log exactly once, in protobuf and in OTLP/JSON, through each
    // scenario a log survives: faults, lost answers (absorbed as duplicates), slowness, throttling.
    @Test(arguments: [("ok", "protobuf"), ("ok", "json"), ("flaky", "protobuf"), ("lost-ack", "protobuf"),
                      ("lost-ack", "json"), ("drop-before-body", "protobuf"), ("slow-network", "json"),
                      ("throttle", "protobuf"), ("skewed-clock", "protobuf"), ("too-large", "json")])
    func everyLogArrivesOnceUnderTheScenario(scenario: String, encoding: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario); defer { try? server.stop() }
        let count = 200
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "\(count)", "--destination", "otlp",
                                    "--otlp-encoding", encoding, "--endpoint", server.baseURL, "--wait-delivered",
                                    "--timeout", "60"] + Self.fast, in: dir)
        #expect(result.status == 0, "\(scenario)/\(encoding): \(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["delivered"] as? Int == count)
        #expect(summary["pending"] as? Int == 0)
        let ids = try Self.recordIDs(server)
        #expect(ids.count == count, "\(scenario)/\(encoding): every log's record, by its log.record.uid")
        #expect(ids.values.allSatisfy { $0 == 1 }, "each recorded once")
        #expect(Self.otlpUnique(server) == count)
    }

    // SPEC D1: an endpoint written as OpenTelemetry writes it, `…/v1/logs`, is the URL itself; so is
    // OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, while OTEL_EXPORTER_OTLP_ENDPOINT is the base that gets `/v1/logs`.
    @Test(arguments: ["--endpoint", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"])
    func anEndpointGivenWithItsLogsPathIsUsedAsItIs(way: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let full = server.baseURL + "/v1/logs"
        var arguments = ["emit", "--store", dir.file(), "--count", "20", "--destination", "otlp", "--wait-delivered",
                         "--timeout", "30"] + Self.fast
        var environment: [String: String] = [:]
        switch way {
        case "--endpoint": arguments += ["--endpoint", full]
        case "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": environment[way] = full
        default: environment[way] = server.baseURL
        }
        let result = try runOutbox(arguments, environment: environment, in: dir)
        #expect(result.status == 0, "\(way): \(result.errors)")
        #expect(jsonLines(result.output).first?["delivered"] as? Int == 20, "\(way): \(result.output)")
        #expect(Self.otlpUnique(server) == 20)
    }

    // SPEC D1: OTLP sets no Authorization of its own: a collector behind one gets the user's, once.
    @Test func anAuthorizationHeaderGoesToTheCollector() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "10", "--destination", "otlp",
                                    "--endpoint", server.baseURL, "--header", "Authorization: Bearer collector-token",
                                    "--wait-delivered", "--timeout", "30"] + Self.fast, in: dir)
        #expect(result.status == 0, "\(result.errors)")
        #expect(Self.otlpUnique(server) == 10)
    }

    // SPEC R1: a 404 stops sending; the reason names the URL requested, not another vendor's path.
    @Test func aWrongPathStopsWithTheURLRequestedInItsReason() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "5", "--destination", "otlp",
                                    "--endpoint", server.baseURL + "/v2/logs", "--wait-delivered", "--timeout", "2"]
                                   + Self.fast, in: dir)
        #expect(result.status == 1)
        let status = try runOutbox(["status", "--store", dir.file()], in: dir)
        let reason = jsonObject(status.output)["disabled_reason"] as? String ?? ""
        #expect(reason.contains("server answered 404"), "\(status.output)")
        #expect(reason.contains("POST \(server.baseURL)/v2/logs/v1/logs"), "\(reason)")
        #expect(reason.contains("OTLP/HTTP: POST /v1/logs"), "the mock lists OTLP's path: \(reason)")
    }

    // SPEC R1 on OTLP: 401 stops sending and keeps the data; emit --wait-delivered then exits 1 (X3a).
    @Test func unauthorizedStopsAndKeepsTheData() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("unauthorized"); defer { try? server.stop() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "30", "--destination", "otlp",
                                    "--endpoint", server.baseURL, "--wait-delivered", "--timeout", "2"] + Self.fast, in: dir)
        #expect(result.status == 1, "\(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["pending"] as? Int == 30)
        #expect(summary["disabled"] as? Bool == true)
    }

    // SPEC R2 on OTLP: the poison log alone is dead-lettered (the mock refuses any batch holding it); the others
    // arrive once each.
    @Test func aPoisonLogAloneIsDeadLettered() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("poison"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .otlp
        let engine = try OutboxEngine(configuration: configuration)
        for i in 0..<20 { try engine.trackEvent(i == 7 ? "poison" : "fine", properties: ["i": .int(Int64(i))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.deadLetters == 1)
        #expect(status.delivered == 19)
        #expect(try Self.recordIDs(server).count == 19)
        let letters = try OutboxEngine.deadLetters(inStoreAt: dir.file())
        #expect(letters.first?.status == 400)
    }

    // SPEC D5: a 200 whose partial_success rejects N records (here in OTLP/JSON, read by its Content-Type) settles the
    // batch — never sent again — and counts N in server_rejected, kept in the store: delivered + server_rejected =
    // tracked.
    @Test func aPartialSuccessIsCountedAndNotSentAgain() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let scenario = try Scenario.decode(from: Data(#"""
            {"rules": [{"match": {"requests": "1"}, "respond": {"status": 200,
              "headers": {"Content-Type": "application/json"},
              "body": "{\"partialSuccess\":{\"rejectedLogRecords\":\"3\",\"errorMessage\":\"3 records had no time\"}}"}}]}
            """#.utf8))
        let server = try startMock(scenario: scenario); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .otlp
        configuration.batchSize = 10
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        for i in 0..<10 { try engine.trackEvent("e", properties: ["i": .int(Int64(i))]) }
        #expect(await dispatchResult(engine) == .good)
        #expect(await dispatchResult(engine) == .noData, "the batch is settled: nothing is sent again")
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.serverRejected == 3)
        #expect(status.delivered == 7)
        #expect(status.delivered + status.serverRejected == 10)
        #expect(server.stats().requests == 1)
        #expect(try StoreReport.read(path: dir.file()).serverRejected == 3, "kept in the store")
        #expect(try StoreReport.read(path: dir.file()).destination == "otlp")
    }

    // SPEC D5: 415 (the server does not take the encoding) stops like 404, keeping the data.
    @Test func unsupportedMediaTypeStopsAndKeepsTheData() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: try Scenario.decode(from: Data(#"{"rules": [{"respond": {"status": 415}}]}"#.utf8)))
        defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .otlp
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        for _ in 0..<5 { try engine.trackEvent("e") }
        #expect(await dispatchResult(engine) == .error)
        let status = try await engine.status()
        #expect(status.disabledReason?.contains("415") == true)
        #expect(status.pendingNormal == 5)
    }
}
