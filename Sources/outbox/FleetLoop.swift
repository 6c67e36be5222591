import CLibUV
import Dispatch
import FoundationEssentials
import Glibc
import Outbox
import Synchronization

/// What one simulated install is told before it starts (SPEC F1).
struct FleetDeviceSpec: Sendable {
    /// The device's number (`--device-offset` + its index): the `d` property of its events.
    var number: Int
    /// The ordinal of the event at which it goes offline, once, for `--offline-s`; nil: never.
    var offlineAt: Int?
    /// Spreads the devices' first events over the first second at `--rate` (0 ≤ phase < 1).
    var phase: Double
}

/// What every device of the run shares.
struct FleetPlan: Sendable {
    var events: Int
    var rate: Double?
    var offlineNs: UInt64
    /// The `r` property of every event: tells this run's logs from others' on a shared mock.
    var runID: String
    /// The engine configuration of a device, given its store path and the loop it runs on.
    var configuration: @Sendable (_ spec: FleetDeviceSpec, _ loop: UnsafeMutableRawPointer) -> Configuration
}

/// A simulated install: its engine and where its tracking is. Owned by its loop's thread.
final class FleetDevice {
    let spec: FleetDeviceSpec
    let engine: OutboxEngine
    /// The next event's ordinal (`i`).
    var next = 0
    /// Events the engine accepted.
    var tracked = 0
    var rejected = 0
    var wentOffline = false
    var offlineUntilNs: UInt64? = nil
    var doneTracking = false
    /// SPEC F1, A2: the device's session (FleetSessions.swift).
    var session = FleetSession.notStarted

    init(spec: FleetDeviceSpec, engine: OutboxEngine) {
        self.spec = spec
        self.engine = engine
    }
}

/// One libuv loop thread of the fleet (SPEC F1: one per core): it creates its devices' engines in host-loop mode,
/// so that they register their handles on this loop, and walks its devices from one timer — not a timer or a
/// thread per device. Other threads reach it only through `run`, which wakes the loop.
final class FleetLoop: @unchecked Sendable {
    /// Events one device tracks per walk without `--rate`: enough to fill a batch, few enough that the loop gets
    /// back to its sockets and commits between walks.
    static let burst = 50

    let index: Int
    private let plan: FleetPlan
    private let raw: UnsafeMutablePointer<uv_loop_t> = .allocate(capacity: 1)
    private let tick: UnsafeMutablePointer<uv_timer_t> = .allocate(capacity: 1)
    private let wake: UnsafeMutablePointer<uv_async_t> = .allocate(capacity: 1)
    private let commands = Mutex<[@Sendable (FleetLoop) -> Void]>([])
    private var devices: [FleetDevice] = []
    private var startNs: UInt64 = 0
    private var stopping = false
    private var doneCount = 0
    /// Resumed once every device of the loop tracked its events.
    private var trackingDone: (() -> Void)?
    /// The fleet's one netlink watcher's last word (SPEC N1; FleetNetwork.swift).
    var network = SharedNetworkWatcher.State(online: true, defaultInterface: nil)

    /// Read by the coordinator for the progress line.
    let trackedTotal = Atomic<Int>(0)
    let offlineNow = Atomic<Int>(0)
    let devicesDone = Atomic<Int>(0)

    /// The engines, in device order; set before `start` returns and never changed.
    private(set) var engines: [OutboxEngine] = []
    /// Per device once the loop stopped: (number, tracked, rejected, install id).
    private(set) var finalCounts: [(number: Int, tracked: Int, rejected: Int, install: String)] = []

    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var startError: (any Error)?

    init(index: Int, plan: FleetPlan) {
        self.index = index
        self.plan = plan
    }

    /// Starts the thread, which creates the engines of `specs`; returns once they all started (or throws the first
    /// error, after closing what was opened).
    func start(_ specs: [FleetDeviceSpec]) throws {
        startThread { [self] in self.threadMain(specs) }
        ready.wait()
        if let startError { finished.wait(); throw startError }
    }

