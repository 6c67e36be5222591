import FoundationEssentials
import Logging
import Synchronization

/// Everything the loop thread owns (docs/ARCHITECTURE.md, "Who owns what"): the store, the id generator, the counters.
/// Only the loop thread calls into it, except `init`, which runs before the loop starts.
final class EngineCore {
    let loop: EventLoop
    let store: LogStore
    let intake: Intake
    let configuration: Configuration
    let logger: Logger
    var ids: IDGenerator
    private let boot: Int64
    private var async: LoopAsync?
    private var commitTimer: LoopTimer?
    private var housekeeping: LoopTimer?
    private var commitTimerArmed = false
    /// True while `commitNow` drains the intake (see there).
    private var committing = false
    private var lastCommitNs: Int64 = 0
    private let windowNs: Int64
    /// Logs a failed transaction could not store; retried first at the next commit (never dropped).
    private var retryBuffer: [NewLog] = []
    /// At most this many logs wait in `retryBuffer` (SPEC S2: the oldest beyond it are counted as rejected).
    static let maxRetryBuffer = 10_000
    /// Event names of a failed transaction; persisted with the next one (SPEC T4 remembers them across restarts).
    private var retryNames: [String] = []
    private(set) var counters = EngineCounters()
    private(set) var isStopped = false
    /// Present when the configuration names an endpoint.
    private(set) var delivery: DeliveryDriver?
    private var watcher: ReachabilityWatcher?
    /// SPEC N2: the host's override; nil lets the watcher decide.
    private var reachabilityOverride: Reachability?
    /// Sessions, lifecycle and user (SPEC A1–A3, A5, A8), fed in queue order: see EngineCore+Analytics.swift.
    var analytics = AnalyticsState()
    /// Whether a session is open, for callers on other threads (the C interface refuses to end none, SPEC E5):
    /// `startSession()` and `endSession()` set it when called, the loop when it starts or ends one by itself
    /// (foreground after the timeout, the longest session).
    let sessionOpen = Atomic<Bool>(false)
    /// SPEC T6 in queue order: logs the analytics model writes while collection is off are dropped.
    var collecting = true
    /// SPEC A10: the current device context and its version id in the store's `contexts` (0: not saved).
    var device = DeviceContext()
    var contextID: Int64 = 0

    init(configuration: Configuration, loop: EventLoop, store: LogStore, intake: Intake) {
        self.configuration = configuration
        self.logger = configuration.logger
        self.loop = loop
        self.store = store
        self.intake = intake
        self.boot = BootID.current
        self.windowNs = configuration.groupCommitWindow.milliseconds * 1_000_000
        self.ids = configuration.testingIDSeed.map(IDGenerator.init(seed:)) ?? IDGenerator()
    }

    /// Registers the handles. On the creating thread before the loop runs (dedicated) or on the host's loop thread.
    func start(installID: UUID) throws {
        let loop = self.loop
        store.assertOwner = { loop.assertOnLoopThread() }
        device = DeviceContext.collect(appVersion: configuration.appVersion, appBuild: configuration.appBuild,
                                       appNamespace: configuration.appNamespace)
        if configuration.endpoint != nil {
            let transport = try makeSender(configuration)
            let wire = configuration.wire(installID: installID)
            let delivery = DeliveryDriver(
                queue: store, sender: transport, timer: LoopTimer(loop: loop), settings: configuration.deliverySettings,
                request: wire.request(endpoint: configuration.endpoint ?? "", credentials: configuration.credentials(installID: installID)),
                clock: configuration.clock, logger: logger, device: device,
                clockSkewThresholdMs: configuration.clockSkewThreshold.milliseconds,
                bodyCompression: configuration.bodyCompression, boot: boot, wire: wire,
                assertOwner: { loop.assertOnLoopThread() })
            self.delivery = delivery
            // SPEC N1: a loopback endpoint is always reachable; otherwise rtnetlink tells.
            if configuration.watchesNetwork && !Self.isLoopback(configuration.endpoint ?? "") {
                do {
                    let watcher = try ReachabilityWatcher(loop: loop, logger: logger) { [unowned self] state in
                        self.networkStateChanged(state)
                    }
                    self.watcher = watcher
                    if !watcher.state.online { delivery.reachability(online: false) }
                } catch {
                    logger.warning("no reachability watcher; assuming online", metadata: ["outbox.error": "\(error)"])
                }
            }
        }
        startDeviceContext(networkType: watcher?.state.networkType)
        let async = LoopAsync(loop: loop) { [unowned self] in self.onWake() }
        self.async = async
        intake.setWake { async.send() }
        commitTimer = LoopTimer(loop: loop) { [unowned self] in
            self.commitTimerArmed = false
            let committed = self.commitNow()
            self.delivery?.stored()
            self.keepPolling(after: committed)
        }
        let housekeeping = LoopTimer(loop: loop) { [unowned self] in self.runHousekeeping() }
        housekeeping.unref()
        housekeeping.start(afterMs: 60_000, repeatMs: 60_000)
        self.housekeeping = housekeeping
        // A backlog from an earlier run is due at once; the first pump runs inside the loop.
        if delivery != nil { commitTimer?.start(afterMs: 0) }
    }

