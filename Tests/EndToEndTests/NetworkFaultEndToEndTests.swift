import Foundation
import OutboxMock
import Testing
@testable import Outbox

/// The real engine (curl underneath) against the real mock injecting each of SPEC M8's proxy faults: whatever the
/// network does, everything tracked arrives, once. Assertions read the server's stats, not the engine's logs.
@Suite("Network faults end to end (SPEC M8, R1, S6)")
struct NetworkFaultEndToEndTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var rule: String
        var kind: String
        /// The server recorded the logs but the client never saw the answer: its retry is a duplicate.
        var resendsRecordedLogs = false
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "drop_before_body, then 200", rule: #"{"match":{"requests":"1-2"},"action":"drop_before_body"}"#,
             kind: "drop_before_body"),
        Case(name: "limit_bytes cuts the answer", rule: #"{"match":{"requests":"1-2"},"network":{"limit_bytes":12}}"#,
             kind: "limit_bytes", resendsRecordedLogs: true),
        Case(name: "latency and jitter", rule: #"{"network":{"latency_ms":30,"jitter_ms":10}}"#, kind: "latency"),
        Case(name: "64 kbps", rule: #"{"network":{"kbps":64}}"#, kind: "bandwidth"),
        Case(name: "answers in slices", rule: #"{"network":{"slice_bytes":16,"slice_delay_ms":2}}"#, kind: "slice"),
        Case(name: "slow close", rule: #"{"network":{"slow_close_ms":100}}"#, kind: "slow_close"),
    ]

    // SPEC M8, R1, S6, M2: the engine survives each fault and delivers everything exactly once.
    @Test(arguments: cases)
    func everythingArrivesDespiteTheFault(_ fault: Case) async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let scenario = try Scenario.decode(from: Data(#"{"seed":1,"rules":[\#(fault.rule)]}"#.utf8))
        let server = try startMock(scenario: scenario); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        for index in 0..<120 { try engine.trackEvent("net", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        let stats = server.stats()
        #expect(stats.logsUnique == 120)
        #expect((stats.faults[fault.kind] ?? 0) >= 1)
        #expect(status.delivered == 120)
        #expect(status.deadLettered == 0)
        if fault.resendsRecordedLogs {
            #expect(stats.logsDuplicate > 0)
        } else {
            #expect(stats.logsDuplicate == 0)
        }
    }
}