    private func threadMain(_ specs: [FleetDeviceSpec]) {
        let rc = uv_loop_init(raw)
        guard rc == 0 else {
            startError = CLIError(description: "outbox fleet: uv_loop_init failed: \(String(cString: uv_strerror(rc)))")
            ready.signal()
            finished.signal()
            return
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        uv_timer_init(raw, tick)
        tick.pointee.data = context
        uv_async_init(raw, wake) { async in
            guard let data = async?.pointee.data else { return }
            Unmanaged<FleetLoop>.fromOpaque(data).takeUnretainedValue().runCommands()
        }
        wake.pointee.data = context
        do {
            for spec in specs {
                let engine = try OutboxEngine(configuration: plan.configuration(spec, UnsafeMutableRawPointer(raw)))
                devices.append(FleetDevice(spec: spec, engine: engine))
            }
        } catch {
            startError = error
        }
        engines = devices.map(\.engine)
        if startError != nil { closeEverything() }
        ready.signal()
        uv_run(raw, UV_RUN_DEFAULT)
        uv_loop_close(raw)
        raw.deallocate()
        finished.signal()
    }

    /// Runs `body` on the loop thread.
    func run(_ body: @escaping @Sendable (FleetLoop) -> Void) {
        commands.withLock { $0.append(body) }
        uv_async_send(wake)
    }

    private func runCommands() {
        let pending = commands.withLock { queue -> [@Sendable (FleetLoop) -> Void] in
            defer { queue.removeAll() }
            return queue
        }
        for command in pending { command(self) }
    }

    /// Starts tracking at `startNs` (monotonic); `done` is called on the loop thread once every device tracked all.
    func begin(startNs: UInt64, done: @escaping @Sendable () -> Void) {
        run { loop in
            loop.startNs = startNs
            loop.trackingDone = done
            if loop.devices.isEmpty { loop.finishTracking() }
            loop.walk()
        }
    }

    private func finishTracking() {
        trackingDone?()
        trackingDone = nil
    }

    /// One walk over the devices: brings devices back online whose offline time is over, tracks what is due.
    private func walk() {
        guard !stopping else { return }
        let now = monotonicNs()
        let elapsed = Double(now &- startNs) / 1e9
        var newlyTracked = 0
        var allDone = true
        var offline = 0
        for device in devices {
            if let until = device.offlineUntilNs {
                if now >= until {
                    // SPEC N2, R6: back online is a network change — waiting batches go out, back-off starts over.
                    device.offlineUntilNs = nil
                    device.hear(.whenReleased(network: network))
                    if device.doneTracking { device.engine.dispatch() }
                } else {
                    offline += 1
                }
            }
            guard !device.doneTracking else { continue }
            let target = plan.rate.map { min(plan.events, Int(elapsed * $0 + device.spec.phase)) }
                ?? min(plan.events, device.next + Self.burst)
            if device.next < target { newlyTracked += device.beginSession() }
            while device.next < target {
                if device.spec.offlineAt == device.next && !device.wentOffline {
                    device.wentOffline = true
                    device.offlineUntilNs = now + plan.offlineNs
                    device.engine.setReachability(.offline)
                    offline += 1
                }
                do {
                    try device.engine.trackEvent("fleet", properties: [
                        "d": .int(Int64(device.spec.number)), "i": .int(Int64(device.next)), "r": .string(plan.runID),
                    ])
                    device.tracked += 1
                    newlyTracked += 1
                } catch {
                    device.rejected += 1
                }
                device.next += 1
            }
            if device.next >= plan.events {
                device.doneTracking = true
                newlyTracked += device.endSession()
                // SPEC C7: what waits goes now, not at the next transmission interval.
                device.engine.dispatch()
                doneCount += 1
                devicesDone.add(1, ordering: .relaxed)
            } else {
                allDone = false
            }
        }
        trackedTotal.add(newlyTracked, ordering: .relaxed)
        offlineNow.store(offline, ordering: .relaxed)
        if allDone && trackingDone != nil { finishTracking() }
        // Without --rate the next walk follows the loop's next turn (its sockets and commits first); with a rate, or
        // once everything was tracked (offline devices still come back), a short period is enough.
        let period: UInt64 = !allDone && plan.rate == nil ? 0 : plan.rate.map { max(2, min(50, UInt64(250 / $0))) } ?? 50
        uv_timer_start(tick, { timer in
            guard let data = timer?.pointee.data else { return }
            Unmanaged<FleetLoop>.fromOpaque(data).takeUnretainedValue().walk()
        }, period, 0)
    }

    /// SPEC N1: the fleet's watcher saw a change; each device of this loop hears it, on this loop's thread.
    func networkChanged(from old: SharedNetworkWatcher.State, to new: SharedNetworkWatcher.State) {
        run { loop in
            loop.network = new
            for device in loop.devices {
                device.hear(.decide(from: old, to: new, heldOffline: device.offlineUntilNs != nil))
            }
        }
    }

    /// The `uv_loop_t *` for handles of the fleet's own (the netlink watcher); use it on the loop's thread only.
    var loopPointer: UnsafeMutableRawPointer { UnsafeMutableRawPointer(raw) }

    /// Shuts every engine down on the loop thread (host mode requires it), closes the loop's own handles and waits
    /// for the thread to end. Afterwards `finalCounts` holds what each device tracked.
    func stop() {
        run { loop in loop.closeEverything() }
        finished.wait()
    }

    private func closeEverything() {
        stopping = true
        finalCounts = devices.map { ($0.spec.number, $0.tracked, $0.rejected, $0.engine.installID.uuidString.lowercased()) }
        for device in devices { device.engine.shutdown() }
        devices.removeAll()
        uv_close(UnsafeMutableRawPointer(tick).assumingMemoryBound(to: uv_handle_t.self)) { UnsafeMutableRawPointer($0)?.deallocate() }
        uv_close(UnsafeMutableRawPointer(wake).assumingMemoryBound(to: uv_handle_t.self)) { UnsafeMutableRawPointer($0)?.deallocate() }
    }
}

func monotonicNs() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
