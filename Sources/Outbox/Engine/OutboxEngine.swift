import FoundationEssentials
import Logging
import Synchronization

/// The engine an app embeds: it records analytics logs durably in SQLite (and, with delivery configured, sends
/// them in batches). Every public method may be called from any thread; none blocks on disk or network, except
/// that a `.critical` log waits for its commit (SPEC T5).
///
/// ```swift
/// let engine = try OutboxEngine(configuration: Configuration(storePath: "/tmp/app.outbox"))
/// try engine.trackEvent("signup", properties: ["plan": "pro", "seats": 3])
/// try engine.trackEvent("payment", flags: .critical)   // committed before this returns
/// await engine.persisted()                               // everything so far is on disk
/// engine.shutdown()
/// ```
public final class OutboxEngine: @unchecked Sendable {
    /// The anonymous install id (SPEC A8), persisted in the store; sent as `Install-ID`.
    public let installID: UUID
    /// Where the store was moved aside because it was corrupt at open (SPEC S7); nil when it was healthy.
    public let recoveredCorruptStore: String?
    /// Logs lost before this start because the store's WAL was cut short while no engine ran (SPEC S7), found by the
    /// store's commit mark and reported once (also in `status().lostAtOpen` and an error log); 0 normally.
    public let lostLogsAtOpen: Int
    let configuration: Configuration
    let logger: Logger
    let loop: EventLoop
    let intake: Intake
    /// Where callers build their logs' payloads (the loop publishes what they need).
    let callerPayloads: CallerPayloads
    let core: EngineCore
    /// Duration timers and open screens (SPEC A4, A6): see OutboxEngine+Analytics.swift.
    let stopwatches = Stopwatches()
    /// SPEC H1: the before-store hook callers run, and what it dropped.
    let beforeStore: BeforeStoreSlot
    private let isShutDown = Mutex(false)
    /// The configuration as last updated (SPEC R8), for validating the next update against it.
    let updateLock: Mutex<Configuration>

    /// Opens (or creates) the store and starts the engine. Errors: `invalidConfiguration`, `storeLocked` when
    /// another engine holds the file, `storeTooNew`, `storage`/`io` when the file cannot be opened.
    public init(configuration: Configuration) throws {
        try configuration.validate()
        TestingPhase.startIfRequested()
        self.configuration = configuration
        self.updateLock = Mutex(configuration)
        self.beforeStore = BeforeStoreSlot(configuration.beforeStoreHook)
        self.logger = configuration.logger
        let store = try LogStore(path: configuration.storePath, limits: configuration.storeLimits,
                                 clock: configuration.clock, logger: configuration.logger)
        var storeOwnedHere = true
        defer { if storeOwnedHere { store.close() } }

        let installID: UUID
        if let text = try store.meta(MetaKey.installID), let id = UUID(uuidString: text) {
            installID = id
        } else {
            installID = UUID()
            try store.setMeta(MetaKey.installID, installID.uuidString.lowercased())
        }
        self.installID = installID
        self.recoveredCorruptStore = store.recoveredFromCorruption
        self.lostLogsAtOpen = store.lostAtOpen
        let enabled = try store.meta(MetaKey.enabled) != "0"
        // SPEC A5: `$is_first_time` belongs to the first start of this install, whether or not it is tracked.
        let isFirstStart = try store.meta(MetaKey.firstStart) == nil
        if isFirstStart { try store.setMeta(MetaKey.firstStart, "1") }
        let userID = try store.meta(MetaKey.userID)
        let expired = try store.expire(nowMs: configuration.clock.wallMs())
        if expired > 0 { logger.info("expired logs deleted at start", metadata: ["outbox.expired": "\(expired)"]) }
        intake = Intake(enabled: enabled, names: try store.eventNames(), nameHasher: store.keys?.nameHasher,
                        maxNames: configuration.maxDistinctEventNames, capacity: configuration.intakeCapacity)

        loop = try EventLoop(mode: configuration.runMode)
        callerPayloads = CallerPayloads(idSeed: configuration.testingIDSeed)
        core = EngineCore(configuration: configuration, loop: loop, store: store, intake: intake,
                          callerPayloads: callerPayloads)
        core.analytics = AnalyticsState(settings: configuration.analyticsSettings, userID: userID, isFirstStart: isFirstStart)
        core.collecting = enabled
        storeOwnedHere = false
        try core.start(installID: installID)
        // SPEC A1, A5: the first item of the queue — the session (and `$AppStart`) precede every log of the host.
        try? intake.submit(.analytics(.engineStarted(Moment.now(configuration.clock))), urgent: false)
        do {
            try loop.startThread(name: "outbox-loop")
        } catch {
            // No thread for the loop (resource exhaustion): close what was opened, here, and say so.
            core.stop()
            loop.runHereUntilClosed()
            throw error
        }
        logger.info("engine started", metadata: ["outbox.store": "\(configuration.storePath)"])
    }

