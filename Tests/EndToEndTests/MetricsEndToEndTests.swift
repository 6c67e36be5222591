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
}
