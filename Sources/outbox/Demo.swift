import ArgumentParser
import FoundationEssentials
import Glibc
import Outbox
import OutboxFleet
import OutboxMock
import Synchronization

/// SPEC X5: the main job on embedded defaults. The mock ingestion server runs in-process with a flaky scenario
/// (20 % 503s, two lost acknowledgements) and a 5-second outage; a simulated app tracks events through it; a live
/// line shows progress; the report at the end proves that nothing was lost.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the main job on embedded defaults (SPEC X5).")

    @Option(help: "Seconds the simulated app tracks events.") var seconds: Double = 12
    @Option(help: "Events per second the simulated app tracks.") var rate: Double = 300
    @Option(help: "Directory for the demo's store (default: a fresh temporary directory).") var directory: String?
    @OptionGroup var destination: DestinationOptions
    @OptionGroup var logging: LoggingOptions

    /// The embedded scenario: an outage from 4 s to 9 s, lost answers for requests 3 and 4, 20 % 503s.
    static let scenario = #"""
    {"seed": 7, "rules": [
      {"match": {"after_s": 4, "until_s": 9}, "action": "refuse"},
      {"match": {"requests": "3-4"}, "action": "drop_after_body"},
      {"match": {"probability": 0.2}, "respond": {"status": 503, "body": "{\"status\":\"Unavailable\"}"}}
    ]}
    """#

    func run() throws {
        try runBlocking { try await self.runAsync() }
    }

    /// What the mock holds once each, and the duplicates it absorbed, for the destination the demo delivers to
    /// (App Center's logs, or a vendor's events).
    static func counts(_ stats: MockStats, destination: Destination) -> (unique: Int, duplicates: Int) {
        if destination == .appCenter { return (stats.logsUnique, stats.logsDuplicate) }
        let vendor = stats.vendors[destination.name]
        return (vendor?.eventsUnique ?? 0, vendor?.eventsDuplicate ?? 0)
    }

    func runAsync() async throws {
        let temporary = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        let dir = directory ?? temporary + (temporary.hasSuffix("/") ? "" : "/") + "outbox-demo-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/demo.outbox"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

        let server = try MockServer(configuration: .init(scenario: try Scenario.decode(from: Data(Self.scenario.utf8))))
        try server.start()
        defer { try? server.stop() }

        var configuration = Configuration(storePath: path)
        configuration.logger = try logging.makeLogger()
        configuration.endpoint = server.baseURL
        configuration.appSecret = "demo-secret"
        try destination.apply(to: &configuration, testKeys: true)
        configuration.appVersion = "1.0"
        configuration.appBuild = "1"
        // Demo pacing: seconds instead of SPEC's minutes, so the whole story fits in half a minute.
        configuration.testingAllowsValuesBelowBounds = true
        configuration.transmissionInterval = .milliseconds(500)
        configuration.criticalTransmissionInterval = .milliseconds(200)
        // Retries and recovery run on their defaults (SPEC R3, R9–R10): during the outage and after a 503 one probe at a
        // time goes, 1 s, 2 s, 4 s … apart, and the first success drains the backlog.
        // Only the app's events go into the store (no startSession log, SPEC A2), so that the report adds up.
        configuration.sessionTracking = .manual
        let engine = try OutboxEngine(configuration: configuration)
        print("outbox demo — mock server \(server.baseURL) (flaky: 20 % 503, 2 lost answers, outage 4–9 s)")
        print("store \(path), install \(engine.installID.uuidString.lowercased())\n")

        let app = SimulatedApp(engine: engine, rate: rate, seconds: seconds)
        startThread { app.run() }

        let start = Date()
        var drained = false
        while !drained {
            try await Task.sleep(nanoseconds: 250_000_000)  // the progress line's refresh period
            let status = try await engine.status()
            let stats = server.stats()
            let elapsed = Date().timeIntervalSince(start)
            let outage = elapsed >= 4 && elapsed < 9
            let state = status.disabledReason.map { "disabled: \($0)" } ?? (outage ? "server down" : "sending")
            let line = cFormat("\r%5.1fs  tracked %6d  stored %6d  in flight %4d  delivered %6d  retries %4d  ",
                               elapsed, app.tracked, status.pendingNormal + status.pendingCritical, status.inFlight,
                               Self.counts(stats, destination: configuration.destination).unique, status.retries) + state + "     "
            print(line, terminator: "")
            fflush(nil)
            drained = app.done && status.pendingNormal + status.pendingCritical + status.inFlight == 0
            if elapsed > seconds + 120 { break }
        }
        let status = try await engine.status()
        await engine.shutdown(drainFor: .seconds(5))
        let stats = server.stats()
        let (unique, duplicates) = Self.counts(stats, destination: configuration.destination)
        let lost = app.tracked - unique - status.deadLettered - status.serverRejected
        print("\n\ndelivery report")
        print("  tracked              \(app.tracked) (\(app.critical) critical, \(app.rejected) rejected by validation)")
        print("  delivered            \(unique) unique logs in \(stats.requests) requests (\(configuration.destination))")
        print("  duplicates absorbed  \(duplicates) (re-sent after lost answers; the server de-duplicated them)")
        print("  retries              \(status.retries)")
        print("  status mix           \(stats.statusCounts.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " "))")
        print("  faults injected      \(stats.faults.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " "))")
        print("  max in flight        \(stats.maxInFlight)")
        print("  delivery delay       p50 \(stats.delayMs.p50) ms, p99 \(stats.delayMs.p99) ms, max \(stats.delayMs.max) ms")
        print("  lost                 \(lost)")
        if lost != 0 { throw ExitCode(1) }
    }
}

/// A simulated app: screens and purchases at a steady rate, every 50th event critical.
final class SimulatedApp: @unchecked Sendable {
    let engine: OutboxEngine
    let rate: Double
    let seconds: Double
    private let counts = Mutex((tracked: 0, critical: 0, rejected: 0, done: false))

    init(engine: OutboxEngine, rate: Double, seconds: Double) {
        self.engine = engine
        self.rate = rate
        self.seconds = seconds
    }

    var tracked: Int { counts.withLock { $0.tracked } }
    var critical: Int { counts.withLock { $0.critical } }
    var rejected: Int { counts.withLock { $0.rejected } }
    var done: Bool { counts.withLock { $0.done } }

    func run() {
        let screens = ["home", "search", "product", "cart", "checkout"]
        let start = Date()
        var n = 0
        while Date().timeIntervalSince(start) < seconds {
            let due = start.addingTimeInterval(Double(n) / rate).timeIntervalSinceNow
            if due > 0 { usleep(UInt32(due * 1_000_000)) }
            let purchase = n % 50 == 49
            do {
                try engine.trackEvent(purchase ? "purchase" : "Shop>View>\(screens[n % screens.count])",
                                      properties: ["i": .int(Int64(n)), "price": 9.99, "sku": .string("A-\(n % 37)")],
                                      flags: purchase ? .critical : .normal)
                counts.withLock { $0.tracked += 1; if purchase { $0.critical += 1 } }
            } catch {
                counts.withLock { $0.rejected += 1 }
            }
            n += 1
        }
        counts.withLock { $0.done = true }
    }
}