    // MARK: - Tracking (SPEC T1–T7)

    /// Records an event (SPEC T1). Names longer than 256 characters are truncated, properties beyond 20 dropped
    /// (keeping the first 20 in key order), long keys and strings truncated to 125 — each with a warning.
    /// Throws `emptyEventName`, `invalidPropertyValue` (NaN, infinity), `tooManyEventNames` (SPEC T4), and for a
    /// `.critical` log any error that prevented its commit. While disabled (SPEC T6) the event is ignored.
    public func trackEvent(_ name: String, properties: [String: PropertyValue] = [:], flags: LogFlags = .normal) throws {
        TestingPhase.enter(.tracking); defer { TestingPhase.leave(.tracking) }
        // SPEC H1: without a hook this load is all it costs.
        if let hook = beforeStore.hook {
            try trackHooked(hook, OutgoingEvent(name: name, properties: properties), flags: flags)
            return
        }
        try EventValidator.validate(name: name, properties: properties) { name, body, adjustments throws(OutboxError) in
            if !adjustments.isEmpty { warn(name: name, adjustments) }
            let clock = configuration.clock
            try admit(EventDraft(priority: flags.priority, wallMs: clock.wallMs(), monoNs: clock.monoNs(), body: []),
                      body: body, name: name)
        }
    }

    /// SPEC H1: the call's own refusals (T2–T3), then the hook on this thread, then what it left validated as any event
    /// (T2–T4, the name counted after the hook). True when the event was stored or dropped by the hook, false when
    /// tracking is off (SPEC T6).
    @inline(never)
    @discardableResult
    func trackHooked(_ hook: BeforeStoreHook, _ event: consuming OutgoingEvent, flags: LogFlags) throws(OutboxError) -> Bool {
        var event = event
        try event.checkRefusals()
        guard try hook.run(&event) else {
            // Shut down or opted out, nothing is collected and nothing counted: the call says so as it would without
            // a hook (two looks under the intake's lock, on this path only).
            guard !intake.peek().closed else { throw .shutDown }
            guard intake.isEnabled else { return false }
            beforeStore.dropped.add(1, ordering: .relaxed)
            beforeStore.droppedMetric.increment()
            return true
        }
        return try EventValidator.validate(name: event.name, properties: event.properties) { name, body, adjustments throws(OutboxError) in
            if !adjustments.isEmpty { warn(name: name, adjustments) }
            let clock = configuration.clock
            return try admit(EventDraft(priority: flags.priority, wallMs: clock.wallMs(), monoNs: clock.monoNs(), body: []),
                             body: body, name: name)
        }
    }

    /// Hands a validated log to the loop (SPEC T1, T5). `name`: the event name for SPEC T4, nil for other types.
    func admit(_ draft: EventDraft, name: String?) throws {
        var draft = draft
        let body = draft.body
        draft.body = []
        try body.withUnsafeBytes { try admit(draft, body: $0, name: name) }
    }

