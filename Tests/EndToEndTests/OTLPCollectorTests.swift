import Foundation
import Glibc
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D8: the engine's OTLP/HTTP received by a real OpenTelemetry collector — rotel, the binary of its PyPI wheel,
/// unpacked under .build/rotel by `make test` (scripts/rotel.sh) — which relays it to outbox-mock: every log arrives
/// with its `log.record.uid`, also across a restart of the collector in the middle.
@Suite("OTLP through a real collector (SPEC D8)")
struct OTLPCollectorTests {
    static let agent: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/rotel/rotel/rotel-agent").path
    static var available: Bool { FileManager.default.isExecutableFile(atPath: agent) }

    /// rotel relaying OTLP/HTTP on `httpPort` to `mock`; returns once its HTTP port accepts connections.
    static func startRotel(httpPort: UInt16, grpcPort: UInt16, mock: String, log: String) throws -> ChildProcess {
        let process = ChildProcess()
        // Through python3, which unblocks SIGTERM before it becomes rotel: a child inherits the signal mask of the test
        // thread that spawns it, where SIGTERM may be blocked, and rotel would then never see the stop below.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, "
                             + "{signal.SIGTERM, signal.SIGINT}); os.execv(sys.argv[1], sys.argv[1:])", agent,
                             "start", "--otlp-http-endpoint", "127.0.0.1:\(httpPort)", "--otlp-grpc-endpoint", "127.0.0.1:\(grpcPort)",
                             "--otlp-exporter-endpoint", mock, "--otlp-exporter-protocol", "http"]
        FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Readiness: the port accepts (bounded: 10 s), or rotel exited (its log says why).
        for _ in 0..<400 where process.isRunning && !NginxServer.accepts(port: httpPort) { usleep(25_000) }
        guard process.isRunning, NginxServer.accepts(port: httpPort) else {
            throw CollectorError.didNotStart((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }
        return process
    }

    /// SIGTERM, then waits for the exit (20 s at most): rotel sends what it buffered first (a SIGKILL would lose what it
    /// had acknowledged). Returns whether it exited by itself.
    @discardableResult
    static func stop(_ process: ChildProcess) -> Bool {
        process.terminate()
        for _ in 0..<800 where process.isRunning { usleep(25_000) }
        guard !process.isRunning else {
            kill(process.processIdentifier, SIGKILL)
            return false
        }
        return true
    }

    enum CollectorError: Error { case didNotStart(String) }

    @Test(.enabled(if: OTLPCollectorTests.available, "rotel is not unpacked under .build/rotel (scripts/rotel.sh needs PyPI)"))
    func everyLogReachesTheMockThroughRotelAcrossARestart() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let mock = try startMock("ok"); defer { try? mock.stop() }
        let ports = try NginxServer.freePorts(count: 2)
        let version = try run(Self.agent, ["--version"]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        print("OTLPCollectorTests: \(version)")
        var rotel = try Self.startRotel(httpPort: ports[0], grpcPort: ports[1], mock: mock.baseURL, log: dir.file("rotel-1.log"))
        var configuration = fastConfiguration(store: dir.file(), endpoint: "http://127.0.0.1:\(ports[0])")
        configuration.destination = .otlp
        configuration.retryIntervals = Array(repeating: .milliseconds(200), count: 10)
        let engine = try OutboxEngine(configuration: configuration)
        for i in 0..<500 { try engine.trackEvent("through-rotel", properties: ["i": .int(Int64(i))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        #expect(Self.stop(rotel), "rotel exits on SIGTERM")  // the collector restarts in the middle
        for i in 500..<1000 { try engine.trackEvent("through-rotel", properties: ["i": .int(Int64(i))]) }
        await engine.persisted()
        rotel = try Self.startRotel(httpPort: ports[0], grpcPort: ports[1], mock: mock.baseURL, log: dir.file("rotel-2.log"))
        engine.retryNow()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(Self.stop(rotel), "rotel exits on SIGTERM")
        #expect(status.delivered == 1000)
        let ids = try OTLPDestinationTests.recordIDs(mock)
        #expect(ids.count == 1000, "every log, by its log.record.uid, through \(version)")
        #expect(ids.values.allSatisfy { $0 == 1 })
    }

    // BEHAVIOUR D8, D15, D17: one engine with two destinations — OTLP through rotel to one mock, PostHog straight to
    // another — and no fault: each receives every log, PostHog exactly once, OTLP each log by its log.record.uid once.
    @Test(.enabled(if: OTLPCollectorTests.available, "rotel is not unpacked under .build/rotel (scripts/rotel.sh needs PyPI)"))
    func twoDestinationsOneThroughRotelEachReceiveEveryLog() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock("ok"); defer { try? ops.stop() }
        let product = try startMock("ok"); defer { try? product.stop() }
        let ports = try NginxServer.freePorts(count: 2)
        let rotel = try Self.startRotel(httpPort: ports[0], grpcPort: ports[1], mock: ops.baseURL, log: dir.file("rotel.log"))
        var configuration = fastConfiguration(store: dir.file(), endpoint: "http://127.0.0.1:\(ports[0])")
        configuration.endpoint = nil
        configuration.appSecret = ""
        var analytics = NamedDestination(name: "product", destination: .posthog, endpoint: product.baseURL)
        analytics.apiKey = "phc_test"
        configuration.destinations = [
            NamedDestination(name: "ops", destination: .otlp, endpoint: "http://127.0.0.1:\(ports[0])"), analytics,
        ]
        configuration.retryIntervals = Array(repeating: .milliseconds(200), count: 10)
        let engine = try OutboxEngine(configuration: configuration)
        let count = 500
        for i in 0..<count { try engine.trackEvent("two-ways", properties: ["i": .int(Int64(i))]) }
        let drained = await engine.waitUntilDelivered(timeout: .seconds(30))
        let status = try await engine.status()
        engine.shutdown()
        #expect(Self.stop(rotel), "rotel exits on SIGTERM")  // what it buffered reaches the mock first
        #expect(drained)
        #expect(status.store.destinations?["ops"]?.delivered == count)
        #expect(status.store.destinations?["product"]?.delivered == count)
        let ids = try OTLPDestinationTests.recordIDs(ops)
        #expect(ids.count == count, "every log reached the mock through rotel, by its log.record.uid")
        #expect(ids.values.allSatisfy { $0 == 1 })
        let posthog = product.stats().vendors["posthog"]
        #expect(posthog?.eventsUnique == count && posthog?.eventsDuplicate == 0, "PostHog received every log once")
        #expect((ops.stats().vendors["posthog"]?.eventsReceived ?? 0) == 0 && (product.stats().vendors["otlp"]?.eventsReceived ?? 0) == 0,
                "each destination's logs went to its own server only")
    }
}
