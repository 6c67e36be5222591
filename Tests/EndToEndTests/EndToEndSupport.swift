import Foundation
@_exported import OutboxTestSupport
import OutboxMock
import Testing
@testable import Outbox

/// The real mock server in-process on 127.0.0.1 (port 0), with a scenario from Fixtures/scenarios/ or given.
func startMock(_ fixture: String? = nil, scenario: Scenario? = nil) throws -> MockServer {
    var configuration = MockServer.Configuration()
    configuration.scenario = try scenario ?? fixture.map { try Scenario.load(path: MockServer.scenarioPath($0)) }
    let server = try MockServer(configuration: configuration)
    try server.start()
    return server
}

/// Sends now (`dispatch`) and returns once the attempt is answered: an event to wait on, not a sleep.
func dispatchResult(_ engine: OutboxEngine) async -> DispatchResult {
    await withCheckedContinuation { continuation in engine.dispatch { continuation.resume(returning: $0) } }
}

/// SPEC D4: one log of every type, as the destination tests read them back: a session around an event `Viewed`
/// (`n` 3, `price` 9.5, `hd` true), a screen `Cart` at `/cart`, user properties (`plan` pro), an identify as `user`
/// (`email`), an event `Paid` after it, and a location (41, 29, 5 m).
func trackEveryLogType(_ engine: OutboxEngine, user: String = "u-7") throws {
    try engine.startSession()
    try engine.trackEvent("Viewed", properties: ["n": .int(3), "price": .double(9.5), "hd": .bool(true)])
    try engine.trackScreen(title: "Cart", path: "/cart")
    try engine.setUserProperties(["plan": "pro"])
    try engine.identify(userId: user, traits: ["email": "a@example.com"])
    try engine.trackEvent("Paid")
    try engine.sendLocation(latitude: 41.0, longitude: 29.0, accuracy: 5)
    try engine.endSession()
}

/// Short intervals so that end-to-end tests run in seconds (SPEC defaults stay the defaults).
func fastConfiguration(store: String, endpoint: String) -> Configuration {
    var configuration = Configuration(storePath: store)
    configuration.testingAllowsValuesBelowBounds = true
    configuration.endpoint = endpoint
    configuration.appSecret = "e2e-secret"
    configuration.transmissionInterval = .milliseconds(50)
    configuration.criticalTransmissionInterval = .milliseconds(20)
    configuration.retryIntervals = [.milliseconds(100), .milliseconds(200), .milliseconds(400)]
    configuration.probeInterval = nil
    // SPEC R9–R10 on, in milliseconds instead of seconds: a test that proves R3–R5 alone sets it to nil.
    configuration.recoveryProbe = RecoveryProbe(initialInterval: .milliseconds(50), maxInterval: .milliseconds(400),
                                                longFaultInterval: .milliseconds(400), drainJitter: .zero)
    configuration.requestTimeout = .seconds(5)
    // Manual sessions: the server receives exactly the logs a test tracked (no startSession log, SPEC A1–A2).
    configuration.sessionTracking = .manual
    return configuration
}

/// Runs a command to completion and returns its exit status and standard output.
@discardableResult
func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = readToEnd(pipe.fileHandleForReading)
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Everything `handle` gives until end of file. Foundation's `readDataToEndOfFile()` traps when a read is
/// interrupted by a signal (EINTR), which the many children the suite runs at once make likely (SIGCHLD): this
/// reads again instead.
func readToEnd(_ handle: FileHandle) -> Data {
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
        if count > 0 {
            data.append(contentsOf: buffer[0..<count])
        } else if count == 0 || errno != EINTR {
            return data
        }
    }
}

/// What one read of `handle` gives (waiting for some), as `availableData` does, without its trap on EINTR.
func readAvailable(_ handle: FileHandle) -> Data {
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
        if count >= 0 { return Data(buffer[0..<count]) }
        if errno != EINTR { return Data() }
    }
}

func jsonObject(_ text: String) -> [String: Any] {
    let line = text.split(separator: "\n").last.map(String.init) ?? ""
    return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? [:]
}

func wallMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

/// Runs the real `outbox` binary to completion; stdout and stderr go to files, so that neither pipe can fill
/// while the other is read. `environment` is added to this process's; `watch`, when given, sees the child's pid every
/// 20 ms while it runs (it samples a running process: there is nothing to await).
func runOutbox(_ arguments: [String], environment: [String: String] = [:], in dir: TempDirectory,
               watch: ((Int32) -> Void)? = nil) throws -> (status: Int32, output: String, errors: String) {
    let child = try OutboxChild(arguments, environment: environment, in: dir, onExit: nil)
    if let watch {
        while child.process.isRunning {
            watch(child.process.processIdentifier)
            usleep(20_000)
        }
    }
    child.process.waitUntilExit()
    return try child.finish()
}

/// `runOutbox` that awaits the child's exit instead of blocking a thread of the cooperative pool (two on two
/// cores): tests that wait on a server's timed scenario run side by side.
func runOutboxAwaiting(_ arguments: [String], in dir: TempDirectory) async throws -> (status: Int32, output: String, errors: String) {
    var child: OutboxChild?
    try await withCheckedThrowingContinuation { (exited: CheckedContinuation<Void, Error>) in
        do {
            // The handler is set before the child starts: its exit cannot come first.
            child = try OutboxChild(arguments, environment: [:], in: dir) { exited.resume() }
        } catch {
            exited.resume(throwing: error)
        }
    }
    guard let child else { throw CocoaError(.fileNoSuchFile) }
    return try child.finish()
}

