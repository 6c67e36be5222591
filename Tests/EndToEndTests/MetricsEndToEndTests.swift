import CoreMetrics
import Foundation
import MetricsTestKit
import OutboxMock
import Testing
@testable import Outbox

/// BEHAVIOUR O1–O2: the engine's metrics, read through MetricsTestKit's `TestMetrics` as end-to-end scenarios drive
/// the real engine against the mock. swift-metrics is bootstrapped once per process: one shared `TestMetrics`, and
/// each test reads only its own destination, named uniquely.
enum SharedTestMetrics {
    static let metrics: TestMetrics = {
        let metrics = TestMetrics()
        MetricsSystem.bootstrap(metrics)
        return metrics
    }()
}

@Suite("Metrics end to end (BEHAVIOUR O1, O2)")
struct MetricsEndToEndTests {
    private let metrics = SharedTestMetrics.metrics

    private func engine(_ dir: TempDirectory, _ server: MockServer, name: String,
                        _ adjust: (inout Configuration) -> Void = { _ in }) throws -> OutboxEngine {
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        adjust(&configuration)
        // The list replaces the single destination's fields: a uniquely named one, so parallel tests do not mix.
        var destination = NamedDestination(name: name, destination: .appCenter, endpoint: server.baseURL)
        destination.appSecret = configuration.appSecret
        configuration.destinations = [destination]
        configuration.endpoint = nil
        configuration.appSecret = ""
        return try OutboxEngine(configuration: configuration)
    }

    private func total(_ label: String, _ dimensions: [(String, String)]) -> Int64 {
        metrics.counterTotal(label: label, dimensions: dimensions)
    }

    private func meter(_ label: String, _ destination: String) -> Double? {
        metrics.meters(label: label, dimensions: [("destination", destination)]).first?.lastValue
    }

