import FoundationEssentials
import Glibc
import Logging
import Outbox
import OutboxMock
import Synchronization

/// One fleet run (SPEC F1–F4): N simulated installs, each with its own store and engine, on a few shared loop threads,
/// against one ingestion server; at the end one JSON object, and `lost` counted against what the mock recorded.
/// Its phases: plan (FleetPlan.swift), run (here: the server, the loops, tracking), account (FleetAccounting.swift),
/// report (FleetReport.swift). Returns the exit status: 0 nothing lost, 1 something lost, 2 loss not counted.
package struct FleetRun {
    let options: FleetOptions
    let logger: Logger

    package init(options: FleetOptions, logger: Logger) {
        self.options = options
        self.logger = logger
    }

    package func run() async throws -> Int32 {
        let devices = options.devices
        let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let loopCount = min(cores, devices)
        let maxOpen = try FleetPlanning.descriptorLimit(devices: devices, loops: loopCount,
                                                        inProcessMock: options.endpoint == nil, logger: logger)
        let metrics = FleetMetricsBoard(devices: devices)
        let metricsServer = try FleetMetricsServer.start(port: options.metricsPort, board: metrics)
        defer { metricsServer?.stop() }

        let base = try makeStoreDirectory()
        defer { if options.dir == nil { try? FileManager.default.removeItem(atPath: base) } }
        let scenario = try loadScenario()
        let server = try startServer(scenario)
        defer { try? server?.stop() }
        let target = options.endpoint ?? server?.baseURL ?? ""
        let http = try BlockingHTTPClient()
        defer { http.close() }
        let client = FleetMockClient(endpoint: target, http: http)
        let baseline = try readBaseline(client, target: target, flag: "--endpoint")
        // SPEC F6: the mocks that account for the run, read directly; by default the one the devices send to, whose
        // client and baseline are those above.
        let accountingClients = options.accountingEndpoints.isEmpty ? [client]
            : options.accountingEndpoints.map { FleetMockClient(endpoint: $0, http: http) }
        let baselines = options.accountingEndpoints.isEmpty ? [baseline]
            : try zip(options.accountingEndpoints, accountingClients).map {
                try readBaseline($1, target: $0, flag: "--accounting-endpoint")
            }

        // The plan.
        var template = options.template
        // Sensors' endpoint is a whole URL with its project: the in-process mock's gets one.
        if template.destinations.isEmpty {
            template.endpoint = options.endpoint ?? template.destination.spec.endpointAtBase.map { $0(target) } ?? target
        }
        // SPEC D15: a destination of the list that names no endpoint sends to the run's server.
        for index in template.destinations.indices where template.destinations[index].endpoint == nil {
            template.destinations[index].endpoint = template.destinations[index].destination.spec.endpointAtBase.map { $0(target) } ?? target
        }
        template.storePath = base
        do {
            try template.validate()
        } catch {
            throw FleetError("outbox fleet: \(error)")
        }
        var plan = FleetPlan(events: options.events, rate: options.rate,
                             offlineNs: UInt64((options.offlineSeconds * 1e9).rounded()), runID: FleetPlanning.runID(),
                             configuration: FleetPlanning.deviceConfiguration(template: template, base: base))
        plan.maxOpenPerLoop = maxOpen >= devices ? .max : max(1, maxOpen / loopCount)
        plan.drainMs = UInt64((options.timeout * 1000).rounded())
        plan.transfersPerLoop = FleetPlanning.transfersPerLoop
        // SPEC F9: the in-process mock's scenario clock starts at the fleet's first tracked event.
        let firstEvent = FleetFirstEvent { server?.restartScenarioClock() }
        plan.firstEvent = firstEvent
        let specs = FleetPlanning.deviceSpecs(options)

        // The run: one loop per core, devices dealt round-robin; tracking, with the progress line and the samples.
        let rssStartKiB = FleetResources.rssKiB()
        let fdsStart = FleetResources.openDescriptors()
        let loops = try startLoops(loopCount, plan: plan, specs: specs)
        let network = FleetNetwork.start(loops: loops, endpointIsLoopback: isLoopbackEndpoint(target), logger: logger)
        logger.notice("fleet started", metadata: ["outbox.devices": "\(devices)", "outbox.loops": "\(loopCount)",
                                                  "outbox.endpoint": "\(maskingCredentials(in: target))",
                                                  "outbox.run": "\(plan.runID)"])
        let sampler = FleetSampler(loops: loops, client: baseline == nil ? nil : client, baseline: baseline,
                                   destination: options.destination, devices: devices, terminal: isatty(2) != 0,
                                   storeBase: FleetPlanning.resolved(base) + "/", server: server)
        sampler.start()
        metrics.attach(loops: loops, sampler: sampler)
        if plan.rate != nil { await onEveryLoop(loops) { loop, done in loop.openAll(done: done) } }
        let (startNs, trackingEndNs, endNs) = await track(loops)
        sampler.stop()

        // What the run cost, measured before the accounting reads the mock's records.
        let peakRSSKiB = FleetResources.peakRSSKiB()
        let cpuSeconds = FleetResources.cpuSeconds()
        let fds = sampler.descriptors()
        if let error = loops.lazy.compactMap(\.openError).first {
            network?.close()
            for loop in loops { loop.stop() }
            throw FleetError("outbox fleet: cannot start a device: \(error)")
        }

        // The accounting: each store's own count, then the mock's records (SPEC F2); BEHAVIOUR D18: each destination
        // of a list on its own, its records read with its wire's fields and its stores' own pending and dead letters.
        let named = template.destinations.map {
            (name: $0.name ?? NamedDestination.defaultName, wire: $0.destination,
             fields: FleetLineFields($0.destination, segmentProfile: $0.segmentProfile))
        }
        let fields = named.first?.fields ?? FleetLineFields(options.destination, segmentProfile: options.template.segmentProfile)
        let openStores = await FleetAccounting.storeCounts(
            loops: loops, fields: fields, fieldsByName: Dictionary(named.map { ($0.name, $0.fields) }) { first, _ in first },
            logger: logger)
        network?.close()
        for loop in loops { loop.stop() }
        let stores = loops.reduce(openStores) { $0.merging($1.closedStores) { open, _ in open } }
        let faultWindows = FleetRecovery.faultWindows(scenario)
        let faultEndMs = FleetRecovery.faultEndMs(faultWindows, firstEventWallMs: firstEvent.wallMs)
        var accounts = (named.isEmpty ? [(name: nil, wire: options.destination, fields: fields)] : named.map { ($0.name, $0.wire, $0.fields) })
            .map { (name: String?, wire: Destination, fields: FleetLineFields) in
                var accounting = FleetAccounting(devices: loops.flatMap(\.finalCounts),
                                                 stores: name.map { name in stores.compactMapValues { $0.destinations[name] } } ?? stores,
                                                 deviceOffset: options.deviceOffset, events: options.events)
                accounting.backlogCutoffMs = faultEndMs
                return FleetDestinationAccount(name: name, wire: wire, fields: fields, accounting: accounting)
            }
        let finalStats = accountingClients.map { $0.flatMap { try? FleetMockStats.read($0) } }
        var recordsRead = false
        // Two destinations of one wire write the same lines into the same mock: their records cannot be told apart.
        let wiresDistinct = Set(accounts.map(\.wire)).count == accounts.count
        if !wiresDistinct {
            logger.warning("two destinations of one wire: the mock's records cannot tell them apart, lost is not counted")
        }
        if wiresDistinct, baselines.allSatisfy({ $0 != nil }), finalStats.allSatisfy({ $0 != nil }) {
            do {
                for index in accounts.indices {
                    for client in accountingClients.compactMap({ $0 }) {
                        try accounts[index].accounting.readLogs(client: client, runID: plan.runID, fields: accounts[index].fields)
                    }
                    accounts[index].duplicates = zip(finalStats, baselines).reduce(0) {
                        $0 + ($1.0?.duplicates(on: accounts[index].wire) ?? 0) - ($1.1?.duplicates(on: accounts[index].wire) ?? 0)
                    }
                }
                recordsRead = true
            } catch {
                logger.error("cannot read GET /_mock/logs: \(error)")
            }
        }
        // The first destination's records give the delays and the recovery; the counts add every destination's.
        let accounting = accounts[0].accounting
        let lost = accounts.reduce(0) { $0 + $1.accounting.lost }
        let pending = accounts.reduce(0) { $0 + $1.accounting.pending }

        // The report.
        let seconds = Double(endNs - startNs) / 1e9
        let delivered = accounts.reduce(0) { $0 + (recordsRead ? $1.accounting.uniqueDelivered : $1.accounting.engineDelivered) }
        let summary = FleetSummary(
            devices: devices, tracked: accounting.tracked, delivered: delivered,
            duplicates: accounts.reduce(0) { $0 + $1.duplicates },
            deadLettered: accounts.reduce(0) { $0 + $1.accounting.deadLettered }, evicted: accounting.evicted,
            pending: pending, lost: recordsRead ? lost : nil,
            crossMockDuplicates: recordsRead ? accounts.reduce(0) { $0 + $1.accounting.crossMockDuplicates } : nil,
            eventsPerSecond: seconds > 0 ? Double(delivered) / seconds : 0,
            delay: recordsRead ? accounting.delayPercentiles : nil, peakRSSKiB: peakRSSKiB, cpuSeconds: cpuSeconds,
            destinations: named.isEmpty ? [] : accounts.map { $0.summary(recordsRead: recordsRead) })
        let json = summary.json
        let samples = sampler.samples()
        var recovery = FleetRecovery.measure(
            scenarioWindows: faultWindows,
            firstEventT: firstEvent.atNs.map { Double(Int64(bitPattern: $0 &- sampler.startNs)) / 1e9 },
            samples: samples, devices: devices, faultEndMs: faultEndMs,
            lastBacklogReceivedMs: accounting.lastBacklogReceivedMs, backlogKnown: recordsRead && accounting.pending == 0)
        recovery?.devicesOpenAtFirstEvent = firstEvent.devicesOpenAtFirstEvent
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
        if let report = options.report {
            do {
                try FleetReport(summary: summary, json: json, samples: samples, histogram: accounting.histogram,
                                title: "outbox fleet — \(devices) devices × \(options.events) events",
                                command: options.commandLine,
                                metrics: metricsServer.map { _ in FleetMetrics.render(metrics.snapshot()) },
                                recovery: recovery)
                    .write(to: report)
            } catch {
                writeStandardError("outbox fleet: cannot write the report to \(report): \(error)\n")
            }
        }
        if recordsRead && lost != 0 {
            var lines: [String] = []
            for account in accounts where lines.count < 10 {
                let suffix = account.name.map { " \($0)" } ?? ""
                lines += account.accounting.missingLines(limit: 10 - lines.count).map { $0 + suffix }
            }
            for line in lines { writeStandardError(line + "\n") }
            return 1
        }
        // SPEC F9: what is still stored was not delivered before the drains ended: the run did not do what it was asked.
        if pending != 0 {
            for account in accounts where account.accounting.pending != 0 {
                let reasons = account.accounting.pendingReasons.prefix(3).map {
                    $0.reason == "none" ? "\($0.devices) still trying" : "\($0.devices) stopped: \($0.reason)"
                }
                let whose = account.name.map { " for \($0)" } ?? ""
                writeStandardError("outbox fleet: \(account.accounting.pending) logs still pending\(whose) at the end: the server "
                                   + "did not take them before the devices' drains ended (--timeout \(cFormat("%g", options.timeout)) s, "
                                   + "or sending stopped); devices: \(reasons.joined(separator: "; ")). They stay in the stores.\n")
            }
            return 1
        }
        guard recordsRead else { return 2 }
        if let crossMock = summary.crossMockDuplicates, crossMock != 0 {
            writeStandardError("outbox fleet: \(crossMock) logs were recorded by more than one mock "
                               + "(SPEC F6): route each device to one mock (haproxy: balance hdr(Install-ID))\n")
            return 1
        }
        return 0
    }

    /// The stores' directory: `--dir`, or a fresh one under $TMPDIR.
    private func makeStoreDirectory() throws -> String {
        let temporary = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        let base = options.dir ?? temporary + (temporary.hasSuffix("/") ? "" : "/")
            + "outbox-fleet-\(getpid())-\(monotonicNs() % 1_000_000)"
        do {
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        } catch {
            throw FleetError("outbox fleet: cannot create the store directory \(base): \(error)")
        }
        return base
    }

    /// `--scenario`, named or a file: the in-process mock's.
    private func loadScenario() throws -> Scenario? {
        guard options.endpoint == nil else { return nil }
        do {
            return try options.scenario.map { try Scenario.load(nameOrPath: $0) }
        } catch {
            throw FleetError("outbox fleet: cannot start the mock: \(error)")
        }
    }

    /// The mock, in-process, unless the run has an endpoint.
    private func startServer(_ loaded: Scenario?) throws -> MockServer? {
        guard options.endpoint == nil else { return nil }
        do {
            let mock = try MockServer(configuration: .init(scenario: loaded))
            try mock.start()
            return mock
        } catch {
            throw FleetError("outbox fleet: cannot start the mock: \(error)")
        }
    }

    /// The mock's counts before the run; nil for a server that is not an outbox-mock (loss is then not counted).
    private func readBaseline(_ client: FleetMockClient?, target: String, flag: String) throws -> FleetMockStats? {
        var baseline: FleetMockStats? = nil
        if let client {
            do {
                baseline = try FleetMockStats.read(client)
            } catch FleetMockClient.Failure.connect(let reason) where options.endpoint != nil || flag != "--endpoint" {
                // Said now, not after every device has retried through the whole run.
                throw FleetError("outbox fleet: cannot reach \(flag) \(maskingCredentials(in: target)): \(reason); start the server first")
            } catch {}
        }
        if baseline == nil {
            logger.warning("the server does not answer GET /_mock/stats as an outbox-mock does: lost cannot be counted",
                           metadata: ["outbox.endpoint": "\(maskingCredentials(in: target))"])
        }
        return baseline
    }

    private func startLoops(_ count: Int, plan: FleetPlan, specs: [FleetDeviceSpec]) throws -> [FleetLoop] {
        var loops: [FleetLoop] = []
        do {
            for index in 0..<count {
                let loop = FleetLoop(index: index, plan: plan)
                try loop.start(stride(from: index, to: specs.count, by: count).map { specs[$0] })
                loops.append(loop)
            }
        } catch {
            for loop in loops { loop.stop() }
            throw FleetError("outbox fleet: cannot start a loop: \(error)")
        }
        return loops
    }

    /// Starts `body` on every loop and returns once each has called the `done` it was given.
    private func onEveryLoop(_ loops: [FleetLoop], _ body: @escaping @Sendable (FleetLoop, _ done: @escaping @Sendable () -> Void) -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            for loop in loops {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        body(loop) { continuation.resume() }
                    }
                }
            }
        }
    }

    /// Runs the tracking: each loop reports twice — every device tracked everything, then every device's drain ended
    /// (its store empty and closed, or the timeout passed for it). Returns when it began, when the last loop finished
    /// tracking, and when everything settled.
    private func track(_ loops: [FleetLoop]) async -> (startNs: UInt64, trackingEndNs: UInt64, endNs: UInt64) {
        let startNs = monotonicNs()
        let tracked = FleetCountdown(loops.count)
        await onEveryLoop(loops) { loop, settled in
            loop.begin(startNs: startNs, done: { tracked.arrive() }, settled: settled)
        }
        return (startNs, tracked.lastArrivalNs ?? monotonicNs(), monotonicNs())
    }
}

/// Counts the loops that finished tracking, and when the last one did.
///
/// Atomics, not a `Mutex`: the loops arrive concurrently, and Synchronization's `Mutex` on Linux waits on a futex
/// that ThreadSanitizer does not see, so it reported the guarded writes as a race (`make sanitize-thread`).
final class FleetCountdown: Sendable {
    private let left: Atomic<Int>
    /// 0 until the last arrival.
    private let at = Atomic<UInt64>(0)
    init(_ count: Int) { left = Atomic(count) }

    func arrive() {
        if left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            at.store(max(1, monotonicNs()), ordering: .releasing)
        }
    }

    var lastArrivalNs: UInt64? {
        let value = at.load(ordering: .acquiring)
        return value == 0 ? nil : value
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