    // MARK: - Group commit (SPEC T5)

    /// The async callback: commit now when something urgent waits, the queue is long, or the window since the
    /// last commit has passed; otherwise arm a timer for the end of the window so that small trickles share one
    /// transaction.
    private func onWake() {
        let (count, urgent, closed, full) = intake.peek()
        if closed { stop(); return }
        guard count > 0 else { return }
        let now = configuration.clock.monoNs()
        if urgent || full || count >= intake.commitThreshold || now - lastCommitNs >= windowNs {
            keepPolling(after: commitNow())
        } else if !commitTimerArmed, let commitTimer {
            commitTimerArmed = true
            commitTimer.start(afterMs: UInt64(max(1, (lastCommitNs + windowNs - now) / 1_000_000)))
        }
    }

    /// While logs keep arriving, drain on a short timer instead of being woken for each first log after a drain;
    /// once a tick finds nothing, go back to waiting for a wake-up. The poll interval stays inside the window.
    private func keepPolling(after committed: Int) {
        guard !isStopped, let commitTimer else { return }
        if committed > 0 {
            _ = intake.setLoopPolling(true)
            if !commitTimerArmed {
                commitTimerArmed = true
                commitTimer.start(afterMs: UInt64(max(1, min(windowNs / 1_000_000, 5))))
            }
        } else if intake.setLoopPolling(false) > 0 {
            // Items admitted between the drain and the switch did not wake us: take them now.
            keepPolling(after: commitNow())
        }
    }

    /// Drains the intake and stores everything in one transaction per run of events. Returns how many items it took.
    @discardableResult
    func commitNow() -> Int {
        loop.assertOnLoopThread()
        // A host's call made from inside a commit (a callback the commit runs) finds its items taken already: a
        // nested drain would store the later ones before the rest of this batch.
        guard !committing else { return 0 }
        committing = true
        defer { committing = false }
        // An armed commit timer is left to fire: while the loop polls, admits do not wake it, and this timer is
        // what drains them. Stopping it here, as a direct commit (host mode: a critical log, a status call, a
        // drain, on the loop thread) once did, left the intake polling with no timer, and the next normal logs
        // waited for an unrelated wake-up. A tick that finds nothing just ends the polling.
        var batch = intake.takeAll()
        defer { intake.recycle(&batch) }
        guard !batch.items.isEmpty || !retryBuffer.isEmpty else { return 0 }
        var logs: [NewLog] = []
        var waiters: [(Int, CommitWaiter)] = []
        var names: [String] = []
        logs.reserveCapacity(batch.items.count + retryBuffer.count)
        logs.append(contentsOf: retryBuffer)
        names.append(contentsOf: retryNames)
        retryBuffer.removeAll()
        retryNames.removeAll()
        var barriers: [CommitWaiter] = []

        for item in batch.items {
            switch item {
            case .event(let draft):
                if analytics.sessionLimitReached(atMonoNs: draft.monoNs) {
                    apply(.sessionLimit(Moment(wallMs: draft.wallMs, monoNs: draft.monoNs)), into: &logs)
                }
                if let waiter = draft.waiter { waiters.append((logs.count, waiter)) }
                if let name = draft.newName { names.append(name) }
                logs.append(makeLog(draft, body: batch.body(of: draft)))
            case .barrier(let waiter):
                barriers.append(waiter)
            case .setEnabled(let enabled):
                flush(&logs, &names, &waiters)
                applyEnabled(enabled)
            case .analytics(let command):
                apply(command, into: &logs)
            case .task(let work):
                flush(&logs, &names, &waiters)
                work()
            }
        }
        flush(&logs, &names, &waiters)
        lastCommitNs = configuration.clock.monoNs()
        for barrier in barriers { barrier.signal(nil) }
        return batch.items.count
    }