    /// `admit` with the log's JSON apart from the draft (whose own `body` is empty): the intake copies it into its
    /// queue, so an event's JSON can stay on the caller's stack. False when tracking is off (SPEC T6).
    @discardableResult
    func admit(_ draft: consuming EventDraft, body: UnsafeRawBufferPointer, name: String?) throws(OutboxError) -> Bool {
        let priority = draft.priority
        let onLoopThread = loop.isOnLoopThread
        let waiter = priority == .critical && !onLoopThread ? CommitWaiter() : nil
        draft.waiter = waiter
        let ready = draft
        let admission = try callerPayloads.build(type: ready.type, body: body) { built throws(OutboxError) in
            try intake.admit(name: name, draft: ready, body: body, built: built, onLoopThread: onLoopThread)
        }
        guard admission == .accepted else { return false }
        if onLoopThread {
            // Host mode, called from the loop's own thread: waiting for the loop would deadlock, so commit here.
            let queue = intake.peek()
            if priority == .critical || queue.full || queue.count >= intake.commitThreshold { core.commitNow() }
        } else if let waiter, let error = waiter.wait() {
            throw error
        }
        return true
    }

    func warn(name: String, _ adjustments: EventValidator.Adjustments) {
        var metadata: Logger.Metadata = ["outbox.event": "\(name)"]
        if adjustments.nameTruncated { metadata["outbox.name_truncated_to"] = "\(EventValidator.maxNameLength)" }
        if !adjustments.droppedKeys.isEmpty { metadata["outbox.dropped_properties"] = "\(adjustments.droppedKeys)" }
        if !adjustments.truncatedKeys.isEmpty { metadata["outbox.truncated_keys"] = "\(adjustments.truncatedKeys)" }
        if !adjustments.truncatedValues.isEmpty { metadata["outbox.truncated_values"] = "\(adjustments.truncatedValues)" }
        logger.warning("event adjusted to the limits of SPEC T2-T3", metadata: metadata)
    }

    /// Returns once everything tracked before the call is committed to SQLite (SPEC T5).
    public func persisted() async {
        if loop.isOnLoopThread { core.commitNow(); return }
        _ = await withCheckedContinuation { (continuation: CheckedContinuation<OutboxError?, Never>) in
            do {
                try intake.submit(.barrier(CommitWaiter(continuation: continuation)))
            } catch {
                continuation.resume(returning: nil)  // shut down: everything was committed by shutdown
            }
        }
    }

    /// SPEC T6: persisted across restarts. Setting `false` deletes the stored logs and ignores new ones.
    public var isEnabled: Bool { intake.isEnabled }

    public func setEnabled(_ enabled: Bool) throws {
        try intake.submit(.setEnabled(enabled))
        if loop.isOnLoopThread { core.commitNow() }
    }

    // MARK: - Delivery (SPEC C5–C8, R5, N2)

    /// SPEC C5: stops sending; tracking and storing go on. In-flight requests finish.
    public func pause() { onLoop { $0.delivery?.pause() } }

    /// SPEC C5: sends what accumulated.
    public func resume() { onLoop { $0.delivery?.resume() } }

    /// SPEC C7: sends everything waiting now, whatever the dispatch mode. In host mode the host's loop is held
    /// until the requests this dispatch started have finished.
    public func dispatch() {
        onLoop(committingFirst: true) { core in
            guard let delivery = core.delivery else { return }
            guard core.loop.isHosted else { delivery.dispatch(completion: nil); return }
            let pending = core.loop.pendingCallback()
            delivery.dispatch { _ in pending.ran() }
        }
    }

    /// SPEC C7: like `dispatch()`, then calls `completion` once (on the loop thread) with the result of the first
    /// request it started, or `.noData` when nothing waited — call again until `.noData` to drain. In host mode
    /// the host's `uv_run` returns only after `completion` ran.
    public func dispatch(completion: @escaping @Sendable (DispatchResult) -> Void) {
        onLoop(committingFirst: true) { core in
            guard let delivery = core.delivery else { completion(.noData); return }
            delivery.dispatch(completion: core.loop.holding(completion))
        }
    }

    /// SPEC R5: re-enables sending after exhausted retries and sends waiting batches now.
    public func retryNow() { onLoop(committingFirst: true) { $0.delivery?.retryNow() } }

    /// SPEC N2: the host's word on reachability overrides the rtnetlink watcher; `nil` hands back to the watcher.
    public func setReachability(_ reachability: Reachability?) {
        onLoop { $0.setReachability(reachability) }
    }

