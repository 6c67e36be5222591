import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix

/// The mock ingestion server (SPEC M1–M7): strict W1/W2 validation, recording with de-duplication,
/// fault injection from scenarios, record/replay, and a control API and live page under `/_mock/`.
///
/// ```swift
/// let server = try MockServer(configuration: .init(scenario: try Scenario.fixture("flaky")))
/// try server.start()
/// defer { try? server.stop() }
/// // point the engine at server.baseURL, run it, then:
/// #expect(server.stats().logsUnique == 1000)
/// ```
/// `start()` and `stop()` block briefly; call them from a test or the main thread, never from a
/// SwiftNIO event loop.
public final class MockServer: Sendable {
    /// Settings; the defaults are what `outbox-mock` uses without flags.
    public struct Configuration: Sendable {
        /// Address to bind (loopback by default).
        public var host: String
        /// Port to bind; 0 picks a free one (read it back from `MockServer.port`).
        public var port: Int
        /// Faults to inject; nil answers every valid request with 200.
        public var scenario: Scenario?
        /// When set, `App-Secret` must equal it; otherwise any non-empty value passes.
        public var appSecret: String?
        /// Writes every ingestion exchange to this file as JSON lines (SPEC M5).
        public var recordPath: String?
        /// Answers requests with the responses of this recording, in order; normal handling afterwards.
        public var replayPath: String?
        /// Time zone of the 04:00-next-day reporting cutoff of late logs (SPEC M7).
        public var reportTimeZone: TimeZone
        /// UTC, unless the system has no such zone.
        public static let defaultReportTimeZone = TimeZone(identifier: "UTC") ?? .current
        /// Largest body on the wire, compressed or not; larger ones get 413.
        public var bodyLimit: Int
        /// Largest body after decompression (a gzip bomb); larger ones get 413.
        public var decompressedLimit: Int
        /// Event-loop threads.
        public var threads: Int
        /// Receives the server's rare diagnostics (a port that cannot be bound again). Never secrets.
        public var log: (@Sendable (String) -> Void)?
        /// Where the server reads the time (scenario windows, `received_at`, delays, the `Date` header);
        /// a test passes a `ManualMockClock` to move scenario time without sleeping.
        public var clock: any MockClock

        public init(host: String = "127.0.0.1", port: Int = 0, scenario: Scenario? = nil, appSecret: String? = nil,
                    recordPath: String? = nil, replayPath: String? = nil,
                    reportTimeZone: TimeZone = Configuration.defaultReportTimeZone,
                    bodyLimit: Int = 5 * 1024 * 1024, decompressedLimit: Int = 20 * 1024 * 1024,
                    threads: Int = System.coreCount, log: (@Sendable (String) -> Void)? = nil,
                    clock: any MockClock = SystemMockClock()) {
            self.host = host
            self.port = port
            self.scenario = scenario
            self.appSecret = appSecret
            self.recordPath = recordPath
            self.replayPath = replayPath
            self.reportTimeZone = reportTimeZone
            self.bodyLimit = bodyLimit
            self.decompressedLimit = decompressedLimit
            self.threads = threads
            self.log = log
            self.clock = clock
        }

        func check() throws {
            guard (0...65535).contains(port) else { throw MockServerError.invalidConfiguration("port must be 0…65535, got \(port)") }
            guard bodyLimit > 0 else { throw MockServerError.invalidConfiguration("bodyLimit must be > 0, got \(bodyLimit)") }
            guard decompressedLimit >= bodyLimit else {
                throw MockServerError.invalidConfiguration(
                    "decompressedLimit (\(decompressedLimit)) must be at least bodyLimit (\(bodyLimit))")
            }
            guard threads >= 1 else { throw MockServerError.invalidConfiguration("threads must be ≥ 1, got \(threads)") }
            try scenario?.check()
        }
    }

    let core: MockCore
    private let group: MultiThreadedEventLoopGroup

