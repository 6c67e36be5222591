import FoundationEssentials
import Glibc
import Logging
import Outbox
import OutboxMock

/// What a fleet run is asked to do (SPEC F1–F4, F2a): `outbox fleet`'s options, parsed and checked by the CLI.
package struct FleetOptions: Sendable {
    package var devices: Int
    package var events: Int
    /// Events per second per device; nil: as fast as back-pressure allows.
    package var rate: Double?
    package var seed: UInt64 = 1
    /// The ingestion server; nil: the mock, started in-process (with `scenario`, a file).
    package var endpoint: String?
    package var scenario: String?
    /// SPEC F6: the mocks whose `/_mock/logs` together hold the run, read directly; empty: the endpoint (or the
    /// in-process mock).
    package var accountingEndpoints: [String] = []
    package var offlineFraction: Double = 0
    package var offlineSeconds: Double = 10
    /// Where the devices' stores go; nil: a temporary directory, removed at the end.
    package var dir: String?
    /// Where `report.html` and `summary.json` go (SPEC F3).
    package var report: String?
    package var metricsPort: Int?
    package var deviceOffset: Int = 0
    /// Seconds the run waits for delivery once tracking ended.
    package var timeout: Double = 600
    /// Where the records keep what the accounting counts (SPEC F2a).
    package var destination: Destination = .appCenter
    /// Every device's configuration but its store, loop and shared transport, which the run sets (`deviceConfiguration`).
    package var template: Configuration
    /// The command, for the report's page.
    package var commandLine: String

    package init(devices: Int, events: Int, template: Configuration, commandLine: String) {
        self.devices = devices
        self.events = events
        self.template = template
        self.commandLine = commandLine
    }
}

/// The run's plan: who goes offline and when (seeded), how many devices may be open at once within the descriptor
/// limit, and each device's configuration (SPEC F1, F4).
enum FleetPlanning {
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

    /// Who goes offline, and at which of their events (seeded, SPEC F1), and each device's place in its start phase.
    static func deviceSpecs(_ options: FleetOptions) -> [FleetDeviceSpec] {
        var random = FleetRandom(seed: options.seed)
        let offlineCount = Int((options.offlineFraction * Double(options.devices)).rounded())
        var order = Array(0..<options.devices)
        random.shuffle(&order)
        let offline = Set(order.prefix(offlineCount))
        var specs: [FleetDeviceSpec] = []
        specs.reserveCapacity(options.devices)
        for index in 0..<options.devices {
            let at: Int? = offline.contains(index) ? (options.events > 0 ? random.below(options.events) : 0) : nil
            specs.append(FleetDeviceSpec(number: options.deviceOffset + index, offlineAt: at, phase: random.unit()))
        }
        return specs
    }

    /// SPEC F4: how many devices may be open at once within RLIMIT_NOFILE (raising the soft limit up to the hard one
    /// first). When all of them do not fit, says what they would need and admits them as others close; refuses only
    /// when not even one device per loop fits.
    static func descriptorLimit(devices: Int, loops: Int, inProcessMock: Bool, logger: Logger) throws -> Int {
        let fixed = descriptorsBase + loops * descriptorsPerLoop(inProcessMock: inProcessMock)
        let needed = fixed + devices * descriptorsPerDevice
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return devices }
        if limit.rlim_cur < rlim_t(needed) && limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, rlim_t(needed))
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        if limit.rlim_cur >= rlim_t(needed) { return devices }
        let fits = max(0, (Int(limit.rlim_cur) - fixed) / descriptorsPerDevice)
        let what = "\(devices) devices open at once need about \(needed) file descriptors (\(descriptorsPerDevice) "
            + "per device + \(fixed) for \(loops) loops and the process); RLIMIT_NOFILE allows \(limit.rlim_cur) "
            + "(hard limit \(limit.rlim_max))"
        guard fits >= loops else {
            throw FleetError("outbox fleet: \(what), not even one device per loop. Raise the limit (ulimit -n \(needed)).")
        }
        logger.notice("\(what): at most \(fits) devices are open at once; the others start as earlier ones finish and close")
        return fits
    }

    /// Each device's engine: the (validated) template with its own store under `base`, on its loop (host mode), on
    /// its loop's shared transport.
    static func deviceConfiguration(template: Configuration, base: String)
        -> @Sendable (FleetDeviceSpec, UnsafeMutableRawPointer, SharedTransport?) -> Configuration {
        { spec, loop, shared in
            var configuration = template
            configuration.sharedTransport = shared
            let directory = base + "/device-\(spec.number)"
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            configuration.storePath = directory + "/outbox.sqlite"
            configuration.runMode = .hostLoop(loop)
            return configuration
        }
    }

    /// Tells this run's events from others' on a shared mock: the process and the moment, in base 36.
    static func runID() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return String(Int(getpid()), radix: 36) + "-" + String(Int(now.tv_sec) * 1000 + now.tv_nsec / 1_000_000, radix: 36)
    }

    /// `path` with symbolic links and relative parts resolved, as /proc/self/fd names the files under it.
    static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }
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
