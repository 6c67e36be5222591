import FoundationEssentials
import Logging
import Synchronization

/// Everything the loop thread owns (docs/ARCHITECTURE.md, "Who owns what"): the store, the id generator, the counters.
/// Only the loop thread calls into it, except `init`, which runs before the loop starts.
///
/// A dispatcher: group commit's decisions are `CommitMachine`'s, delivery's `DeliveryMachine`'s; this carries out
/// their actions against the intake, the store and the loop's handles. Reachability (`EngineReachability`),
/// building and updating delivery (`DeliverySetup`) and the minute chores (`Housekeeping`) are their own types.
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
    private var housekeeping: Housekeeping?
    private var rotationTimer: LoopTimer?
    private var commits: CommitMachine
    /// Logs a failed transaction could not store; retried first at the next commit (never dropped).
    private var retryBuffer: [NewLog] = []
    /// At most this many logs wait in `retryBuffer` (SPEC S2: the oldest beyond it are counted as rejected).
    static let maxRetryBuffer = 10_000
    /// Event names of a failed transaction; persisted with the next one (SPEC T4 remembers them across restarts).
    private var retryNames: [String] = []
    private(set) var counters = EngineCounters()
    /// BEHAVIOUR O1: the engine's own counters through swift-metrics.
    private var metrics = EngineMetrics()
    var isStopped: Bool { commits.isStopped }
    /// Present when the configuration names an endpoint: one driver per destination (SPEC D15–D16).
    private(set) var delivery: DeliveryGroup?
    private var reachability: EngineReachability?
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

    /// What callers build payloads under: the loop publishes the stamp and the key with a new epoch whenever either
    /// changes (`publishForCallers`). `payloadEpoch` is the epoch published last.
    let callerPayloads: CallerPayloads
    private(set) var payloadEpoch: UInt64 = 0
    private var publishedStamp: [UInt8]?
    private var publishedKeyID: UInt32?
    /// Events whose payload the caller built and the loop stored as it was, and those the loop built again
    /// (the stamp or the key changed after the caller built it). For tests and the benches.
    private(set) var callerBuiltLogs = 0
    private(set) var rebuiltLogs = 0

    init(configuration: Configuration, loop: EventLoop, store: LogStore, intake: Intake,
         callerPayloads: CallerPayloads) {
        self.callerPayloads = callerPayloads
        self.configuration = configuration
        self.logger = configuration.logger
        self.loop = loop
        self.store = store
        self.intake = intake
        self.boot = BootID.current
        self.commits = CommitMachine(settings: .init(windowNs: configuration.groupCommitWindow.milliseconds * 1_000_000,
                                                     threshold: intake.commitThreshold))
        self.ids = configuration.testingIDSeed.map(IDGenerator.init(seed:)) ?? IDGenerator()
        store.metrics = StoreMetrics(evicted: store.evictedTotal, expired: store.expiredTotal)
    }

    /// Registers the handles. On the creating thread before the loop runs (dedicated) or on the host's loop thread.
    func start(installID: UUID) throws {
        store.owner.hand(to: loop)
        device = DeviceContext.collect(appVersion: configuration.appVersion, appBuild: configuration.appBuild,
                                       appNamespace: configuration.appNamespace)
        let destinations = configuration.namedDestinations
        if let endpoint = DeliverySetup.watchedEndpoint(destinations) {
            let delivery = try DeliverySetup(loop: loop, logger: logger)
                .makeGroup(configuration, destinations: destinations, store: store, installID: installID, device: device, boot: boot)
            self.delivery = delivery
            reachability = EngineReachability(loop: loop, delivery: delivery, endpoint: endpoint,
                                              watches: configuration.watchesNetwork, logger: logger) { [unowned self] type in
                self.setNetworkType(type)
            }
        }
        startDeviceContext(networkType: reachability?.watchedNetworkType)
        let async = LoopAsync(loop: loop) { [unowned self] in self.onWake() }
        self.async = async
        intake.setWake { async.send() }
        commitTimer = LoopTimer(loop: loop) { [unowned self] in self.drive(.timerFired) }
        housekeeping = Housekeeping(loop: loop) { [unowned self] in self.runHousekeeping() }
        publishForCallers()
        // A rotation a kill interrupted (SPEC K1) goes on where it stopped.
        if store.rotationPending { stepRotation() }
        perform(commits.start(withDelivery: delivery != nil))
    }

    // MARK: - Group commit (SPEC T5): carrying out CommitMachine's actions

    private func onWake() {
        let (count, urgent, closed, full) = intake.peek()
        drive(.wake(.init(count: count, urgent: urgent, closed: closed, full: full), nowNs: configuration.clock.monoNs()))
    }

    private func drive(_ event: CommitMachine.Event) {
        perform(commits.handle(event))
    }

    private func perform(_ actions: [CommitMachine.Action]) {
        for action in actions {
            switch action {
            case .commit:
                let taken = drainIntake()
                drive(.committed(taken: taken, nowNs: configuration.clock.monoNs()))
            case .armTimer(let afterMs):
                commitTimer?.start(afterMs: afterMs)
            case .startPolling:
                _ = intake.setLoopPolling(true)
            case .stopPolling:
                drive(.pollingStopped(admitted: intake.setLoopPolling(false)))
            case .pumpDelivery:
                delivery?.stored()
            case .close:
                close()
            }
        }
    }

    /// Stores what the intake holds now, for a caller on the loop thread (host mode: a critical log, a status read,
    /// a dispatch, a drain). Inside a commit (a callback the commit runs) it does nothing: the later items would be
    /// stored before the rest of that commit's.
    func commitNow() {
        loop.assertOnLoopThread()
        drive(.commitRequested)
    }

    /// Drains the intake and stores everything in one transaction per run of events. Returns how many items it took.
    private func drainIntake() -> Int {
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
                if draft.epoch == payloadEpoch, let payload = batch.payload(of: draft) {
                    callerBuiltLogs += 1
                    logs.append(NewLog(id: draft.id, priority: draft.priority, wallMs: draft.wallMs, monoNs: draft.monoNs,
                                       boot: boot, context: contextID, payload: payload, sealedUnder: draft.sealedUnder))
                } else {
                    if !draft.payloadRange.isEmpty { rebuiltLogs += 1 }
                    logs.append(makeLog(draft, body: batch.body(of: draft)))
                }
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
        for barrier in barriers { barrier.signal(nil) }
        return batch.items.count
    }

    /// Publishes the current stamp and store key to callers under a new epoch, if either changed since the last time.
    /// Called wherever they can change: at start, after each analytics command, after a new key.
    func publishForCallers() {
        let keyID = store.keys?.current.keyID
        guard payloadEpoch == 0 || analytics.stamp != publishedStamp || keyID != publishedKeyID else { return }
        payloadEpoch += 1
        publishedStamp = analytics.stamp
        publishedKeyID = keyID
        callerPayloads.publish(epoch: payloadEpoch, stamp: analytics.stamp, key: store.keys?.key)
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
            metrics.tracked.increment(by: Int64(result.stored))
            if !result.rejected.isEmpty {
                metrics.rejected.increment(by: Int64(result.rejected.count))
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
            metrics.rejected.increment(by: Int64(dropped))
            logger.error("storing logs failed; what could not be kept is counted as rejected, the rest retried", metadata: [
                "outbox.error": "\(failure)", "outbox.rejected": "\(dropped)",
                "outbox.retrying": "\(retryBuffer.count)",
            ])
            drive(.failed)
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

    // MARK: - Runtime reconfiguration (SPEC R8), reachability (SPEC N2)

    /// SPEC R8: reconfigures what the changed fields reach, the union of their rows' targets (`Configuration.schema`).
    func reconfigure(_ updated: Configuration, installID: UUID, previous: Configuration) {
        let targets = updated.applyTargets(changedFrom: previous)
        var applied = Reconfiguration(targets: targets)
        if targets.contains(.storeKey), let key = updated.storeKey {
            applied.storeKeyRotated = true
            // SPEC K1, R8: new values are sealed under the new key from now on; the stored ones, a step at a time.
            do {
                try store.beginRotation(to: key)
                publishForCallers()
                stepRotation()
            } catch {
                logger.error("the store key could not be changed; the store stays under its old key",
                             metadata: ["outbox.error": "\(error)"])
            }
        }
        defer { lastReconfiguration = applied }
        guard let delivery else { return }
        if targets.contains(.destinations) {
            let names = updated.namedDestinations.map { $0.name ?? NamedDestination.defaultName }
            if names != delivery.names {
                rebuildDelivery(updated, installID: installID)
                applied.destinationsRebuilt = true
                if let endpoint = DeliverySetup.watchedEndpoint(updated.namedDestinations), let reachability {
                    reachability.endpointChanged(to: endpoint)
                    applied.reachabilityEndpoint = endpoint
                }
                return
            }
        }
        // A kept name with changed fields (SPEC D18) is R8's change: its wire and transport are made again.
        let reach = targets.contains(.destinations) ? targets.union([.wire, .transport, .reachability]) : targets
        (applied.wire, applied.transportReplaced) = DeliverySetup(loop: loop, logger: logger)
            .reconfigure(delivery, to: updated, installID: installID, targets: reach)
        // SPEC N1, R8: from loopback to a remote endpoint the network matters again, and back it no longer does.
        if reach.contains(.reachability), let endpoint = DeliverySetup.watchedEndpoint(updated.namedDestinations), let reachability {
            reachability.endpointChanged(to: endpoint)
            applied.reachabilityEndpoint = endpoint
        }
    }

    /// SPEC D18: destinations were added or removed. Every destination's delivery stops (what it had in flight returns
    /// to its pending logs, and is sent again) and starts again for the new list, over the same store: a kept name
    /// keeps its progress, an added one receives the logs stored from now on, a removed one's logs leave.
    private func rebuildDelivery(_ updated: Configuration, installID: UUID) {
        delivery?.close()
        delivery = nil
        do {
            let group = try DeliverySetup(loop: loop, logger: logger)
                .makeGroup(updated, destinations: updated.namedDestinations, store: store, installID: installID,
                           device: device, boot: boot)
            if contextID != 0 { group.setDeviceContext(id: contextID, json: device.json()) }
            delivery = group
            reachability?.attach(group)
            group.stored()
        } catch {
            logger.error("the new list of destinations could not be applied; nothing is sent until the next update or start",
                         metadata: ["outbox.error": "\(error)"])
        }
    }

    /// What an update reached on the running engine (SPEC R8), for the tests that check that every changeable field
    /// reaches its part.
    struct Reconfiguration {
        var destinationsRebuilt = false
        var targets: ConfigurationApplyTargets
        /// The wire made again, when a field of the wire changed.
        var wire: (any DeliveryWire)? = nil
        var transportReplaced = false
        var reachabilityEndpoint: String? = nil
        var storeKeyRotated = false
    }

    /// The last update's reconfiguration (tests).
    private(set) var lastReconfiguration: Reconfiguration?

    /// Whether an rtnetlink watcher runs now (SPEC N1; tests).
    var watchesNetworkNow: Bool { reachability?.isWatching ?? false }

    func setReachability(_ reachability: Reachability?) {
        self.reachability?.setOverride(reachability)
    }

    // MARK: - Key rotation (SPEC K1, R8)

    /// Seals stored rows again, one small transaction per loop turn, until the rotation ends: tracking and delivery
    /// go on between the steps. A failed step (a full disk) is tried again a second later.
    private func stepRotation() {
        if rotationTimer == nil {
            rotationTimer = LoopTimer(loop: loop) { [unowned self] in self.stepRotation() }
        }
        do {
            if try store.rotateStep() {
                rotationTimer?.stop()
                return
            }
            rotationTimer?.start(afterMs: 0)
        } catch {
            logger.warning("a step of the store key's rotation failed; trying again", metadata: ["outbox.error": "\(error)"])
            rotationTimer?.start(afterMs: 1000)
        }
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
        drive(.shutdown)
    }

    private func close() {
        delivery?.close()
        reachability?.close()
        if !retryBuffer.isEmpty {
            counters.rejected += retryBuffer.count
            metrics.rejected.increment(by: Int64(retryBuffer.count))
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

/// The kernel's boot id, reduced to 64 bits: monotonic times compare only within one boot (SPEC A9).
enum BootID {
    static let current: Int64 = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return 0 }
        let hex = text.filter(\.isHexDigit).prefix(16)
        return Int64(bitPattern: UInt64(hex, radix: 16) ?? 0)
    }()
}
