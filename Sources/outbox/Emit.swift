import ArgumentParser
import FoundationEssentials
import Glibc
import Outbox
import OutboxFleet
import OutboxMock
import Synchronization

/// SPEC X3: tracks N events and prints what happened as one JSON object.
struct Emit: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Track N events into a store (SPEC X3). Without --endpoint it only stores.")

    @Option(help: "The SQLite store file.") var store: String
    @Option(help: "How many events to track.") var count: Int
    @Option(help: "Ingestion server base URL; the destination appends its path (appcenter: /logs?api-version=1.0.0, otlp: /v1/logs) unless the URL already ends in it.")
    var endpoint: String?
    @Option(help: "App secret sent with --endpoint (also OUTBOX_APP_SECRET).") var appSecret: String?
    @Option(help: ArgumentHelp("A file holding the app secret (one final newline ignored), kept out of argv.", valueName: "path"))
    var appSecretFile: String?
    @Option(help: "Every K-th event is critical and named P-critical.") var criticalEvery: Int?
    @Option(help: "Event name prefix P.") var namePrefix: String = "emit"
    @Option(help: "Size in bytes of a padding property.") var payloadBytes: Int = 0
    @Option(help: "Events per second (default: as fast as possible).") var rate: Double?
    @Option(help: "maxStorageSize of the store in bytes.") var maxStorageBytes: Int?
    @Option(help: "Logs per request (1–500).") var batchSize: Int?
    @Option(help: "Transmission interval in seconds (SPEC C2).") var interval: Double?
    @Option(help: "Retry intervals in seconds, comma-separated (SPEC R3), e.g. 10,300,1200.") var retryIntervals: String?
    @Flag(help: "Dispatch once tracking ends and wait until the store is empty or --timeout passes.") var waitDelivered = false
    @Option(help: "Seconds --wait-delivered waits at most.") var timeout: Double = 60
    @OptionGroup var tls: TLSOptions
    @OptionGroup var app: AppIdentityOptions
    @OptionGroup var recovery: RecoveryOptions
    @Option(help: "Body compression: fast (default) or zlib:LEVEL, LEVEL 1–9 (SPEC W1).") var compression: String?
    @Flag(help: "Allow values below the user-facing bounds (short intervals for tests).") var testing = false
    @Option(help: ArgumentHelp(
        "Testing only: a file holding a wall-clock offset in milliseconds (an integer, may be negative), re-read every 100 ms and added to the engine's wall clock (not to its boot clock). Also OUTBOX_TESTING_CLOCK_OFFSET_FILE.",
        valueName: "path")) var testingClockOffsetFile: String?
    @OptionGroup var destination: DestinationOptions
    @OptionGroup var to: ToOptions
    @OptionGroup var storeKey: StoreKeyOption
    @Option(help: ArgumentHelp(
        "Rotate the store's key to the key in this file once started (SPEC K1, R8); emit ends when the rotation has.",
        valueName: "path"))
    var newStoreKeyFile: String?
    @OptionGroup var logging: LoggingOptions

    /// SPEC X7: the padding is spread over string properties of at most 125 characters (T3), and an event keeps
    /// at most 20 properties, one of which is `i`: more padding than this would be silently dropped.
    static let maxPayloadBytes = 19 * 125

    func validate() throws {
        guard count >= 0 else { throw ValidationError("--count must be 0 or more, got \(count)") }
        if let criticalEvery, criticalEvery < 1 { throw ValidationError("--critical-every must be 1 or more, got \(criticalEvery)") }
        guard payloadBytes >= 0 else { throw ValidationError("--payload-bytes must be 0 or more, got \(payloadBytes)") }
        guard payloadBytes <= Self.maxPayloadBytes else {
            throw ValidationError("--payload-bytes must be at most \(Self.maxPayloadBytes) (what one event carries: 19 properties of 125 characters, SPEC T3), got \(payloadBytes)")
        }
        if let rate, !(rate > 0) { throw ValidationError("--rate must be a positive number of events per second") }
        // SPEC D15: several destinations go in `--to` alone, each with its endpoint and credentials.
        try to.refuseBeside(destination, tls, endpoint: endpoint, appSecret: appSecret, appSecretFile: appSecretFile)
        if !to.isEmpty { _ = try to.destinations() }
        if waitDelivered && resolvedEndpoint == nil && to.isEmpty { throw ValidationError("--wait-delivered needs --endpoint or --to") }
        try destination.checkCredential(endpoint: resolvedEndpoint) { secret in
            try destination.resolvedCredential(secret) { try SecretOption.appSecret.resolve(value: appSecret, file: appSecretFile) }
        }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive, got \(timeout)") }
        _ = try Self.duration(seconds: timeout, option: "--timeout")
        try DestinationOptions.checkEndpoint(resolvedEndpoint)
        try destination.checkFields(endpoint: resolvedEndpoint)
        if let interval { _ = try BoundedFlag.interval.value(interval, testing: testing) }
        if let batchSize { _ = try BoundedFlag.batchSize.value(Double(batchSize), testing: testing) }
        if let maxStorageBytes { _ = try BoundedFlag.maxStorageBytes.value(Double(maxStorageBytes), testing: testing) }
        _ = try parsedRetryIntervals()
        _ = try parsedCompression()
        if let path = clockOffsetPath, OffsetFileClock.read(path: path) == nil {
            throw ValidationError("--testing-clock-offset-file: \(path) must hold an integer number of milliseconds")
        }
    }

    /// `--endpoint`, else (OTLP) the OpenTelemetry SDKs' environment variable.
    var resolvedEndpoint: String? { endpoint ?? destination.environmentEndpoint() }

    /// The option, else the environment variable (a testing hook like OUTBOX_TESTING_PHASE_FILE).
    var clockOffsetPath: String? {
        if let testingClockOffsetFile { return testingClockOffsetFile }
        guard let value = getenv(OffsetFileClock.environmentVariable), value[0] != 0 else { return nil }
        return String(cString: value)
    }

    func parsedCompression() throws -> BodyCompression? {
        guard let compression else { return nil }
        if let parsed = BodyCompression(argument: compression) { return parsed }
        throw ValidationError("--compression takes fast or zlib:LEVEL with LEVEL 1–9, got '\(compression)'")
    }

    /// Seconds given on the command line as a `Duration`; NaN, infinite, negative or absurd values (beyond a
    /// billion seconds) are a usage error, not a trap in the conversion.
    static func duration(seconds: Double, option: String) throws -> Duration {
        guard seconds.isFinite, (0...1e9).contains(seconds) else {
            throw ValidationError("\(option) takes a number of seconds from 0 to 1e9, got \(seconds)")
        }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    func parsedRetryIntervals() throws -> [Duration]? {
        guard let retryIntervals else { return nil }
        return try BoundedFlag.retryIntervals.list(retryIntervals, testing: testing).map { .milliseconds($0) }
    }

    func run() throws {
        try runBlocking { try await self.runAsync() }
    }

    /// The engine's configuration from the options, without the logger (`make fuzz` checks it on any arguments).
    func engineConfiguration() throws -> Configuration {
        var configuration = Configuration(storePath: store)
        configuration.testingAllowsValuesBelowBounds = testing
        if let path = clockOffsetPath { configuration.clock = OffsetFileClock(path: path) }
        // Only the N events go into the store (no startSession log, SPEC A2): tracked = delivered + pending + ….
        configuration.sessionTracking = .manual
        if let maxStorageBytes { configuration.maxStorageSize = maxStorageBytes }
        configuration.storeKey = try storeKey.key()
        app.apply(to: &configuration)
        if to.isEmpty {
            configuration.endpoint = resolvedEndpoint
            configuration.appSecret = try SecretOption.appSecret.resolve(value: appSecret, file: appSecretFile) ?? ""
            tls.apply(to: &configuration)
            try destination.apply(to: &configuration)
        } else {
            configuration.destinations = try to.destinations()
        }
        if let batchSize { configuration.batchSize = batchSize }
        if let interval {
            configuration.transmissionInterval = .milliseconds(try BoundedFlag.interval.value(interval, testing: testing))
            configuration.criticalTransmissionInterval = min(configuration.criticalTransmissionInterval, configuration.transmissionInterval)
        }
        if let intervals = try parsedRetryIntervals() { configuration.retryIntervals = intervals }
        recovery.apply(to: &configuration, testing: testing)
        if let compression = try parsedCompression() { configuration.bodyCompression = compression }
        return configuration
    }

    func runAsync() async throws {
        var configuration = try engineConfiguration()
        configuration.logger = try logging.makeLogger()
        let engine: OutboxEngine
        do {
            engine = try OutboxEngine(configuration: configuration)
        } catch {
            throw CLIError(description: "outbox emit: \(error)")
        }
        if let newStoreKeyFile {
            do {
                let key = try StoreKey(contentsOfFile: newStoreKeyFile)
                try engine.update { $0.storeKey = key }
            } catch {
                engine.shutdown()
                throw CLIError(description: "outbox emit: --new-store-key-file: \(error)")
            }
        }
        var tracked = 0
        var rejected = 0
        // The padding property is a string; one property holds at most 125 characters (SPEC T3), so larger
        // paddings are spread over several properties.
        var padding: [String: PropertyValue] = [:]
        var remaining = payloadBytes
        var index = 0
        while remaining > 0 && padding.count < 19 {
            let size = min(remaining, 125)
            padding[cFormat("pad%02d", index)] = .string(String(repeating: "x", count: size))
            remaining -= size
            index += 1
        }
        let start = Date()
        // Time spent inside the tracking calls alone (`make compare`'s caller cost, beside the other clients').
        var inCallsNs: UInt64 = 0
        for ordinal in 0..<count {
            if let rate {
                let due = start.addingTimeInterval(Double(ordinal) / rate)
                let wait = due.timeIntervalSinceNow
                if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
            }
            let critical = criticalEvery.map { (ordinal + 1) % $0 == 0 } ?? false
            var properties = padding
            properties["i"] = .int(Int64(ordinal))
            let name = critical ? "\(namePrefix)-critical" : namePrefix
            let callStart = monotonicNs()
            do {
                defer { inCallsNs += monotonicNs() - callStart }
                try engine.trackEvent(name, properties: properties, flags: critical ? .critical : .normal)
                tracked += 1
            } catch {
                rejected += 1
                if rejected == 1 { writeStandardError("outbox emit: \(error)\n") }
            }
        }
        await engine.persisted()
        var stopped = false
        if waitDelivered {
            stopped = await Self.waitDelivered(engine, timeout: try Self.duration(seconds: timeout, option: "--timeout")) == .stopped
        }
        var status = try await engine.status()
        // The rotation seals the stored rows again on the loop, a step at a time: emit ends when it has.
        while newStoreKeyFile != nil && status.rotatingStoreKey {
            try await Task.sleep(for: .milliseconds(10))
            status = try await engine.status()
        }
        engine.shutdown()
        let pending = status.pendingNormal + status.pendingCritical + status.inFlight
        printJSON([
            ("tracked", tracked), ("rejected", rejected + status.rejected), ("delivered", status.delivered),
            ("dead_lettered", status.deadLettered), ("skipped", status.skipped), ("evicted", status.evicted),
            ("expired", status.expired), ("pending", pending), ("retries", status.retries),
            ("disabled", status.disabledReason != nil), ("lost_at_open", status.lostAtOpen),
            ("server_rejected", status.serverRejected), ("in_calls_us", Int(inCallsNs / 1000)),
        ] + (destinationsJSON(status.store.destinations, delivered: true).map { [("destinations", $0)] } ?? []))
        // SPEC R1, R8: nothing more goes out until the configuration changes: waiting longer would change nothing.
        if stopped && pending > 0 {
            let stops = (status.store.destinations ?? [:]).filter { $0.value.sendingStopped }.sorted { $0.key < $1.key }
                .map { "\($0.key): \($0.value.disabledReason ?? "refused")" }
            let reason = stops.isEmpty ? status.store.disabledReason ?? "refused" : stops.joined(separator: "; ")
            writeStandardError("outbox emit: sending stopped (\(reason)); \(pending) logs stay "
                               + "stored until the configuration changes (an update, or the next start)\n")
            throw ExitCode.failure
        }
        // SPEC X3a: waiting for delivery fails when logs are left; dead-lettered ones are settled (counted above).
        if waitDelivered && pending > 0 {
            writeStandardError("outbox emit: \(pending) logs still pending after --timeout \(BoundedFlag.format(timeout)) s (they stay stored)\n")
            throw ExitCode.failure
        }
    }
}

