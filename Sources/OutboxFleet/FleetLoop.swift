import CLibUV
import Dispatch
import FoundationEssentials
import Glibc
@_spi(CInterface) import Outbox
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
    /// The engine configuration of a device, given the loop it runs on and that loop's shared transport.
    var configuration: @Sendable (_ spec: FleetDeviceSpec, _ loop: UnsafeMutableRawPointer, _ shared: SharedTransport?) -> Configuration
    /// Devices a loop keeps open at once (SPEC F4: what the descriptor limit holds); the others wait for one to close.
    var maxOpenPerLoop: Int = .max
    /// How long a device that tracked everything waits for its store to drain before it is left open as pending.
    var drainMs: UInt64 = 600_000
    /// Requests in curl at once per loop, all its devices together (`SharedTransport`).
    var transfersPerLoop = 32
    /// SPEC F9: told of the fleet's first tracked event, before it is tracked.
    var firstEvent: FleetFirstEvent? = nil
}

/// SPEC F9: the moment of the fleet's first tracked event — the scenario clock of the fleet's in-process mock starts
/// there, so that `outage-60`'s minute of tracking before the fault does not depend on how long the devices took to open.
final class FleetFirstEvent: Sendable {
    private let monotonic = Atomic<UInt64>(0)
    private let wall = Atomic<Int64>(0)
    private let started: @Sendable () -> Void
    /// Devices open on every loop now, and at the first event (-1 before it).
    private let open = Atomic<Int>(0)
    private let openAtMark = Atomic<Int>(-1)

    /// `started` runs once, on the thread of the first event, before that event is tracked.
    init(started: @escaping @Sendable () -> Void = {}) {
        self.started = started
    }

    func mark() {
        guard monotonic.load(ordering: .acquiring) == 0 else { return }
        let now = max(1, monotonicNs())
        guard monotonic.compareExchange(expected: 0, desired: now, ordering: .acquiringAndReleasing).exchanged else { return }
        wall.store(wallClockMs(), ordering: .releasing)
        openAtMark.store(open.load(ordering: .relaxed), ordering: .releasing)
        started()
    }

    /// A loop opened (`delta` 1) or closed (-1) a device.
    func opened(_ delta: Int) {
        open.add(delta, ordering: .relaxed)
    }

    /// How many devices were open when the first event was tracked; nil before it.
    var devicesOpenAtFirstEvent: Int? {
        let value = openAtMark.load(ordering: .acquiring)
        return value < 0 ? nil : value
    }

    /// Monotonic ns of the first event; nil before it.
    var atNs: UInt64? {
        let value = monotonic.load(ordering: .acquiring)
        return value == 0 ? nil : value
    }

    /// Wall-clock ms of the first event (the mock stamps arrivals with its wall clock); nil before it.
    var wallMs: Int64? {
        let value = wall.load(ordering: .acquiring)
        return value == 0 ? nil : value
    }
}

/// A simulated install: its engine while it is open, and where its tracking is. Owned by its loop's thread.
///
/// SPEC F4's idle stores: a device holds no descriptor before it is admitted (opened) or once it has tracked all its
/// events and its store drained (nothing pending, nothing in flight, no dead letter): its engine is then shut down.
final class FleetDevice {
    let spec: FleetDeviceSpec
    var engine: OutboxEngine?
    var install = ""
    /// When it was admitted (monotonic ns): its `--rate` clock starts there.
    var startNs: UInt64 = 0
    /// Its drain is running (`OutboxEngine.drain`).
    var draining = false
    /// Its drain ended (drained and closed, or left open: pending or dead letters); counted once.
    var settled = false
    /// The store's counts taken just before it closed (SPEC F2); nil while open.
    var closedCount: FleetStoreCount?
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
    /// SPEC F9: its engine's request counters (`EngineStatus.requests`, `.probes`) when last read.
    var requests = 0
    var probes = 0

    init(spec: FleetDeviceSpec) {
        self.spec = spec
    }
}

