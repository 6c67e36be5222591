import Dispatch
import FoundationEssentials
import Glibc
import Outbox
import OutboxMock
import Synchronization

/// One point of the report's time series (SPEC F3).
struct FleetSample: Sendable {
    /// Seconds since the sampler started.
    var t: Double
    var tracked: Int
    /// Unique logs at the mock since the run started; nil when the server is not an outbox-mock.
    var delivered: Int?
    var online: Int
    /// Answers by HTTP status since the run started, and requests that got none (faults).
    var statusCounts: [String: Int]
    var noAnswer: Int
    var p99Ms: Int64?
    /// Devices open (SPEC F4) and the process's descriptors at this moment.
    var open: Int = 0
    var descriptors: Int = 0
    /// Of those, the ones open on files under the stores' directory.
    var storeDescriptors: Int = 0
    /// SPEC F9: requests the devices made since the run started (every attempt, refused connections included: a
    /// refused one never reaches the mock), and of those probes, from the engines' own counters.
    var requests: Int = 0
    var probes: Int = 0
    /// Every loop added its counts up for this sample: only such samples measure requests (the others repeat the last).
    var requestsCounted = false
}

/// SPEC F4's descriptor figures over a run: the most descriptors open at once, the most devices open at once, and the
/// descriptors at the sample with the most devices open.
struct FleetDescriptorPeak {
    var peak = 0
    var peakOpen = 0
    var atPeakOpen = 0
    /// The most store descriptors per open device in any sample.
    var maxStorePerOpen = 0.0

    /// Descriptors per open device at the moment the most devices were open, above those open before the first.
    func perOpenDevice(start: Int) -> Double {
        peakOpen > 0 ? Double(atPeakOpen - start) / Double(peakOpen) : 0
    }
}

/// Samples the fleet's counters and the mock's stats every second for the report, and shows progress (SPEC F1): a
/// line rewritten in place on a terminal, a plain line every few seconds otherwise. Runs on its own thread so that
/// the loops never wait for the mock's answers.
final class FleetSampler: @unchecked Sendable {
    private let loops: [FleetLoop]
    private let client: FleetMockClient?
    /// The fleet's in-process mock, read directly rather than through its port (closed during a refusal, SPEC F9).
    private let server: MockServer?
    private let baseline: FleetMockStats?
    /// Whose counts of the mock's stats are this run's deliveries (`FleetMockStats.unique(on:)`).
    private let destination: Destination
    private let devices: Int
    private let terminal: Bool
    /// The stores' directory, whose open files the samples count.
    private let storeBase: String?
    private let state = Mutex<(stop: Bool, samples: [FleetSample])>((false, []))
    private let finished = DispatchSemaphore(value: 0)
    private let wake = DispatchSemaphore(value: 0)
    private let startedAt = Atomic<UInt64>(0)

    /// Seconds between two samples; between two plain progress lines when stderr is not a terminal.
    static let sampleInterval = 1.0
    static let plainLineInterval = 5.0
    /// How long a sample waits for the loops' request counts.
    static let countWait = 2.0
    /// The loops count their engines' requests at most once per this many times what the last count took, so that
    /// counting (a status a device, which reads its store) keeps at most a fifth of a loop's time at any fleet size.
    static let countSpacing = 5.0
    /// Sampler thread only: when the last count started, and how long it took (s).
    private var lastCountNs: UInt64 = 0
    private var lastCountSeconds = 0.0

    init(loops: [FleetLoop], client: FleetMockClient?, baseline: FleetMockStats?, destination: Destination = .appCenter,
         devices: Int, terminal: Bool, storeBase: String? = nil, server: MockServer? = nil) {
        self.server = server
        self.destination = destination
        self.storeBase = storeBase
        self.loops = loops
        self.client = client
        self.baseline = baseline
        self.devices = devices
        self.terminal = terminal
    }

    func start() {
        startedAt.store(monotonicNs(), ordering: .releasing)
        startThread { [self] in self.runLoop() }
    }

    /// Takes a last sample, ends the progress line and returns once the thread ended.
    func stop() {
        state.withLock { $0.stop = true }
        wake.signal()
        finished.wait()
    }

    func samples() -> [FleetSample] { state.withLock { $0.samples } }

    /// Monotonic ns at `start()`: a sample's `t` counts from here.
    var startNs: UInt64 { startedAt.load(ordering: .acquiring) }

