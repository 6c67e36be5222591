import Foundation
@_exported import OutboxTestSupport
import OutboxMock
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
/// (`n` 3, `price` 9.5, `hd` true), a screen `Cart` at `/cart`, user properties (`plan` pro), an identify as `u-7`
/// (`email`), an event `Paid` after it, and a location (41, 29, 5 m).
func trackEveryLogType(_ engine: OutboxEngine) throws {
    try engine.startSession()
    try engine.trackEvent("Viewed", properties: ["n": .int(3), "price": .double(9.5), "hd": .bool(true)])
    try engine.trackScreen(title: "Cart", path: "/cart")
    try engine.setUserProperties(["plan": "pro"])
    try engine.identify(userId: "u-7", traits: ["email": "a@example.com"])
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
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
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
    let outPath = dir.path + "/stdout-\(UUID().uuidString)"
    let errPath = dir.path + "/stderr-\(UUID().uuidString)"
    FileManager.default.createFile(atPath: outPath, contents: nil)
    FileManager.default.createFile(atPath: errPath, contents: nil)
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: builtProduct("outbox"))
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    process.standardOutput = out
    process.standardError = err
    try process.run()
    if let watch {
        while process.isRunning {
            watch(process.processIdentifier)
            usleep(20_000)
        }
    }
    process.waitUntilExit()
    try out.close()
    try err.close()
    let output = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let errors = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return (process.terminationStatus, output, errors)
}