/// One libuv loop thread of the fleet (SPEC F1: one per core): it opens its devices' engines in host-loop mode, so
/// that they register their handles on this loop and share its one HTTP client (`SharedTransport`, SPEC F4), and walks
/// its devices from one timer — not a timer or a thread per device. Devices are admitted in order, at most
/// `maxOpenPerLoop` open at once, and closed once idle (see `FleetDevice`). Other threads reach it only through `run`,
/// which wakes the loop.
final class FleetLoop: @unchecked Sendable {
    /// Events one device tracks per walk without `--rate`: enough to fill a batch, few enough that the loop gets
    /// back to its sockets and commits between walks.
    static let burst = 50
    /// Engines opened per walk: opening a store syncs the disk, and the open devices' tracking must go on meanwhile.
    static let opensPerWalk = 16

    let index: Int
    private let plan: FleetPlan
    private let raw: UnsafeMutablePointer<uv_loop_t> = .allocate(capacity: 1)
    private let tick: UnsafeMutablePointer<uv_timer_t> = .allocate(capacity: 1)
    private let wake: UnsafeMutablePointer<uv_async_t> = .allocate(capacity: 1)
    private let commands = Mutex<[@Sendable (FleetLoop) -> Void]>([])
    private var devices: [FleetDevice] = []
    private var shared: SharedTransport?
    /// The next device to admit.
    private var nextToOpen = 0
    private var openCount = 0
    private var startNs: UInt64 = 0
    private var stopping = false
    private var doneCount = 0
    private var settledCount = 0
    /// Resumed once every device of the loop tracked its events.
    private var trackingDone: (() -> Void)?
    /// Resumed once every device's drain ended.
    private var settledDone: (() -> Void)?
    /// Set while `openAll` opens the devices ahead of tracking; called once it has.
    private var opening: (@Sendable () -> Void)?
    /// The fleet's one netlink watcher's last word (SPEC N1; FleetNetwork.swift).
    var network = SharedNetworkWatcher.State(online: true, defaultInterface: nil)

    /// Read by the coordinator for the progress line.
    let trackedTotal = Atomic<Int>(0)
    let offlineNow = Atomic<Int>(0)
    let devicesDone = Atomic<Int>(0)
    /// Engines open now (SPEC F4), and devices closed after draining.
    let openNow = Atomic<Int>(0)
    let closedTotal = Atomic<Int>(0)
    /// SPEC F9: requests the loop's engines made (every attempt, refused connections included) and of those probes,
    /// from the engines' own counters: the open ones' read at each sample (`countRequests`), the closed ones' final counts.
    let requestsTotal = Atomic<Int>(0)
    let probesTotal = Atomic<Int>(0)
    private var closedRequests = 0
    private var closedProbes = 0

    /// Per device once the loop stopped: (number, tracked, rejected, install id).
    private(set) var finalCounts: [(number: Int, tracked: Int, rejected: Int, install: String)] = []
    /// The counts of the stores closed after draining, by install id (SPEC F2), once the loop stopped.
    private(set) var closedStores: [String: FleetStoreCount] = [:]
    /// The first engine that could not be opened.
    private(set) var openError: (any Error)?

    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var startError: (any Error)?

    init(index: Int, plan: FleetPlan) {
        self.index = index
        self.plan = plan
    }

    /// Starts the thread with the devices of `specs`, none opened yet; returns once the loop is ready.
    func start(_ specs: [FleetDeviceSpec]) throws {
        startThread { [self] in self.threadMain(specs) }
        ready.wait()
        if let startError { finished.wait(); throw startError }
    }