    func descriptors() -> FleetDescriptorPeak {
        state.withLock { state in
            state.samples.reduce(into: FleetDescriptorPeak()) { peak, sample in
                peak.peak = max(peak.peak, sample.descriptors)
                if sample.open > 0 {
                    peak.maxStorePerOpen = max(peak.maxStorePerOpen, Double(sample.storeDescriptors) / Double(sample.open))
                }
                if sample.open > peak.peakOpen || (sample.open == peak.peakOpen && sample.descriptors > peak.atPeakOpen) {
                    peak.peakOpen = sample.open
                    peak.atPeakOpen = sample.descriptors
                }
            }
        }
    }

    private func runLoop() {
        let start = startNs
        var lastPlain = -Self.plainLineInterval
        while true {
            let sample = take(start: start, last: state.withLock { $0.stop })
            let (stopping, previous) = state.withLock { state -> (Bool, FleetSample?) in
                let previous = state.samples.last
                state.samples.append(sample)
                return (state.stop, previous)
            }
            let line = progressLine(sample, previous: previous)
            if terminal {
                writeStandardError("\r\u{1B}[2K" + line + (stopping ? "\n" : ""))
            } else if sample.t - lastPlain >= Self.plainLineInterval || stopping {
                writeStandardError(line + "\n")
                lastPlain = sample.t
            }
            if stopping { break }
            _ = wake.wait(timeout: .now() + Self.sampleInterval)
        }
        finished.signal()
    }

    private func take(start: UInt64, last: Bool) -> FleetSample {
        // SPEC F9: the loops add up their engines' request counters, each on its thread (a status reads the store:
        // the cost that grows with the devices open, hence `countSpacing`); the sample's time is when they all did,
        // or when the wait for a busy loop ended (the sample then does not count as measured).
        var requestsCounted = false
        let countStart = monotonicNs()
        if last || Double(countStart &- lastCountNs) / 1e9 >= max(Self.sampleInterval, Self.countSpacing * lastCountSeconds) {
            let counted = DispatchSemaphore(value: 0)
            for loop in loops { loop.run { $0.countRequests(); counted.signal() } }
            let deadline = DispatchTime.now() + Self.countWait
            requestsCounted = loops.allSatisfy { _ in counted.wait(timeout: deadline) == .success }
            lastCountNs = countStart
            lastCountSeconds = Double(monotonicNs() - countStart) / 1e9
        }
        let t = Double(monotonicNs() - start) / 1e9
        let tracked = loops.reduce(0) { $0 + $1.trackedTotal.load(ordering: .relaxed) }
        let offline = loops.reduce(0) { $0 + $1.offlineNow.load(ordering: .relaxed) }
        var sample = FleetSample(t: t, tracked: tracked, delivered: nil, online: devices - offline, statusCounts: [:],
                                 noAnswer: 0, p99Ms: nil)
        sample.open = loops.reduce(0) { $0 + $1.openNow.load(ordering: .relaxed) }
        sample.requests = loops.reduce(0) { $0 + $1.requestsTotal.load(ordering: .relaxed) }
        sample.probes = loops.reduce(0) { $0 + $1.probesTotal.load(ordering: .relaxed) }
        sample.requestsCounted = requestsCounted
        (sample.descriptors, sample.storeDescriptors) = FleetResources.openDescriptors(under: storeBase)
        if let client, let baseline, let stats = try? server.map({ try FleetMockStats.read($0) }) ?? FleetMockStats.read(client) {
            sample.delivered = stats.unique(on: destination) - baseline.unique(on: destination)
            var answered = 0
            for (status, count) in stats.statusCounts {
                let delta = count - (baseline.statusCounts[status] ?? 0)
                sample.statusCounts[status] = delta
                answered += delta
            }
            sample.noAnswer = max(0, stats.requests - baseline.requests - answered)
            sample.p99Ms = stats.delayMs.p99
        }
        return sample
    }

    private func progressLine(_ sample: FleetSample, previous: FleetSample?) -> String {
        var rate = 0.0
        if let previous, sample.t > previous.t {
            rate = Double(sample.tracked - previous.tracked) / (sample.t - previous.t)
        }
        var line = cFormat("%6.1fs  online %d/%d  tracked %d", sample.t, sample.online, devices, sample.tracked)
        if let delivered = sample.delivered {
            line += "  delivered \(delivered)  pending \(max(0, sample.tracked - delivered))"
        }
        line += cFormat("  events/s %.0f  open %d", rate, sample.open)
        if let p99 = sample.p99Ms { line += "  p99 \(p99) ms" }
        return line
    }
}
