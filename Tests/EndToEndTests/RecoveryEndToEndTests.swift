import Foundation
import OutboxMock
import Testing
@testable import Outbox

/// SPEC R9–R10 against the real mock: while the server refuses connections the engine sends one probe at a time on
/// its schedule, and the backlog goes as soon as a probe gets through. Intervals in milliseconds (the defaults are
/// seconds); the same code runs with both.
@Suite("Recovery end to end (SPEC R9, R10)")
struct RecoveryEndToEndTests {
    /// The mock refuses connections from its start until `outageS`; the engine tracks at once.
    private func run(outageS: Double, recovery: RecoveryProbe?, events: Int = 200, timeoutS: Int = 60) async throws
        -> (status: EngineStatus, stats: MockStats, deliveredAfterOutageMs: Int64?) {
        let dir = TempDirectory(); defer { dir.remove() }
        let scenario = try Scenario.decode(from: Data(#"{"seed":1,"rules":[{"match":{"after_s":0,"until_s":\#(outageS)},"action":"refuse"}]}"#.utf8))
        let server = try startMock(scenario: scenario); defer { try? server.stop() }
        let start = wallMs()
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.recoveryProbe = recovery
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<events { try engine.trackEvent("recover", properties: ["i": .int(Int64(index))]) }
        let delivered = await engine.waitUntilDelivered(timeout: .seconds(timeoutS))
        let end = wallMs()
        let status = try await engine.status()
        engine.shutdown()
        return (status, server.stats(), delivered ? end - start - Int64(outageS * 1000) : nil)
    }

    // SPEC R9: a 2 s refusal; everything arrives once, brought back by a probe after a bounded number of them (one
    // at a time, never a herd) — where R3/R5 alone (same retry intervals) used up every attempt inside the outage and
    // sent nothing more.
    @Test func theBacklogGoesAsSoonAsAProbeGetsThrough() async throws {
        let recovery = RecoveryProbe(initialInterval: .milliseconds(50), maxInterval: .milliseconds(400),
                                     longFaultInterval: .milliseconds(400), drainJitter: .zero)
        let (status, stats, after) = try await run(outageS: 2, recovery: recovery)
        #expect(stats.logsUnique == 200)
        #expect(status.delivered == 200)
        #expect(status.deadLettered == 0)
        #expect(status.disabledReason == nil)
        // How soon after the outage is the compare benchmark's figure (make compare): a wall-clock bound here would
        // measure the machine's load, not the schedule.
        let afterMs = try #require(after, "not delivered within 60 s")
        print("recovery: delivered \(afterMs) ms after the outage ended, \(status.probes) probes")
        // 2 s of refusals: 25–50, 50–100, 100–200, then every 200–400 ms: at most ~13 probes, never a herd.
        #expect(status.probes >= 3 && status.probes <= 20, "\(status.probes) probes")
        #expect(status.requests - status.probes <= 3 + 8, "\(status.requests) requests, \(status.probes) probes")

        let (seedStatus, seedStats, seedAfter) = try await run(outageS: 2, recovery: nil, timeoutS: 5)
        #expect(seedAfter == nil, "R3/R5 alone: disabled inside the outage, and no probe (probeInterval nil) in the 3 s after it")
        #expect(seedStats.logsUnique < 200)
        #expect(seedStatus.disabledReason?.contains("retries exhausted") == true)
    }
}
