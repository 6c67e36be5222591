import ArgumentParser
import FoundationEssentials
import Glibc
import Histogram
import Logging
import Outbox
import OutboxMock
import Synchronization

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
    @Option(help: "Scenario file for the in-process mock (SPEC X2).") var scenario: String?
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
    @Flag(help: "Allow values below the user-facing bounds (short intervals for tests).") var testing = false
    @Option(help: "Directory for the devices' stores (default: a temporary directory, removed at the end).") var dir: String?
    @Option(help: "Write report.html and summary.json into this directory (SPEC F3).") var report: String?
    @Option(help: "Serve the fleet's counters for Prometheus at http://127.0.0.1:P/metrics (0: a free port).") var metricsPort: Int?
    @Option(help: "Number of the first device (runs on several machines take disjoint ranges).") var deviceOffset: Int = 0
    @Option(help: "Seconds the fleet waits for delivery once tracking ended; what is left counts as pending.")
    var timeout: Double = 600
    @OptionGroup var destination: DestinationOptions
    @OptionGroup var logging: LoggingOptions

    /// What the devices send as `App-Secret` without `--app-secret` (SPEC F5; docs/CLI.md).
    static let testSecret = "fleet-secret"

    /// Descriptors one open device holds (SPEC F4): its store's database and WAL (exclusive locking: no `-shm`, no
    /// `.lock` beyond the open). The commit mark and the WAL's write-back descriptor are open only while the loop
    /// writes them, one device at a time: they are counted per loop. Its requests go through its loop's shared transport.
    static let descriptorsPerDevice = 2
    /// Requests in curl at once per loop, every device of the loop together (`SharedTransport`).
    static let transfersPerLoop = 32
    /// One loop's: its libuv descriptors (epoll, the async's eventfd, signal pipe), curl's wake-up pair, the commit
    /// mark and write-back descriptors the loop opens for a moment, a socket per transfer in flight and up to one
    /// more per pooled idle connection; an in-process mock holds the server's end of each connection too.
    static func descriptorsPerLoop(inProcessMock: Bool) -> Int {
        let sockets = 2 * transfersPerLoop + 1
        return 10 + (inProcessMock ? 2 * sockets : sockets)
    }
    /// The process's own: stdio, the mock's listener and threads, the sampler's connection.
    static let descriptorsBase = 64

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
        try DestinationOptions.checkEndpoint(endpoint)
        _ = try SecretOption.appSecret.resolve(value: appSecret, file: appSecretFile)
        if let metricsPort, !(0...65535).contains(metricsPort) {
            throw ValidationError("--metrics-port takes a TCP port from 0 to 65535, got \(metricsPort)")
        }
        guard deviceOffset >= 0 else { throw ValidationError("--device-offset must be 0 or more, got \(deviceOffset)") }
    }

    func parsedRetryIntervals() throws -> [Duration]? {
        guard let retryIntervals else { return nil }
        return try BoundedFlag.retryIntervals.list(retryIntervals, testing: testing).map { .milliseconds($0) }
    }

    func run() throws {
        let code = try runBlocking { try await self.runAsync() }
        if code != 0 { throw ExitCode(code) }
    }

    func runAsync() async throws -> Int32 {
        let logger = try logging.makeLogger(label: "outbox.fleet")
        let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let loopCount = min(cores, devices)
        let maxOpen = try checkDescriptorLimit(loops: loopCount, logger: logger)
        let metrics = FleetMetricsBoard(devices: devices)
        let metricsServer = try FleetMetricsServer.start(port: metricsPort, board: metrics)
        defer { metricsServer?.stop() }

        // The stores.
        let temporary = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        let base = dir ?? temporary + (temporary.hasSuffix("/") ? "" : "/") + "outbox-fleet-\(getpid())-\(monotonicNs() % 1_000_000)"
        do {
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        } catch {
            throw CLIError(description: "outbox fleet: cannot create the store directory \(base): \(error)")
        }
        defer { if dir == nil { try? FileManager.default.removeItem(atPath: base) } }

        // The server: the mock in-process unless --endpoint.
        var server: MockServer? = nil
        if endpoint == nil {
            do {
                let loaded = try scenario.map { try Scenario.load(path: $0) }
                let mock = try MockServer(configuration: .init(scenario: loaded))
                try mock.start()
                server = mock
            } catch {
                throw CLIError(description: "outbox fleet: cannot start the mock: \(error)")
            }
        }
        defer { try? server?.stop() }
        let target = endpoint ?? server?.baseURL ?? ""
        let client = FleetMockClient(endpoint: target)
        var baseline: FleetMockStats? = nil
        if let client {
            do {
                baseline = try FleetMockStats.read(client)
            } catch FleetMockClient.Failure.connect(let reason) where endpoint != nil {
                // Said now, not after every device has retried through the whole run.
                throw CLIError(description: "outbox fleet: cannot reach --endpoint \(target): \(reason); start the server first")
            } catch {}
        }
        if baseline == nil {
            logger.warning("the server does not answer GET /_mock/stats as an outbox-mock does: lost cannot be counted",
                           metadata: ["outbox.endpoint": "\(target)"])
        }

        // Who goes offline, and at which of their events (seeded, SPEC F1).
        var random = FleetRandom(seed: seed)
        let offlineCount = Int((offlineFraction * Double(devices)).rounded())
        var order = Array(0..<devices)
        random.shuffle(&order)
        let offline = Set(order.prefix(offlineCount))
        var specs: [FleetDeviceSpec] = []
        specs.reserveCapacity(devices)
        for index in 0..<devices {
            let at: Int? = offline.contains(index) ? (events > 0 ? random.below(events) : 0) : nil
            specs.append(FleetDeviceSpec(number: deviceOffset + index, offlineAt: at, phase: random.unit()))
        }

        var plan = FleetPlan(events: events, rate: rate,
                             offlineNs: UInt64((offlineSeconds * 1e9).rounded()),
                             runID: Self.runID(), configuration: try deviceConfiguration(base: base, endpoint: target, logger: logger))
        plan.maxOpenPerLoop = maxOpen >= devices ? .max : max(1, maxOpen / loopCount)
        plan.drainMs = UInt64((timeout * 1000).rounded())
        plan.transfersPerLoop = Self.transfersPerLoop

        // One loop per core, devices dealt round-robin.
        let rssStartKiB = FleetResources.rssKiB()
        let fdsStart = FleetResources.openDescriptors()
        var loops: [FleetLoop] = []
        do {
            for index in 0..<loopCount {
                let loop = FleetLoop(index: index, plan: plan)
                try loop.start(stride(from: index, to: devices, by: loopCount).map { specs[$0] })
                loops.append(loop)
            }
        } catch {
            for loop in loops { loop.stop() }
            throw CLIError(description: "outbox fleet: cannot start a loop: \(error)")
        }
        let network = FleetNetwork.start(loops: loops, endpointIsLoopback: FleetNetwork.isLoopback(target), logger: logger)
        logger.notice("fleet started", metadata: ["outbox.devices": "\(devices)", "outbox.loops": "\(loopCount)",
                                                  "outbox.endpoint": "\(target)", "outbox.run": "\(plan.runID)"])

        // Tracking, with the progress line and the report's samples beside it.
        let sampler = FleetSampler(loops: loops, client: baseline == nil ? nil : client, baseline: baseline,
                                   devices: devices, terminal: isatty(2) != 0, storeBase: Self.resolved(base) + "/")
        sampler.start()
        metrics.attach(loops: loops, sampler: sampler)
        let startNs = monotonicNs()
        // Each loop reports twice: every device tracked everything, then every device's drain ended (its store empty
        // and closed, or --timeout passed for it).
        let tracked = FleetCountdown(loops.count)
        await withTaskGroup(of: Void.self) { group in
            for loop in loops {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        loop.begin(startNs: startNs, done: { tracked.arrive() }, settled: { continuation.resume() })
                    }
                }
            }
        }
        let trackingEndNs = tracked.lastArrivalNs ?? monotonicNs()
        let endNs = monotonicNs()
        sampler.stop()

        // What the run cost, measured before the accounting reads the mock's records.
        let peakRSSKiB = FleetResources.peakRSSKiB()
        let cpuSeconds = FleetResources.cpuSeconds()
        let fds = sampler.descriptors()
        if let error = loops.lazy.compactMap(\.openError).first {
            network?.close()
            for loop in loops { loop.stop() }
            throw CLIError(description: "outbox fleet: cannot start a device: \(error)")
        }
        let engines = await withTaskGroup(of: [OutboxEngine].self) { group in
            for loop in loops { group.addTask { await loop.openEngines() } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        if !engines.isEmpty {
            logger.warning("devices left open at the end: their stores hold what they did not deliver (pending) or dead letters",
                           metadata: ["outbox.devices": "\(engines.count)"])
        }

        // Where this destination's records keep what the accounting counts (SPEC F2a).
        let fields = FleetLineFields(try destination.parsedDestination())
        // Each store's own count (SPEC F2): pending, dead-lettered, evicted; and the dead letters' ordinals.
        var stores: [String: FleetStoreCount] = [:]
        for engine in engines {
            let install = engine.installID.uuidString.lowercased()
            guard let status = try? await engine.status() else { continue }
            var count = FleetStoreCount(pending: status.pendingNormal + status.pendingCritical + status.inFlight,
                                        deadLettered: status.deadLetters, evicted: status.evicted,
                                        delivered: status.delivered, deadOrdinals: [],
                                        expired: status.expired, serverRejected: status.serverRejected)
            if status.deadLetters > 0, let letters = try? await engine.deadLetters() {
                count.deadOrdinals = Set(letters.compactMap { FleetAccounting.ordinal(inLogJSON: $0.log, fields: fields) })
            }
            stores[install] = count
        }
        network?.close()
        for loop in loops { loop.stop() }
        let counts = loops.flatMap(\.finalCounts)
        for loop in loops { stores.merge(loop.closedStores) { open, _ in open } }

        // The mock's records (SPEC F2).
        var accounting = FleetAccounting(devices: counts, stores: stores, deviceOffset: deviceOffset, events: events)
        let finalStats = client.flatMap { try? FleetMockStats.read($0) }
        var recordsRead = false
        if let client, baseline != nil, finalStats != nil {
            do {
                try accounting.readLogs(client: client, runID: plan.runID, fields: fields)
                recordsRead = true
            } catch {
                logger.error("cannot read GET /_mock/logs: \(error)")
            }
        }

        let seconds = Double(endNs - startNs) / 1e9
        let summary = FleetSummary(
            devices: devices, tracked: accounting.tracked,
            delivered: recordsRead ? accounting.uniqueDelivered : accounting.engineDelivered,
            duplicates: (finalStats?.logsDuplicate ?? 0) - (baseline?.logsDuplicate ?? 0),
            deadLettered: accounting.deadLettered, evicted: accounting.evicted, pending: accounting.pending,
            lost: recordsRead ? accounting.lost : nil,
            eventsPerSecond: seconds > 0 ? Double(recordsRead ? accounting.uniqueDelivered : accounting.engineDelivered) / seconds : 0,
            delay: recordsRead ? accounting.delayPercentiles : nil,
            peakRSSKiB: peakRSSKiB, cpuSeconds: cpuSeconds)
        let json = summary.json
        metrics.finish(summary, delays: accounting.histogram)
        print(json)
        fflush(nil)
        logger.notice("fleet resources", metadata: [
            "outbox.rss_start_kib": "\(rssStartKiB)", "outbox.peak_rss_kib": "\(peakRSSKiB)",
            "outbox.kib_per_device": "\((peakRSSKiB - rssStartKiB) / max(1, devices))",
            "outbox.fds_start": "\(fdsStart)", "outbox.fds_peak": "\(fds.peak)",
            "outbox.peak_open_devices": "\(fds.peakOpen)", "outbox.devices_at_once_allowed": "\(maxOpen)",
            "outbox.fds_per_device": "\(cFormat("%.2f", fds.perOpenDevice(start: fdsStart)))",
            "outbox.store_fds_per_device": "\(cFormat("%.2f", fds.maxStorePerOpen))",
            "outbox.tracking_s": "\(cFormat("%.2f", Double(trackingEndNs - startNs) / 1e9))",
        ])

        if let report {
            do {
                try FleetReport(summary: summary, json: json, samples: sampler.samples(), histogram: accounting.histogram,
                                title: "outbox fleet — \(devices) devices × \(events) events", command: Self.commandLine(),
                                metrics: metricsServer.map { _ in FleetMetrics.render(metrics.snapshot()) })
                    .write(to: report)
            } catch {
                writeStandardError("outbox fleet: cannot write the report to \(report): \(error)\n")
            }
        }

        guard recordsRead else { return 2 }
        if accounting.lost != 0 {
            for line in accounting.missingLines(limit: 10) { writeStandardError(line + "\n") }
            return 1
        }
        return 0
    }

    /// SPEC F4: how many devices may be open at once within RLIMIT_NOFILE (raising the soft limit up to the hard one
    /// first). When all of them do not fit, says what they would need and admits them as others close; refuses only
    /// when not even one device per loop fits.
    func checkDescriptorLimit(loops: Int, logger: Logger) throws -> Int {
        let fixed = Self.descriptorsBase + loops * Self.descriptorsPerLoop(inProcessMock: endpoint == nil)
        let needed = fixed + devices * Self.descriptorsPerDevice
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return devices }
        if limit.rlim_cur < rlim_t(needed) && limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, rlim_t(needed))
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        if limit.rlim_cur >= rlim_t(needed) { return devices }
        let fits = max(0, (Int(limit.rlim_cur) - fixed) / Self.descriptorsPerDevice)
        let what = "\(devices) devices open at once need about \(needed) file descriptors (\(Self.descriptorsPerDevice) "
            + "per device + \(fixed) for \(loops) loops and the process); RLIMIT_NOFILE allows \(limit.rlim_cur) "
            + "(hard limit \(limit.rlim_max))"
        guard fits >= loops else {
            throw CLIError(description: "outbox fleet: \(what), not even one device per loop. Raise the limit (ulimit -n \(needed)).")
        }
        logger.notice("\(what): at most \(fits) devices are open at once; the others start as earlier ones finish and close")
        return fits
    }

    /// Each device's engine: its own store, host-loop mode, sized for thousands in one process.
    func deviceConfiguration(base: String, endpoint: String, logger: Logger) throws
        -> @Sendable (FleetDeviceSpec, UnsafeMutableRawPointer, SharedTransport?) -> Configuration {
        var template = Configuration(storePath: base)
        template.logger = logger
        template.endpoint = endpoint
        template.appSecret = try SecretOption.appSecret.resolve(value: appSecret, file: appSecretFile) ?? Self.testSecret
        template.appVersion = "fleet"
        try destination.apply(to: &template, testKeys: true)
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
        try template.validate()
        let configured = template
        return { spec, loop, shared in
            var configuration = configured
            configuration.sharedTransport = shared
            let directory = base + "/device-\(spec.number)"
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            configuration.storePath = directory + "/outbox.sqlite"
            configuration.runMode = .hostLoop(loop)
            return configuration
        }
    }

    /// `path` with symbolic links and relative parts resolved, as /proc/self/fd names the files under it.
    static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }

    /// Tells this run's events from others' on a shared mock: the process and the moment, in base 36.
    static func runID() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return String(Int(getpid()), radix: 36) + "-" + String(Int(now.tv_sec) * 1000 + now.tv_nsec / 1_000_000, radix: 36)
    }

    static func commandLine() -> String {
        (["outbox"] + CommandLine.arguments.dropFirst()).joined(separator: " ")
    }
}