    // O1, O2: delivered logs and 200s and 503s counted per destination; in flight back to 0; both timers recorded.
    @Test func aFlakyServerMovesTheDeliveryMetrics() async throws {
        let name = "metrics-flaky-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("flaky"); defer { try? server.stop() }
        let tracked = total("outbox_logs_total", [("outcome", "tracked")])
        let engine = try engine(dir, server, name: name) {
            $0.retryIntervals = Array(repeating: .milliseconds(60), count: 10)
        }
        for index in 0..<300 { try engine.trackEvent("m", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(total("outbox_logs_total", [("outcome", "delivered"), ("destination", name)]) == 300)
        // Other tests track in parallel: at least this test's 300.
        #expect(total("outbox_logs_total", [("outcome", "tracked")]) - tracked >= 300)
        let ok = total("outbox_requests_total", [("destination", name), ("status", "200")])
        let unavailable = total("outbox_requests_total", [("destination", name), ("status", "503")])
        #expect(ok > 0)
        #expect(unavailable == Int64(server.stats().statusCounts["503"] ?? -1))
        #expect(ok + unavailable == Int64(status.requests))
        #expect(total("outbox_retries_total", [("destination", name), ("kind", "retry")]) == Int64(status.retries))
        #expect(total("outbox_retries_total", [("destination", name), ("kind", "probe")]) == Int64(status.probes))
        #expect(meter("outbox_in_flight", name) == 0)
        let requestTimes = metrics.timers(label: "outbox_request_duration_seconds", dimensions: [("destination", name)])
        #expect(requestTimes.first?.values.count == Int(ok + unavailable))
        let delays = metrics.timers(label: "outbox_delivery_delay_seconds", dimensions: [("destination", name)])
        #expect((delays.first?.values.count ?? 0) > 0)
    }

    // O1: logs the server refuses for good are counted as dead-lettered for their destination.
    @Test func poisonIsCountedAsDeadLettered() async throws {
        let name = "metrics-poison-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("poison"); defer { try? server.stop() }
        let engine = try engine(dir, server, name: name)
        for index in 0..<40 { try engine.trackEvent(index == 17 ? "poison" : "fine", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.deadLettered == 1)
        #expect(total("outbox_logs_total", [("outcome", "dead_lettered"), ("destination", name)]) == 1)
        #expect(total("outbox_logs_total", [("outcome", "delivered"), ("destination", name)]) == 39)
    }

    // O1, H2: what a destination's policy leaves out is counted as skipped for it, beside what it delivered.
    @Test func aPolicySkipIsCountedAsSkipped() async throws {
        let name = "metrics-skipped-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        var destination = NamedDestination(name: name, destination: .appCenter, endpoint: server.baseURL)
        destination.appSecret = configuration.appSecret
        destination.exclude = ["debug*"]
        configuration.destinations = [destination]
        configuration.endpoint = nil
        configuration.appSecret = ""
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<30 { try engine.trackEvent(index % 3 == 0 ? "debug_tick" : "fine", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.skipped == 10 && status.delivered == 20)
        #expect(total("outbox_logs_total", [("outcome", "skipped"), ("destination", name)]) == 10)
        #expect(total("outbox_logs_total", [("outcome", "delivered"), ("destination", name)]) == 20)
        #expect(server.stats().logsReceived == 20, "the skipped never left")
    }

    // O1, S4: logs found too old to send while the engine runs are counted as expired (engine-wide), never delivered.
    @Test func expiryIsCounted() async throws {
        let name = "metrics-expired-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        let clock = ManualClock()
        let expired = engineWide("expired")
        let engine = try engine(dir, server, name: name) { $0.clock = clock }
        engine.setReachability(.offline)
        for index in 0..<12 { try engine.trackEvent("aging", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        clock.advance(ms: 26 * 24 * 3600 * 1000)   // past the default 25 days
        engine.setReachability(.online)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.expired == 12 && status.delivered == 0)
        #expect(engineWide("expired") - expired >= 12)
        #expect(server.stats().logsReceived == 0)
    }

    // O2: a 401 disables the destination (1), and the engine's shutdown takes its share away (0).
    @Test func unauthorizedDisablesTheDestination() async throws {
        let name = "metrics-unauthorized-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("unauthorized"); defer { try? server.stop() }
        let engine = try engine(dir, server, name: name)
        try engine.trackEvent("m")
        #expect(await dispatchResult(engine) == .error)
        let status = try await engine.status()
        #expect(status.disabledReason != nil)
        #expect(meter("outbox_disabled", name) == 1)
        engine.shutdown()
        #expect(meter("outbox_disabled", name) == 0)
    }

    private func engineWide(_ outcome: String) -> Int64 { total("outbox_logs_total", [("outcome", outcome)]) }

    private func gauge(_ label: String, _ dimensions: [(String, String)] = []) -> Double {
        metrics.meters(label: label, dimensions: dimensions).first?.lastValue ?? -1
    }

    // O1, O2: stored logs raise pending by priority and the store's bytes; what the hook drops is counted. The gauges
    // are the sum over every engine of the process (tests run in parallel): each engine's share is never negative, so
    // the sum holds at least this one's.
    @Test func trackingRaisesPendingAndBytesAndTheHookCountsItsDrops() async throws {
        let name = "metrics-pending-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        let dropped = engineWide("dropped_by_policy")
        let engine = try engine(dir, server, name: name) {
            $0.beforeStore = { event in !event.name.hasPrefix("debug.") }
        }
        engine.setReachability(.offline)
        for index in 0..<200 { try engine.trackEvent("normal", properties: ["i": .int(Int64(index))]) }
        for index in 0..<50 { try engine.trackEvent("urgent", properties: ["i": .int(Int64(index))], flags: .critical) }
        for index in 0..<30 { try engine.trackEvent("debug.trace", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        let status = try await engine.status()
        #expect(status.store.pendingNormal == 200 && status.store.pendingCritical == 50)
        #expect(gauge("outbox_pending", [("priority", "normal")]) >= 200)
        #expect(gauge("outbox_pending", [("priority", "critical")]) >= 50)
        #expect(gauge("outbox_store_bytes") >= Double(status.store.bytes) / 2)
        #expect(engineWide("dropped_by_policy") - dropped >= 30)
        #expect(status.droppedByPolicy == 30)
        engine.setReachability(.online)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        engine.shutdown()
        #expect(total("outbox_logs_total", [("outcome", "delivered"), ("destination", name)]) == 250)
    }

    // O1: a store at its size limit evicts the oldest logs for new ones: counted.
    @Test func evictionIsCounted() async throws {
        let name = "metrics-evicted-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        let evicted = engineWide("evicted")
        let engine = try engine(dir, server, name: name) { $0.maxStorageSize = 24 * 1024 }
        engine.setReachability(.offline)
        let padding = String(repeating: "x", count: 400)
        // Committed a few at a time: eviction makes room among stored logs for new ones, and a loaded loop that took
        // all 400 in one group commit would have no stored log to evict (what does not fit of one commit is refused).
        for index in 0..<400 {
            try engine.trackEvent("big", properties: ["i": .int(Int64(index)), "p": .string(padding)])
            if index % 20 == 19 { await engine.persisted() }
        }
        engine.setReachability(.online)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.evicted > 0, "nothing was evicted: nothing to prove")
        #expect(engineWide("evicted") - evicted >= Int64(status.evicted))
    }

    // O1, O3: a refused connection is a request with status `error`; retries are counted by kind, and a recovery
    // probe as a probe.
    @Test func aRefusedConnectionIsAnErrorAndProbesAreCounted() async throws {
        let name = "metrics-refused-\(UUID().uuidString.prefix(8).lowercased())"
        let dir = TempDirectory(); defer { dir.remove() }
        // Stopped: its port refuses connections.
        let server = try startMock()
        try server.stop()
        let engine = try engine(dir, server, name: name) {
            $0.retryIntervals = [.milliseconds(10), .milliseconds(10)]
            $0.recoveryProbe = nil
        }
        try engine.trackEvent("m")
        #expect(await dispatchResult(engine) == .error)
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.requests > 0)
        #expect(total("outbox_requests_total", [("destination", name), ("status", "error")]) == Int64(status.requests))
        #expect(total("outbox_retries_total", [("destination", name), ("kind", "retry")]) == Int64(status.retries))
        #expect(total("outbox_retries_total", [("destination", name), ("kind", "probe")]) == Int64(status.probes))
    }
}