    /// Checks the configuration, reads the replay file and creates the record file; binds nothing yet.
    public init(configuration: Configuration = Configuration()) throws {
        try configuration.check()
        core = try MockCore(configuration: configuration)
        group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.threads)
    }

    /// Binds and starts accepting connections; returns once the port accepts them. Call it once.
    public func start() throws {
        let core = self.core
        let group = self.group
        var loops: [ObjectIdentifier: FlushBatcher] = [:]
        for loop in group.makeIterator() { loops[ObjectIdentifier(loop)] = FlushBatcher(loop: loop) }
        let batchers = loops
        do {
            try core.listener.start(group: group) {
                ServerBootstrap(group: group)
                    .serverChannelOption(.backlog, value: 256)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                    .childChannelOption(.maxMessagesPerRead, value: 16)
                    .childChannelInitializer { channel in
                        guard core.listener.register(channel) else { return channel.close() }
                        return channel.eventLoop.makeCompletedFuture {
                            try Self.addConnectionHandlers(to: channel, core: core,
                                                           flushes: batchers[ObjectIdentifier(channel.eventLoop)])
                        }
                    }
            }
        } catch MockServerError.alreadyStarted {
            throw MockServerError.alreadyStarted
        } catch {
            try? stop()
            throw MockServerError.cannotBind("\(core.configuration.host):\(core.configuration.port): \(error)")
        }
        core.scheduleOutages()
    }

    /// One connection's pipeline, on its event loop: HTTP/1.1 decoding, the wire-size guard, decompression
    /// (bounded: a gzip bomb stops at `decompressedLimit`), then the handler that answers. The handler tests
    /// put the same pipeline on an `EmbeddedChannel`.
    static func addConnectionHandlers(to channel: Channel, core: MockCore, flushes: FlushBatcher? = nil) throws {
        let guardHandler = BodyLimitGuard(limit: core.configuration.bodyLimit)
        let inflater = BodyInflater(limit: core.configuration.decompressedLimit)
        try channel.pipeline.syncOperations.addHandlers([
            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)),
            guardHandler,
            inflater,
            ConnectionHandler(core: core, guardHandler: guardHandler, inflater: inflater, flushes: flushes),
        ])
    }

    /// Closes the port and every connection, then stops the event loops. A second call does nothing.
    public func stop() throws {
        guard core.listener.stop() else { return }
        core.recorder?.close()
        try group.syncShutdownGracefully()
    }

    /// The bound port (the configured one until `start()`).
    public var port: Int { core.listener.port }

    /// `http://127.0.0.1:PORT` — the engine's endpoint; logs go to `baseURL + "/logs?api-version=1.0.0"`.
    public var baseURL: String {
        let host = core.configuration.host
        return host.utf8.contains(UInt8(ascii: ":")) ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
    }

    /// What `GET /_mock/stats` answers.
    public func stats() -> MockStats { core.stats() }

    /// Body bytes of the ingestion requests since start or reset, as sent (compressed bodies count compressed):
    /// what benchmarks call bytes on the wire. Not part of `GET /_mock/stats`, whose keys SPEC X1 fixes.
    public func wireBytes() -> Int { core.wireBytes() }

    /// Unique logs in arrival order (what `GET /_mock/logs` answers).
    public func uniqueLogs() -> [MockLog] {
        var reader = StoredLogReader()
        return core.storedLogs().filter { $0.vendor == .appcenter }.map { log in
            MockLog(id: log.id.uuidString, install: log.install, type: log.type, name: log.name,
                    receivedAtMs: log.receivedAtMs, json: String(decoding: reader.json(of: log), as: UTF8.self))
        }
    }

    /// Unique events of the other vendors in arrival order (SPEC V3; `GET /_mock/logs` lists them with App Center's).
    public func vendorEvents() -> [MockVendorEvent] {
        var reader = StoredLogReader()
        return core.storedLogs().filter { $0.vendor != .appcenter }.map { log in
            MockVendorEvent(vendor: log.vendor, name: log.name, receivedAtMs: log.receivedAtMs,
                            json: String(decoding: reader.json(of: log), as: UTF8.self))
        }
    }

    /// One entry per ingestion request (what `GET /_mock/requests` answers).
    public func requests() -> [MockRequest] { core.requestEntries() }

    /// The delivery-delay histogram of the live page.
    public func delayHistogram() -> DelayHistogram { core.histogram() }

    /// The scenario in force.
    public var scenario: Scenario { core.scenario }

    /// Swaps the scenario live (like `PUT /_mock/scenario`); nil removes every fault. The scenario clock
    /// and request numbers keep running; the random source restarts from the new seed.
    public func setScenario(_ scenario: Scenario?) {
        core.setScenario(scenario ?? Scenario())
    }

    /// Clears counts, logs and requests and restarts the scenario clock (like `POST /_mock/reset`).
    public func reset() { core.reset() }

    /// Restarts the scenario clock from now and keeps every count, log and request: a run that starts after the
    /// server (the fleet's first tracked event, SPEC F9) times its scenario from its own start.
    public func restartScenarioClock() { core.restartClock() }

    // MARK: - Fixtures

    /// The named scenarios' directory (SPEC P3): `$OUTBOX_FIXTURES/scenarios` when that is set, else the `Scenarios`
    /// resource SwiftPM copies beside the executable that links OutboxMock (`Outbox_OutboxMock.resources`, also in a
    /// package that depends on Outbox), else the Debian package's `/usr/share/outbox/scenarios`. Never found by
    /// walking up directories: inside a dependent package that finds nothing, or someone else's files.
    public static func scenariosDirectory() -> String? {
        let fm = FileManager.default
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["OUTBOX_FIXTURES"] { candidates.append(env + "/scenarios") }
        let bundle = "Outbox_OutboxMock.resources/Scenarios"
        candidates.append(Bundle.main.bundleURL.appendingPathComponent(bundle).path)
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        candidates.append(executable.deletingLastPathComponent().appendingPathComponent(bundle).path)
        candidates.append("/usr/share/outbox/scenarios")
        for candidate in candidates {
            var isDir: ObjCBool = false
            if fm.fileExists(atPath: candidate, isDirectory: &isDir), isDir.boolValue { return candidate }
        }
        return nil
    }

    /// Path of the named scenario `<name>.json` (`scenariosDirectory()`).
    public static func scenarioPath(_ name: String) throws -> String {
        guard let dir = scenariosDirectory() else { throw MockServerError.fixturesNotFound }
        return dir + "/" + (name.hasSuffix(".json") ? name : name + ".json")
    }
}