    private func threadMain(_ specs: [FleetDeviceSpec]) {
        let rc = uv_loop_init(raw)
        guard rc == 0 else {
            startError = FleetError("outbox fleet: uv_loop_init failed: \(String(cString: uv_strerror(rc)))")
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
            shared = try SharedTransport(loop: UnsafeMutableRawPointer(raw), maxActiveTransfers: plan.transfersPerLoop)
        } catch {
            startError = error
        }
        devices = specs.map(FleetDevice.init(spec:))
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

    /// Starts tracking at `startNs` (monotonic); `done` is called on the loop thread once every device tracked all,
    /// `settled` once every device's drain ended.
    func begin(startNs: UInt64, done: @escaping @Sendable () -> Void, settled: @escaping @Sendable () -> Void) {
        run { loop in
            loop.startNs = startNs
            loop.trackingDone = done
            loop.settledDone = settled
            if loop.devices.isEmpty { loop.finishTracking(); loop.checkSettled() }
            loop.walk()
        }
    }

    /// Opens every device before any tracks — as many as fit at once when not all do (SPEC F4; the others are admitted
    /// as those close, as always); `done` is called on the loop thread once they are open. A paced run (`--rate`)
    /// starts this way so that its whole fleet runs from the first tracked event, which starts a scenario's clock
    /// (BEHAVIOUR F9): the minute before a fault then measures the fleet's steady rate, not its admission. The opens
    /// go `opensPerWalk` at a time, with the loop's I/O between.
    func openAll(done: @escaping @Sendable () -> Void) {
        run { loop in
            loop.opening = done
            loop.walk()
        }
    }

    private func finishTracking() {
        trackingDone?()
        trackingDone = nil
    }

    private func checkSettled() {
        guard settledCount == devices.count, let settledDone else { return }
        self.settledDone = nil
        settledDone()
    }

    /// Opens the next devices while the budget allows (SPEC F4).
    private func admit(now: UInt64) {
        var opened = 0
        while nextToOpen < devices.count, openCount < plan.maxOpenPerLoop, opened < Self.opensPerWalk {
            let device = devices[nextToOpen]
            nextToOpen += 1
            opened += 1
            device.startNs = now
            do {
                let engine = try OutboxEngine(configuration: plan.configuration(device.spec, UnsafeMutableRawPointer(raw), shared))
                device.engine = engine
                device.install = engine.installID.uuidString.lowercased()
                openCount += 1
                openNow.add(1, ordering: .relaxed)
                plan.firstEvent?.opened(1)
                // An engine starts online: it hears what the fleet's watcher said before it opened (SPEC N1).
                device.hear(.decide(from: SharedNetworkWatcher.State(online: true, defaultInterface: network.defaultInterface),
                                    to: network, heldOffline: false))
            } catch {
                // Counted as done with nothing tracked; the coordinator reports the error and fails the run.
                if openError == nil { openError = error }
                device.next = plan.events
                device.doneTracking = true
                device.settled = true
                settledCount += 1
                doneCount += 1
                devicesDone.add(1, ordering: .relaxed)
            }
        }
    }

    /// One walk over the devices: admits devices, brings devices back online whose offline time is over, tracks what
    /// is due, and starts the drain of those that tracked everything.
    private func walk() {
        guard !stopping else { return }
        let now = monotonicNs()
        admit(now: now)
        if let opening {
            if nextToOpen < devices.count, openCount < plan.maxOpenPerLoop { return schedule(afterMs: 1) }
            self.opening = nil
            return opening()
        }
        var newlyTracked = 0
        var offline = 0
        var stillTracking = false
        for device in devices[..<nextToOpen] {
            guard let engine = device.engine else { continue }
            if let until = device.offlineUntilNs {
                if now >= until {
                    // SPEC N2, R6: back online is a network change — waiting batches go out, back-off starts over.
                    device.offlineUntilNs = nil
                    device.hear(.whenReleased(network: network))
                    if device.doneTracking { engine.dispatch() }
                } else {
                    offline += 1
                }
            }
            guard !device.doneTracking else { continue }
            let elapsed = Double(now &- max(startNs, device.startNs)) / 1e9
            let target = plan.rate.map { min(plan.events, Int(elapsed * $0 + device.spec.phase)) }
                ?? min(plan.events, device.next + Self.burst)
            if device.next < target {
                plan.firstEvent?.mark()
                newlyTracked += device.beginSession()
            }
            while device.next < target {
                if device.spec.offlineAt == device.next && !device.wentOffline {
                    device.wentOffline = true
                    device.offlineUntilNs = now + plan.offlineNs
                    engine.setReachability(.offline)
                    offline += 1
                }
                do {
                    try engine.trackEvent("fleet", properties: [
                        "d": .int(Int64(device.spec.number)), "i": .int(Int64(device.next)), "r": .string(plan.runID),
                    ])
                    device.tracked += 1
                    newlyTracked += 1
                } catch {
                    device.rejected += 1
                }
                device.next += 1
            }
            if device.next < plan.events { stillTracking = true }
            if device.next >= plan.events {
                device.doneTracking = true
                newlyTracked += device.endSession()
                doneCount += 1
                devicesDone.add(1, ordering: .relaxed)
                startDrain(device)
            }
        }
        trackedTotal.add(newlyTracked, ordering: .relaxed)
        offlineNow.store(offline, ordering: .relaxed)
        let allDone = doneCount == devices.count
        if allDone && trackingDone != nil { finishTracking() }
        // Without --rate the next walk follows the loop's next turn (its sockets and commits first); with a rate, or
        // once everything was tracked (offline devices still come back), a short period is enough.
        // A 0 ms timer restarted from its own callback runs again in the same pass (libuv 1.44), before any I/O: only
        // while an open device still tracks, never while devices merely wait for admission (their turn comes when a
        // drain, which needs the loop's I/O, closes a device).
        schedule(afterMs: stillTracking && plan.rate == nil ? 0
            : !allDone && plan.rate == nil ? 5 : plan.rate.map { max(2, min(50, UInt64(250 / $0))) } ?? 50)
    }

    private func schedule(afterMs period: UInt64) {
        uv_timer_start(tick, { timer in
            guard let data = timer?.pointee.data else { return }
            Unmanaged<FleetLoop>.fromOpaque(data).takeUnretainedValue().walk()
        }, period, 0)
    }

    /// SPEC F9: adds up the engines' request counters into `requestsTotal` and `probesTotal`, on the loop thread; the
    /// sampler asks for it at each sample (FleetSampler), so that the counts are of that moment.
    func countRequests() {
        guard !stopping else { return }
        var requests = closedRequests
        var probes = closedProbes
        for device in devices[..<nextToOpen] {
            guard let engine = device.engine else { continue }
            if let counts = engine.requestCounts { (device.requests, device.probes) = counts }
            requests += device.requests
            probes += device.probes
        }
        requestsTotal.store(requests, ordering: .relaxed)
        probesTotal.store(probes, ordering: .relaxed)
    }

    /// SPEC C7: what waits goes now; once the store is empty with nothing in flight the device is idle and its engine
    /// closes (SPEC F4), its counts kept for the accounting.
    private func startDrain(_ device: FleetDevice) {
        guard let engine = device.engine, !device.draining else { return }
        device.draining = true
        let box = Unchecked(device)
        engine.drain(forMs: plan.drainMs) { [self] drained in
            self.drainEnded(device: box, drained: drained)
        }
    }

    private func drainEnded(device box: Unchecked<FleetDevice>, drained: Bool) {
        let device = box.value
        guard !device.settled else { return }
        device.settled = true
        settledCount += 1
        defer { checkSettled() }
        guard drained, !stopping, let engine = device.engine, let status = try? engine.statusWaiting(),
              status.deadLetters == 0, status.pendingNormal + status.pendingCritical + status.inFlight == 0 else { return }
        device.closedCount = FleetStoreCount(status, pending: 0)
        closedRequests += status.requests
        closedProbes += status.probes
        engine.shutdown()
        device.engine = nil
        openCount -= 1
        openNow.subtract(1, ordering: .relaxed)
        plan.firstEvent?.opened(-1)
        closedTotal.add(1, ordering: .relaxed)
    }

    /// The engines still open (drain not ended, pending left, dead letters), for the coordinator's accounting.
    func openEngines() async -> [OutboxEngine] {
        await withCheckedContinuation { (continuation: CheckedContinuation<[OutboxEngine], Never>) in
            run { loop in continuation.resume(returning: loop.devices.compactMap(\.engine)) }
        }
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
        finalCounts = devices.map { ($0.spec.number, $0.tracked, $0.rejected, $0.install) }
        for device in devices {
            if let count = device.closedCount { closedStores[device.install] = count }
            device.engine?.shutdown()
            device.engine = nil
        }
        openNow.store(0, ordering: .relaxed)
        devices.removeAll()
        shared?.close()
        shared = nil
        uv_close(UnsafeMutableRawPointer(tick).assumingMemoryBound(to: uv_handle_t.self)) { UnsafeMutableRawPointer($0)?.deallocate() }
        uv_close(UnsafeMutableRawPointer(wake).assumingMemoryBound(to: uv_handle_t.self)) { UnsafeMutableRawPointer($0)?.deallocate() }
    }
}

/// Carries a loop-owned object through a `@Sendable` closure that runs on that same loop.
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

func wallClockMs() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}

package func monotonicNs() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