extension Emit {
    enum WaitEnd: Sendable { case drained, timedOut, stopped }

    /// Dispatches, then waits until the store is empty, `timeout` passes, or sending stopped for good (SPEC R1:
    /// 401/403/404, a refused redirect, the TLS identity; R8: only an update or a restart resumes it).
    static func waitDelivered(_ engine: OutboxEngine, timeout: Duration) async -> WaitEnd {
        await withCheckedContinuation { (continuation: CheckedContinuation<WaitEnd, Never>) in
            let end = ResumeOnce(continuation)
            Task {
                let drained = await engine.waitUntilDelivered(timeout: timeout)
                end.resume(drained ? .drained : .timedOut)
            }
            // A dispatch is answered once the requests it started were: a refusal of the first ones shows then.
            engine.dispatch { _ in
                Task { if (try? await engine.status())?.store.sendingStopped == true { end.resume(.stopped) } }
            }
            // A stop after retries (a 503, then a 401) has no event of its own: the status says it.
            Task {
                while !end.isDone {
                    try? await Task.sleep(for: .milliseconds(100))
                    guard let status = try? await engine.status() else { continue }
                    if status.store.sendingStopped { end.resume(.stopped) }
                    // SPEC D16: with several destinations, done once each is drained or stopped, one at least stopped.
                    if let destinations = status.store.destinations?.values, destinations.contains(where: \.sendingStopped),
                       destinations.allSatisfy({ $0.sendingStopped || $0.pending + $0.inFlight == 0 }) {
                        end.resume(.stopped)
                    }
                }
            }
        }
    }
}