/// The `outbox` child of `runOutbox`, its output in files.
private struct OutboxChild: @unchecked Sendable {
    let process = ChildProcess()
    let outPath: String, errPath: String
    let out: FileHandle, err: FileHandle

    init(_ arguments: [String], environment: [String: String], in dir: TempDirectory, onExit: (@Sendable () -> Void)?) throws {
        outPath = dir.path + "/stdout-\(UUID().uuidString)"
        errPath = dir.path + "/stderr-\(UUID().uuidString)"
        FileManager.default.createFile(atPath: outPath, contents: nil)
        FileManager.default.createFile(atPath: errPath, contents: nil)
        out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.executableURL = URL(fileURLWithPath: builtProduct("outbox"))
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.standardOutput = out
        process.standardError = err
        if let onExit { process.terminationHandler = { _ in onExit() } }
        try process.run()
    }

    /// Once the child exited: its status and what it wrote.
    func finish() throws -> (status: Int32, output: String, errors: String) {
        try out.close()
        try err.close()
        let output = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        let errors = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return (process.terminationStatus, output, errors)
    }
}

/// The events of `vendor` the mock holds, as sent (the first JSON line of each record).
func vendorEvents(_ server: MockServer, _ vendor: Vendor) -> [[String: Any]] {
    server.vendorEvents().filter { $0.vendor == vendor }.compactMap { jsonLines($0.json).first }
}

/// SPEC D7: `outbox emit` of `count` events to `vendor`'s wire on an in-process mock running the named scenario
/// (`adjust` changes it first), waited until delivered, and what the mock then holds — the set-up the destination
/// tests share. `arguments` are the wire's own flags (its credentials), `path` goes after the mock's URL (Sensors'
/// `/sa?project=…`), `settings` the intervals and batch size.
struct EmitRun {
    var status: Int32
    var output: String
    var errors: String
    /// `emit`'s closing object: tracked, delivered, dead_lettered, pending, …
    var summary: [String: Any]
    var events: [[String: Any]]
    var stats: MockStats.VendorStats?
    /// The mock's own counts (its answers by status).
    var mock: MockStats

    func count(_ key: String) -> Int? { summary[key] as? Int }
    /// Whether anything shows `secret`: the output, the errors, the summary.
    func shows(_ secret: String) -> Bool { output.contains(secret) || errors.contains(secret) }
}

func emitToMock(_ vendor: Vendor, scenario: String = "ok", adjust: ((inout Scenario) -> Void)? = nil, count: Int,
                arguments: [String] = [], path: String = "", settings: [String] = OTLPDestinationTests.fast,
                timeout: Int = 60, in dir: TempDirectory) async throws -> EmitRun {
    var loaded = try Scenario.load(path: MockServer.scenarioPath(scenario))
    adjust?(&loaded)
    let server = try startMock(scenario: loaded); defer { try? server.stop() }
    let result = try await runOutboxAwaiting(["emit", "--store", dir.file(), "--count", "\(count)", "--destination",
                                              vendor.rawValue, "--endpoint", server.baseURL + path, "--wait-delivered",
                                              "--timeout", "\(timeout)"] + arguments + settings, in: dir)
    let stats = server.stats()
    return EmitRun(status: result.status, output: result.output, errors: result.errors,
                   summary: jsonLines(result.output).first ?? [:], events: vendorEvents(server, vendor),
                   stats: stats.vendors[vendor.rawValue], mock: stats)
}

/// The same through the library: an engine delivering to `vendor`'s wire on an in-process mock (the wire's test
/// credentials; `configure` changes the rest), `track` called on it, waited until delivered; then its status, dead
/// letters and install id, and the vendor's events at the mock.
struct TrackRun {
    var delivered: Bool
    var status: EngineStatus
    var letters: [DeadLetterRecord]
    var install: String
    var events: [[String: Any]]
    var stats: MockStats.VendorStats?
}

func trackToMock(_ vendor: Vendor, path: String = "", configure: (inout Configuration) -> Void = { _ in },
                 track: (OutboxEngine) throws -> Void) async throws -> TrackRun {
    let dir = TempDirectory(); defer { dir.remove() }
    let server = try startMock(); defer { try? server.stop() }
    var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL + path)
    switch vendor {
    case .amplitude: configuration.destination = .amplitude; configuration.apiKey = "amp-test-key"
    case .mixpanel: configuration.destination = .mixpanel; configuration.projectToken = "mp-test-token"
    case .ga4: configuration.destination = .ga4; configuration.measurementId = "G-TEST123"; configuration.apiSecret = "s3cr3t"
    case .sensors: configuration.destination = .sensors
    default: Issue.record("no test credentials for \(vendor)")
    }
    configure(&configuration)
    let engine = try OutboxEngine(configuration: configuration)
    defer { engine.shutdown() }
    try track(engine)
    let delivered = await engine.waitUntilDelivered(timeout: .seconds(20))
    return TrackRun(delivered: delivered, status: try await engine.status(), letters: try await engine.deadLetters(),
                    install: engine.installID.uuidString.lowercased(), events: vendorEvents(server, vendor),
                    stats: server.stats().vendors[vendor.rawValue])
}
