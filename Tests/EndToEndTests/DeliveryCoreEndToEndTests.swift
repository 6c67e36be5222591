import Foundation
import OutboxMock
import Testing
@testable import Outbox

/// The delivery machine's rules with the real engine, the real store and the real mock over loopback.
@Suite("Delivery core end to end (SPEC T6, R8, C5, N2)")
struct DeliveryCoreEndToEndTests {
    private func names(_ server: MockServer) -> [String] {
        server.uniqueLogs().compactMap(\.name)
    }

    // SPEC T6: opt-out is total. With a batch parked for its retry, `setEnabled(false)` and then everything that
    // would resend it (retryNow, a network change) send nothing: the only requests after it carry the logs tracked
    // once collection is on again.
    @Test func optOutWithARetryPendingSendsNoEarlierLog() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(requests: try .init("1")), outcome: .respond(.init(status: 503))),
        ]))
        defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.dispatchInterval = .zero
        configuration.retryIntervals = [.seconds(3600)]
        configuration.recoveryProbe = nil  // R3's parked retry, which R9's probe would send early
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        for index in 0..<10 { try engine.trackEvent("before", properties: ["i": .int(Int64(index))]) }
        #expect(await dispatchResult(engine) == .error)  // the batch is now parked for its retry
        try engine.setEnabled(false)
        engine.retryNow()
        engine.setReachability(.offline)
        engine.setReachability(.online)
        try engine.setEnabled(true)
        try engine.trackEvent("after")
        #expect(await dispatchResult(engine) == .good)
        #expect(server.stats().requests == 2)
        #expect(names(server) == ["after"])
        let status = try await engine.status()
        #expect(status.pendingNormal + status.pendingCritical + status.inFlight == 0)
    }

    // SPEC R8, R1: after a 401 sending stops and the data is kept; `update` with the right secret resumes it
    // without a restart, and a field that cannot change at run time is refused by name.
    @Test func anUpdateResumesAfterA401() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var mockConfiguration = MockServer.Configuration()
        mockConfiguration.appSecret = "right"
        let server = try MockServer(configuration: mockConfiguration)
        try server.start()
        defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.appSecret = "wrong"
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        for index in 0..<30 { try engine.trackEvent("kept", properties: ["i": .int(Int64(index))]) }
        #expect(await dispatchResult(engine) == .error)
        #expect(try await engine.status().disabledReason?.contains("401") == true)
        #expect(await dispatchResult(engine) == .error)  // stopped: nothing is sent
        #expect(server.stats().requests == 1)

        #expect(throws: OutboxError.self) { try engine.update { $0.batchSize = 10 } }
        do {
            try engine.update { $0.batchSize = 10 }
        } catch {
            #expect("\(error)".contains("batchSize"))
        }
        #expect(throws: OutboxError.self) { try engine.update { $0.endpoint = "ftp://nowhere" } }

        try engine.update { $0.appSecret = "right" }
        #expect(await dispatchResult(engine) == .good)
        #expect(server.stats().logsUnique >= 30)
        #expect(names(server).filter { $0 == "kept" }.count == 30)
        #expect(try await engine.status().disabledReason == nil)
    }

    // SPEC C5: the engine's pause() stops sending while tracking goes on; resume() sends what accumulated.
    @Test func pauseAndResumeOfTheEngine() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        defer { engine.shutdown() }
        engine.pause()
        for index in 0..<120 { try engine.trackEvent("paused", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        #expect(await dispatchResult(engine) == .error)
        #expect(server.stats().requests == 0)
        #expect(try await engine.status().pendingNormal >= 120)
        engine.resume()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        #expect(names(server).filter { $0 == "paused" }.count == 120)
    }

    // SPEC N2, R7, R6: the host's `.offline` stops every attempt whatever the watcher says; `.online` after it is a
    // network change and sends what waits at once.
    @Test func theHostsReachabilityOverridesTheWatcher() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        engine.setReachability(.offline)
        for index in 0..<60 { try engine.trackEvent("offline", properties: ["i": .int(Int64(index))]) }
        #expect(await dispatchResult(engine) == .error)
        #expect(server.stats().requests == 0)
        engine.setReachability(.online)
        #expect(await dispatchResult(engine) == .good)
        #expect(names(server).filter { $0 == "offline" }.count == 60)
    }
}

extension DeliveryCoreEndToEndTests {
    // SPEC R8: `update` refuses, by name, fields that cannot change at run time; exclusiveStoreLock and
    // sharedTransport were accepted and applied by nothing.
    @Test func updateRefusesFieldsThatCannotChangeByName() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: "http://127.0.0.1:9"))
        defer { engine.shutdown() }
        for (name, change) in [("exclusiveStoreLock", { (c: inout Configuration) in c.exclusiveStoreLock = true }),
                               ("dispatchInterval", { (c: inout Configuration) in c.dispatchInterval = .zero })] {
            do {
                try engine.update(change)
                Issue.record("update accepted a change of \(name)")
            } catch {
                #expect("\(error)".contains("refused: \(name)"), "\(error)")
            }
        }
        try engine.update { $0.requestTimeout = .seconds(5) }
    }
}