/// Resumes a continuation with the first value it is given; later ones are dropped.
final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, Never>?>
    init(_ continuation: CheckedContinuation<T, Never>) { self.continuation = Mutex(continuation) }

    var isDone: Bool { continuation.withLock { $0 == nil } }

    func resume(_ value: T) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}

/// Testing (`make torture`'s clock jumps): the machine's clocks with the wall clock moved by an offset read from a
/// file, so that a driver can step the engine's wall clock while it runs, as an NTP step would, and leave its boot
/// clock alone (faketime would move both). The file is re-read at most every `rereadNs` of boot time; a file that
/// cannot be read or parsed keeps the last offset.
final class OffsetFileClock: OutboxClock, Sendable {
    static let environmentVariable = "OUTBOX_TESTING_CLOCK_OFFSET_FILE"
    static let rereadNs: Int64 = 100_000_000
    private let path: String
    private let system = SystemClock()
    private let state: Mutex<(offsetMs: Int64, readAtNs: Int64?)>

    init(path: String) {
        self.path = path
        state = Mutex((Self.read(path: path) ?? 0, nil))
    }

    func wallMs() -> Int64 {
        let now = system.monoNs()
        let offset = state.withLock { state -> Int64 in
            if let readAt = state.readAtNs, now - readAt < Self.rereadNs { return state.offsetMs }
            if let value = Self.read(path: path) { state.offsetMs = value }
            state.readAtNs = now
            return state.offsetMs
        }
        return system.wallMs() + offset
    }

    func monoNs() -> Int64 { system.monoNs() }

    /// The integer in the file (surrounding spaces and newlines ignored), or nil.
    static func read(path: String) -> Int64? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count > 0, count < buffer.count else { return nil }
        let words = String(decoding: buffer[0..<count], as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard words.count == 1, let word = words.first else { return nil }
        return Int64(word)
    }
}