    /// `stamp`: the session and user of a log the analytics model wrote; nil for the current ones.
    func makeLog(_ draft: EventDraft, body: ArraySlice<UInt8>? = nil, stamp: [UInt8]? = nil) -> NewLog {
        let body = body ?? draft.body[...]
        let id = ids.uuid()
        let stamp = stamp ?? analytics.stamp
        var payload: [UInt8] = []
        payload.reserveCapacity(body.count + stamp.count + 64)
        payload.append(contentsOf: draft.type.payloadPrefix)
        id.write(into: &payload)
        payload.append(UInt8(ascii: "\""))
        // SPEC T7: `sid` (A1–A3) and `userId` (A8) as current in queue order.
        payload.append(contentsOf: stamp)
        if !body.isEmpty {
            payload.append(UInt8(ascii: ","))
            payload.append(contentsOf: body)
        }
        payload.append(UInt8(ascii: "}"))
        return NewLog(id: id, priority: draft.priority, wallMs: draft.wallMs, monoNs: draft.monoNs, boot: boot,
                      context: contextID, payload: payload)
    }

    private func flush(_ logs: inout [NewLog], _ names: inout [String], _ waiters: inout [(Int, CommitWaiter)]) {
        guard !logs.isEmpty || !names.isEmpty else { return }
        do {
            let result = try store.append(logs, newEventNames: names)
            counters.stored += result.stored
            delivery?.stored()
            counters.rejected += result.rejected.count
            if !result.rejected.isEmpty {
                logger.warning("logs not stored", metadata: [
                    "outbox.rejected": "\(result.rejected.count)",
                    "outbox.reason": "\(result.rejected.values.first.map(String.init(describing:)) ?? "")",
                ])
            }
            for (index, waiter) in waiters { waiter.signal(result.rejected[index]) }
        } catch {
            // The transaction rolled back. Normal logs were accepted already: keep them and try again at the next
            // commit. A critical caller still waits, so it gets the error and decides (its log is not kept).
            let failure = error
            let waited = Set(waiters.map(\.0))
            for (_, waiter) in waiters { waiter.signal(failure) }
            retryNames.append(contentsOf: names)
            // SPEC S2: what cannot be kept is counted. Lack of room does not pass by waiting (the store already
            // evicted and split for it), and memory is no store: beyond `maxRetryBuffer` the oldest go first.
            var dropped = 0
            for (index, log) in logs.enumerated() where !waited.contains(index) {
                if failure.isStorageFull { dropped += 1 } else { retryBuffer.append(log) }
            }
            if retryBuffer.count > Self.maxRetryBuffer {
                let overflow = retryBuffer.count - Self.maxRetryBuffer
                retryBuffer.removeFirst(overflow)
                dropped += overflow
            }
            counters.rejected += dropped
            logger.error("storing logs failed; what could not be kept is counted as rejected, the rest retried", metadata: [
                "outbox.error": "\(failure)", "outbox.rejected": "\(dropped)",
                "outbox.retrying": "\(retryBuffer.count)",
            ])
            if let commitTimer, !commitTimerArmed {
                commitTimerArmed = true
                commitTimer.start(afterMs: 1000)
            }
        }
        logs.removeAll(keepingCapacity: true)
        names.removeAll()
        waiters.removeAll()
    }

    private func applyEnabled(_ enabled: Bool) {
        collecting = enabled
        do {
            try store.setMeta(MetaKey.enabled, enabled ? "1" : "0")
            if !enabled {
                // SPEC T6: the user opted out — what was stored goes too, and nothing held for delivery leaves.
                retryBuffer.removeAll()
                if let delivery { delivery.optOut() } else { try store.deleteAllLogs() }
                logger.info("collection disabled; stored logs deleted")
            } else {
                delivery?.optIn()
                logger.info("collection enabled")
            }
        } catch {
            logger.error("could not persist the enabled flag", metadata: ["outbox.error": "\(error)"])
        }
    }

    // MARK: - Runtime reconfiguration (SPEC R8)