/// What one store held at the end (SPEC F2).
struct FleetStoreCount {
    var pending: Int
    var deadLettered: Int
    var evicted: Int
    var delivered: Int
    var deadOrdinals: Set<Int>
    /// SPEC F2a: too old to send (S4), and refused by the server inside an accepted request (D5): settled, not lost.
    var expired = 0
    var serverRejected = 0
}

/// The fleet's seeded choices (who goes offline, when): the mock's SplitMix64, so a seed means the same everywhere.
struct FleetRandom {
    private var source: SeededRandom
    init(seed: UInt64) { source = SeededRandom(seed: seed) }

    mutating func next() -> UInt64 { source.next() }

    /// 0 ..< bound; bound > 0.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    /// 0 ≤ x < 1.
    mutating func unit() -> Double { source.nextUnit() }

    mutating func shuffle(_ items: inout [Int]) {
        guard items.count > 1 else { return }
        for i in stride(from: items.count - 1, to: 0, by: -1) {
            items.swapAt(i, below(i + 1))
        }
    }
}

/// The process's memory, descriptors and CPU (SPEC F1's `peak_rss_kib`, `cpu_s`; F4's per-device figures).
enum FleetResources {
    static func rssKiB() -> Int {
        guard let file = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(file) }
        var size = 0
        var resident = 0
        guard fscanf_two(file, &size, &resident) else { return 0 }
        return resident * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
    }

    private static func fscanf_two(_ file: UnsafeMutablePointer<FILE>, _ a: inout Int, _ b: inout Int) -> Bool {
        var line = [CChar](repeating: 0, count: 256)
        guard fgets(&line, Int32(line.count), file) != nil else { return false }
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let fields = text.split(separator: " ")
        guard fields.count >= 2, let x = Int(fields[0]), let y = Int(fields[1]) else { return false }
        a = x
        b = y
        return true
    }

    static func peakRSSKiB() -> Int {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// The process's open descriptors, and how many of them are files whose path starts with `prefix`.
    static func openDescriptors(under prefix: String?) -> (all: Int, under: Int) {
        guard let prefix else { return (openDescriptors(), 0) }
        guard let directory = opendir("/proc/self/fd") else { return (0, 0) }
        defer { closedir(directory) }
        var all = 0
        var under = 0
        var target = [CChar](repeating: 0, count: 4096)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name != ".", name != ".." else { continue }
            all += 1
            let length = readlink("/proc/self/fd/" + name, &target, target.count - 1)
            guard length > 0 else { continue }
            let path = String(decoding: target.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if path.hasPrefix(prefix) { under += 1 }
        }
        return (max(0, all - 1), under)  // the directory's own descriptor
    }

    static func openDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while readdir(directory) != nil { count += 1 }
        return max(0, count - 3)  // ".", ".." and the directory's own descriptor
    }
}

/// Counts the loops that finished tracking, and when the last one did.
final class FleetCountdown: @unchecked Sendable {
    private let state: Mutex<(left: Int, at: UInt64?)>
    init(_ count: Int) { state = Mutex((count, nil)) }

    func arrive() {
        state.withLock { state in
            state.left -= 1
            if state.left == 0 { state.at = monotonicNs() }
        }
    }

    var lastArrivalNs: UInt64? { state.withLock { $0.at } }
}