extension Scenario {
    /// Loads the named scenario `<name>.json` (`ok`, `flaky`, `outage`, `throttle`, `lost-ack`, `poison`,
    /// `unauthorized`, `too-large`, `skewed-clock`).
    public static func fixture(_ name: String) throws -> Scenario {
        try load(path: MockServer.scenarioPath(name))
    }

    /// What `--scenario` names (README, docs/MOCK.md): a file, or a named scenario (`flaky`, `flaky.json`). A file
    /// there wins; a name (no `/`) that is no file is looked up among the named scenarios, and an unknown one is
    /// refused listing them.
    public static func load(nameOrPath argument: String) throws -> Scenario {
        if argument.contains("/") || FileManager.default.fileExists(atPath: argument) { return try load(path: argument) }
        guard let directory = MockServer.scenariosDirectory() else { throw MockServerError.fixturesNotFound }
        let path = try MockServer.scenarioPath(argument)
        guard FileManager.default.fileExists(atPath: path) else {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
                .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
            throw ScenarioError.unreadable(path: argument, reason: "no such file, and not a named scenario (named: \(names.joined(separator: ", ")))")
        }
        return try load(path: path)
    }
}

public enum MockServerError: Error, Equatable, CustomStringConvertible {
    case invalidConfiguration(String)
    case cannotBind(String)
    case unreadableFile(path: String, reason: String)
    case unwritableFile(String)
    case invalidRecording(String)
    case fixturesNotFound
    case alreadyStarted

    public var description: String {
        switch self {
        case .invalidConfiguration(let m): "invalid configuration: \(m)"
        case .cannotBind(let m): "cannot listen on \(m)"
        case .unreadableFile(let path, let reason): "cannot read \(path): \(reason)"
        case .unwritableFile(let p): "cannot create \(p)"
        case .invalidRecording(let m): "invalid recording: \(m)"
        case .alreadyStarted: "start() was already called (a stopped server cannot start again)"
        case .fixturesNotFound:
            "the named scenarios were not found: no Outbox_OutboxMock.resources/Scenarios beside this program and no /usr/share/outbox/scenarios (set OUTBOX_FIXTURES to a directory holding scenarios/, or pass a scenario file's path)"
        }
    }
}