    /// Applies an update validated on the caller's thread: new requests use it, batches in flight finish under the
    /// old settings. A new transport only when its own settings changed (it keeps its connections otherwise).
    func reconfigure(_ updated: Configuration, installID: UUID, previous: Configuration) {
        loop.assertOnLoopThread()
        guard let delivery, let endpoint = updated.endpoint else { return }
        var sender: (any HTTPSender)?
        if updated.caFile != previous.caFile || updated.requestTimeout != previous.requestTimeout {
            do {
                sender = try makeSender(updated)
            } catch {
                logger.error("the updated transport settings could not be applied; the old ones stay",
                             metadata: ["outbox.error": "\(error)"])
            }
        }
        // The wire is a value built from the configuration: the updated one replaces it whatever changed.
        let wire = updated.wire(installID: installID)
        delivery.reconfigure(wire.request(endpoint: endpoint, credentials: updated.credentials(installID: installID)),
                             sender: sender, wire: wire)
        logger.info("configuration updated", metadata: ["outbox.endpoint": "\(endpoint)",
                                                        "outbox.destination": "\(updated.destination)"])
    }

    /// The engine's lane on the loop's shared transport when the host gave one (SPEC F4), else a transport of its own.
    private func makeSender(_ configuration: Configuration) throws -> any HTTPSender {
        let options = transportOptions(configuration)
        if let shared = configuration.sharedTransport {
            if loop.isHosted, shared.loop.raw == loop.raw, let lane = try shared.lane(options: options, logger: logger) {
                return lane
            }
            logger.warning("the shared transport belongs to another loop, is closed or has other settings; this engine uses its own")
        }
        return try Transport(loop: loop, options: options, logger: logger)
    }

    func transportOptions(_ configuration: Configuration) -> TransportOptions {
        var options = TransportOptions()
        options.requestTimeout = configuration.requestTimeout
        options.caFile = configuration.caFile
        options.userAgent = "outbox/\(OutboxVersion.string)"
        return options
    }

    // MARK: - Reachability (SPEC N1, N2, R6)

    private func networkStateChanged(_ state: NetworkState) {
        setNetworkType(state.networkType)
        guard reachabilityOverride == nil else { return }
        delivery?.reachability(online: state.online)
        // SPEC R6: the watcher reports a change of the default route's interface too; online, that is a change.
        if state.online { delivery?.networkChanged() }
    }

    /// SPEC N2: the host's word overrides the watcher; `.online` after `.offline` is a network change (R6).
    func setReachability(_ reachability: Reachability?) {
        loop.assertOnLoopThread()
        reachabilityOverride = reachability
        switch reachability {
        case .online?: delivery?.reachability(online: true)
        case .offline?: delivery?.reachability(online: false)
        case nil: delivery?.reachability(online: watcher?.state.online ?? true)
        }
    }

    static func isLoopback(_ endpoint: String) -> Bool {
        guard let host = URLComponents(string: endpoint)?.host?.lowercased() else { return false }
        return host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
    }

    // MARK: - Housekeeping

    private func runHousekeeping() {
        refreshDeviceContext()
        do {
            let expired = try store.expire(nowMs: configuration.clock.wallMs())
            if expired > 0 { delivery?.stored() }
        } catch {
            logger.error("expiry failed", metadata: ["outbox.error": "\(error)"])
        }
    }

    // MARK: - Shutdown

    /// Commits what is queued, closes the store and every handle. Runs on the loop thread.
    func stop() {
        guard !isStopped else { return }
        isStopped = true
        commitNow()
        delivery?.close()
        watcher?.close()
        if !retryBuffer.isEmpty {
            counters.rejected += retryBuffer.count
            logger.error("logs could not be stored before shutdown; counted as rejected", metadata: ["outbox.lost": "\(retryBuffer.count)"])
            retryBuffer.removeAll()
        }
        store.close()
        intake.detachWake()
        loop.closeAll()
    }
}

/// What this engine did since it started. Evictions and expiry are the store's own counts (`LogStore`).
struct EngineCounters: Sendable, Equatable {
    var stored = 0
    var rejected = 0
}

enum MetaKey {
    static let installID = "install_id"
    static let enabled = "enabled"
    static let userID = "user_id"
    static let firstStart = "first_start_done"
    /// Why delivery is disabled (SPEC R5), persisted so that `outbox status` can show it.
    static let disabledReason = "disabled_reason"
    /// The destination of the last request (SPEC D1), for `outbox status`.
    static let destination = "destination"
    /// Logs a server accepted the request of but refused inside it (SPEC D5), a total kept across runs.
    static let serverRejected = "server_rejected"
}

/// The kernel's boot id, reduced to 64 bits: monotonic times compare only within one boot (SPEC A9).
enum BootID {
    static let current: Int64 = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return 0 }
        let hex = text.filter(\.isHexDigit).prefix(16)
        return Int64(bitPattern: UInt64(hex, radix: 16) ?? 0)
    }()
}
