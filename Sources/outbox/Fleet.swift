import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import Outbox
import OutboxFleet

/// SPEC F1–F4: N simulated installs, each with its own store and engine, on a few shared loop threads, against one
/// ingestion server; at the end one JSON object, and `lost` counted against what the mock recorded.
struct Fleet: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Simulate N installs against one ingestion server and account for every log (SPEC F1–F4).")

    @Option(help: "Simulated installs.") var devices: Int
    @Option(help: "Events each device tracks.") var events: Int
    @Option(help: "Events per second per device (default: as fast as back-pressure allows).") var rate: Double?
    @Option(help: "Seeds who goes offline and when.") var seed: UInt64 = 1
    @Option(help: "Ingestion server base URL (default: the mock, started in-process).") var endpoint: String?
    @Option(name: .customLong("accounting-endpoint"),
            help: ArgumentHelp("An outbox-mock whose records hold part of the run, read directly (repeatable; default the endpoint). A log two of them recorded is a cross-mock duplicate (SPEC F6).", valueName: "url"))
    var accountingEndpoints: [String] = []
    @Option(help: ArgumentHelp("The in-process mock's scenario: a named one (flaky, outage, lost-ack, …) or a file (SPEC X2).",
                               valueName: "name-or-path"))
    var scenario: String?
    @Option(help: "App secret the devices send (default: \(Fleet.testSecret), a fixed test secret; also OUTBOX_APP_SECRET).")
    var appSecret: String?
    @Option(help: ArgumentHelp("A file holding the app secret (one final newline ignored), kept out of argv.", valueName: "path"))
    var appSecretFile: String?
    @Option(help: "Fraction of the devices that go offline once, at a random moment of their tracking.")
    var offlineFraction: Double = 0
    @Option(name: .customLong("offline-s"), help: "Seconds an offline device stays offline.") var offlineSeconds: Double = 10
    @Option(help: "Logs per request (1–500).") var batchSize: Int?
    @Option(help: "Transmission interval in seconds (SPEC C2).") var interval: Double?
    @Option(help: "Retry intervals in seconds, comma-separated (SPEC R3).") var retryIntervals: String?
    @OptionGroup var recovery: RecoveryOptions
    @Flag(help: "Allow values below the user-facing bounds (short intervals for tests).") var testing = false
    @Option(help: "Directory for the devices' stores (default: a temporary directory, removed at the end).") var dir: String?
    @Option(help: "Write report.html and summary.json into this directory (SPEC F3).") var report: String?
    @Option(help: "Serve the fleet's counters for Prometheus at http://127.0.0.1:P/metrics (0: a free port).") var metricsPort: Int?
    @Option(help: "Number of the first device (runs on several machines take disjoint ranges).") var deviceOffset: Int = 0
    @Option(help: "Seconds the fleet waits for delivery once tracking ended; what is left counts as pending.")
    var timeout: Double = 600
    @OptionGroup var destination: DestinationOptions
    @OptionGroup var to: ToOptions
    @OptionGroup var tls: TLSOptions
    @OptionGroup var app: AppIdentityOptions
    @OptionGroup var storeKey: StoreKeyOption
    @OptionGroup var logging: LoggingOptions

    /// What the devices send as `App-Secret` without `--app-secret` (SPEC F5; docs/CLI.md).
    static let testSecret = "fleet-secret"

    func validate() throws {
        guard devices >= 1 else { throw ValidationError("--devices must be 1 or more, got \(devices)") }
        guard events >= 0 else { throw ValidationError("--events must be 0 or more, got \(events)") }
        if let rate, !(rate > 0 && rate.isFinite) { throw ValidationError("--rate must be a positive number of events per second") }
        guard (0...1).contains(offlineFraction) else {
            throw ValidationError("--offline-fraction takes a fraction from 0 to 1, got \(offlineFraction)")
        }
        _ = try Emit.duration(seconds: offlineSeconds, option: "--offline-s")
        _ = try Emit.duration(seconds: timeout, option: "--timeout")
        if let interval { _ = try BoundedFlag.interval.value(interval, testing: testing) }
        if let batchSize { _ = try BoundedFlag.batchSize.value(Double(batchSize), testing: testing) }
        _ = try parsedRetryIntervals()
        if endpoint != nil && scenario != nil {
            throw ValidationError("--scenario configures the in-process mock; give an external mock its scenario with PUT /_mock/scenario")
        }
        // SPEC D15: several destinations go in `--to` alone; one without endpoint= sends to the run's mock.
        try to.refuseBeside(destination, tls, endpoint: endpoint, appSecret: appSecret, appSecretFile: appSecretFile)
        _ = try toDestinations()
        try DestinationOptions.checkEndpoint(endpoint)
        try destination.checkFields(endpoint: endpoint)
        for url in accountingEndpoints where !url.lowercased().hasPrefix("http://") {
            throw ValidationError("--accounting-endpoint takes an outbox-mock's http:// URL, got \(url)")
        }
        _ = try SecretOption.appSecret.resolve(value: appSecret, file: appSecretFile)
        if let metricsPort, !(0...65535).contains(metricsPort) {
            throw ValidationError("--metrics-port takes a TCP port from 0 to 65535, got \(metricsPort)")
        }
        guard deviceOffset >= 0 else { throw ValidationError("--device-offset must be 0 or more, got \(deviceOffset)") }
    }

    /// SPEC D15: every device's destinations, the same list; a credential not given is a test one, as with
    /// `--destination` (the fleet's mock takes any).
    func toDestinations() throws -> [NamedDestination] {
        try to.destinations(endpointRequired: false, testKeys: true, testAppSecret: Self.testSecret)
    }

    func parsedRetryIntervals() throws -> [Duration]? {
        guard let retryIntervals else { return nil }
        return try BoundedFlag.retryIntervals.list(retryIntervals, testing: testing).map { .milliseconds($0) }
    }

    func run() throws {
        let logger = try logging.makeLogger(label: "outbox.fleet")
        var options = FleetOptions(devices: devices, events: events, template: try deviceTemplate(logger: logger),
                                   // SPEC K3: the report shows the command, never a secret given in it.
                                   commandLine: (["outbox"] + SecretOption.redacting(Array(CommandLine.arguments.dropFirst())))
                                       .joined(separator: " "))
        options.rate = rate
        options.seed = seed
        options.endpoint = endpoint
        options.accountingEndpoints = accountingEndpoints
        options.scenario = scenario
        options.offlineFraction = offlineFraction
        options.offlineSeconds = offlineSeconds
        options.dir = dir
        options.report = report
        options.metricsPort = metricsPort
        options.deviceOffset = deviceOffset
        options.timeout = timeout
        // The wire the accounting reads: with `--to`, the first destination's.
        options.destination = options.template.destinations.first?.destination ?? destination.destination
        let run = FleetRun(options: options, logger: logger)
        let code: Int32
        do {
            code = try runBlocking { try await run.run() }
        } catch let exit as FleetExit {
            throw ExitCode(exit.code)
        } catch let error as FleetError {
            throw CLIError(description: error.description)
        }
        if code != 0 { throw ExitCode(code) }
    }

    /// Every device's configuration but its endpoint, store, loop and transport (the run sets those): sized for
    /// thousands of engines in one process.
    func deviceTemplate(logger: Logger) throws -> Configuration {
        var template = Configuration(storePath: "")
        template.logger = logger
        template.appVersion = "fleet"
        app.apply(to: &template)
        if to.isEmpty {
            template.appSecret = try SecretOption.appSecret.resolve(value: appSecret, file: appSecretFile) ?? Self.testSecret
            tls.apply(to: &template)
            try destination.apply(to: &template, testKeys: true)
        } else {
            template.destinations = try toDestinations()
        }
        // SPEC K1: every device's store sealed with the one key.
        template.storeKey = try storeKey.key()
        template.testingAllowsValuesBelowBounds = testing
        // Each device's session spans its tracking, started and ended by the fleet (FleetSessions.swift, SPEC A2).
        template.sessionTracking = .manual
        // One watcher for the whole fleet (FleetNetwork.swift); one per engine would be N netlink sockets.
        template.watchesNetwork = false
        // A device's store holds its backlog; the defaults suit one engine per process, not thousands (SPEC F4).
        template.pageCacheSize = 64 * 1024
        template.diskReserveSize = 64 * 1024
        // SPEC F4: two descriptors a store (no -shm, no .lock held); nothing else reads the stores while the run goes.
        template.exclusiveStoreLock = true
        if let batchSize { template.batchSize = batchSize }
        if let interval {
            template.transmissionInterval = .milliseconds(try BoundedFlag.interval.value(interval, testing: testing))
            template.criticalTransmissionInterval = min(template.criticalTransmissionInterval, template.transmissionInterval)
        }
        if let intervals = try parsedRetryIntervals() {
            template.retryIntervals = intervals
            // A test fleet's devices that used up their retries try again soon, not after SPEC's 30 minutes (R5).
            if testing, let longest = intervals.max() { template.probeInterval = longest }
        }
        recovery.apply(to: &template, testing: testing)
        return template
    }
}