    /// Waits until the store is empty and nothing is in flight, or `timeout` passes. Returns true when drained.
    public func waitUntilDelivered(timeout: Duration) async -> Bool {
        let once = OnceFlag()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            onLoop { core in
                guard let delivery = core.delivery else {
                    if once.claim() { continuation.resume(returning: false) }
                    return
                }
                // SPEC C7: in host mode the wait holds the host's loop until it is answered.
                let pending = core.loop.pendingCallback()
                delivery.whenIdle {
                    if once.claim() { continuation.resume(returning: true) }
                    pending.ran()
                }
                let deadline = LoopTimer(loop: core.loop)
                deadline.action = { [unowned deadline] in
                    deadline.close()
                    if once.claim() { continuation.resume(returning: false) }
                    pending.ran()
                }
                deadline.start(afterMs: UInt64(max(0, timeout.milliseconds)))
                delivery.whenIdle { deadline.close() }
            } orElse: {
                if once.claim() { continuation.resume(returning: false) }
            }
        }
    }

    /// SPEC C8: sends what it can within `drainFor`, then shuts down; what was not delivered stays stored.
    public func shutdown(drainFor: Duration) async {
        // SPEC A5: the `$AppEnd` of this run is written first, so that it can be delivered with the rest.
        try? intake.submit(.analytics(.engineStopping(Moment.now(configuration.clock))), urgent: false)
        dispatch()
        _ = await waitUntilDelivered(timeout: drainFor)
        shutdown()
    }

    /// Runs `body` on the loop thread (inline when already there); throws `shutDown` when the engine is.
    /// `committingFirst` as `onLoop`'s.
    func submitToLoop(committingFirst: Bool = false, _ body: @escaping (EngineCore) -> Void) throws {
        if loop.isOnLoopThread {
            guard !core.isStopped else { throw OutboxError.shutDown }
            if committingFirst { core.commitNow() }
            body(core)
            return
        }
        let core = self.core
        try intake.submit(.task { body(core) })
    }

    /// Runs `body` on the loop thread (inline when already there); `orElse` runs when the engine is shut down.
    /// `committingFirst`: what was tracked before the call is committed before `body` runs (SPEC C7). From another
    /// thread the intake's order does that; on the loop thread (host mode, C, Node) the logs may still wait in the
    /// intake for their group-commit window, and a dispatch would answer `.noData` with logs waiting.
    func onLoop(committingFirst: Bool = false, _ body: @escaping (EngineCore) -> Void, orElse: (() -> Void)? = nil) {
        if loop.isOnLoopThread {
            guard !core.isStopped else { orElse?(); return }
            if committingFirst { core.commitNow() }
            body(core)
            return
        }
        let core = self.core
        do {
            try intake.submit(.task { body(core) })
        } catch {
            orElse?()
        }
    }

    // MARK: - Inspection

    /// The store's counters and the engine's state (SPEC X4), read on the loop thread.
    public func status() async throws -> EngineStatus {
        if loop.isOnLoopThread { return try makeStatus() }
        return try await withCheckedThrowingContinuation { continuation in
            do {
                try intake.submit(.task { [self] in continuation.resume(with: Result { try self.makeStatus() }) })
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    func makeStatus() throws -> EngineStatus {
        var status = EngineStatus(
            store: StoreReport(counts: try core.store.counts(), enabled: intake.isEnabled,
                               disabledReason: core.delivery?.disabledReason,
                               installID: installID.uuidString.lowercased(),
                               destination: try core.store.meta(MetaKey.destination),
                               serverRejected: Int(try core.store.meta(MetaKey.serverRejected) ?? "") ?? 0,
                               rotatingStoreKey: core.store.rotationPending, nowMs: configuration.clock.wallMs()),
            stored: core.counters.stored,
            // The store's count: evictions made for a claim or a meta write (S7 too) are evictions all the same.
            evicted: core.store.evictedTotal, rejected: core.counters.rejected,
            expired: core.store.expiredTotal,
            delivered: core.delivery?.counters.delivered ?? 0, deadLettered: core.store.deadLetteredTotal,
            retries: core.delivery?.retries ?? 0, requests: core.delivery?.counters.requests ?? 0,
            probes: core.delivery?.counters.probes ?? 0, lostAtOpen: lostLogsAtOpen, unreadable: core.store.unreadableTotal,
            droppedByPolicy: beforeStore.dropped.load(ordering: .relaxed), skipped: core.delivery?.skipped ?? 0)
        // SPEC D18: each destination's figures, with what this engine delivered to it.
        if var destinations = try StoreInspector.readDestinations(core.store.db) {
            for member in core.delivery?.members ?? [] {
                destinations[member.name]?.delivered = member.driver.counters.delivered
                destinations[member.name]?.skipped = member.driver.skipped
                destinations[member.name]?.disabledReason = member.driver.disabledReason
            }
            status.store.destinations = destinations
            status.store.serverRejected = destinations.values.reduce(0) { $0 + $1.serverRejected }
        }
        return status
    }

    // MARK: - Shutdown

    /// Commits everything tracked so far, closes the store and every libuv handle. Later calls throw `shutDown`.
    /// Dedicated mode: returns after the loop thread ended (`uv_loop_close` returned). Host mode: call it on the
    /// loop's thread; the handles finish closing during the host's next `uv_run`.
    public func shutdown() {
        isShutDown.withLock { isShutDown in
            guard !isShutDown else { return }
            isShutDown = true
            stopEngine()
        }
    }

    private func stopEngine() {
        try? intake.submit(.analytics(.engineStopping(Moment.now(configuration.clock))), urgent: false)
        _ = intake.close()
        if loop.isHosted {
            core.stop()
        } else {
            loop.joinThread()
            if let result = loop.closeResult, result != 0 {
                logger.error("libuv loop closed with handles still open", metadata: ["outbox.uv": "\(result)"])
            }
        }
        logger.info("engine stopped")
    }

    /// Runs `body` with the store on the loop thread after committing what is queued (tests, the crash child).
    func withStore<T: Sendable>(_ body: @escaping @Sendable (LogStore) throws -> T) async throws -> T {
        if loop.isOnLoopThread { core.commitNow(); return try body(core.store) }
        let core = self.core
        return try await withCheckedThrowingContinuation { continuation in
            do {
                try intake.submit(.task { continuation.resume(with: Result { try body(core.store) }) })
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// `uv_loop_close`'s result in dedicated mode after `shutdown()` (0: no handle leaked). For tests.
    var dedicatedLoopCloseResult: Int32? { loop.closeResult }
    var openHandleCount: Int { loop.openHandleCount }
}

/// A snapshot of the engine: what the store holds (SPEC X4, the same `StoreReport` that `outbox status` prints,
/// whose fields read through: `status.pendingNormal`) and what this engine did since it started.
@dynamicMemberLookup
public struct EngineStatus: Sendable, Equatable, Codable {
    public var store: StoreReport
    /// Since this engine started.
    public var stored: Int
    public var evicted: Int
    public var rejected: Int
    public var expired: Int
    public var delivered: Int
    public var deadLettered: Int
    public var retries: Int
    public var requests: Int
    /// SPEC R9: requests sent as probes during faults (also counted in `requests`).
    public var probes: Int = 0
    /// Logs found lost at this engine's start (a WAL cut short while stopped, SPEC S7): see `lostLogsAtOpen`.
    public var lostAtOpen: Int = 0
    /// SPEC K1: logs of a sealed store that did not open under its key (altered on disk), deleted unsent.
    public var unreadable: Int = 0
    /// SPEC H1: events the before-store hook dropped (never stored; apart from `stored` and `rejected`).
    public var droppedByPolicy: Int = 0
    /// BEHAVIOUR H2, D18: logs a destination's policy settled without sending them (summed over the destinations).
    public var skipped: Int = 0

    public subscript<T>(dynamicMember keyPath: KeyPath<StoreReport, T>) -> T { store[keyPath: keyPath] }
}

/// SPEC N2: what the host says about the network.
public enum Reachability: Sendable, Equatable {
    case online
    case offline
}

/// A flag that lets exactly one of several racing callers through.
final class OnceFlag: Sendable {
    private let done = Atomic<Bool>(false)
    func claim() -> Bool {
        done.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }
}
