/// Identifies a `dispatch(completion:)` caller or an idle waiter. The shell keeps the closures; the machine only
/// passes ids around, so that it stays a comparable value.
typealias WaiterID = Int

/// Logs the store holds that no batch has claimed, by priority. Read from the store (`BatchQueue.waiting()`) before
/// every decision: the machine keeps no count of its own (one source of truth: a second count would drift).
struct Waiting: Sendable, Equatable {
    var normal = 0
    var critical = 0
    var total: Int { normal + critical }
}

/// The moment an event happens, in the clocks delivery needs: monotonic for scheduling (back-off, intervals), wall
/// for a `Retry-After` date, both with the boot id for a log's age (SPEC S4).
struct DeliveryNow: Sendable, Equatable {
    var monoNs: Int64
    var wallMs: Int64
    var boot: Int64
    var monoMs: Int64 { monoNs / 1_000_000 }

    init(monoNs: Int64, wallMs: Int64, boot: Int64) {
        self.monoNs = monoNs
        self.wallMs = wallMs
        self.boot = boot
    }

    init(_ clock: any OutboxClock, boot: Int64) {
        self.init(monoNs: clock.monoNs(), wallMs: clock.wallMs(), boot: boot)
    }
}

/// Delivery's whole state as a pure value, tested without a loop, a clock or a socket: the shell (`DeliveryDriver`)
/// feeds it events and carries out the actions it returns against a `BatchQueue` and an `HTTPSender`. It owns each
/// batch's life (claimed → in flight → waiting for a retry → delivered / split / dead-lettered), the
/// classification of every transfer's result (SPEC R1), the scheduling of C1–C8, the back-off and disabling of
/// R3–R7, the dispatch and idle waiters, and the paused, offline, stopped and opted-out states. No clock, timer or
/// I/O in here.
struct DeliveryMachine: Sendable {
    typealias BatchKey = Int64

    struct Settings: Sendable, Equatable {
        /// SPEC C1.
        var batchSize = 50
        /// SPEC C2: maximum delay of the oldest waiting normal / critical log.
        var normalIntervalMs: Int64 = 6000
        var criticalIntervalMs: Int64 = 3000
        /// SPEC C3.
        var maxBatchesInFlight = 3
        /// SPEC C6: nil = automatic (C2); > 0 = periodic at that interval; ≤ 0 = manual (`dispatch()` only).
        var dispatchIntervalMs: Int64? = nil
        /// SPEC R5: after retries are exhausted, one probe batch goes through this long after; nil = until restart.
        var probeIntervalMs: Int64? = 1_800_000
        var retry = RetryPolicy()
        /// SPEC S4: a log older than this is never sent.
        var maxAgeMs: Int64 = 25 * 24 * 3600 * 1000
        /// SPEC R9–R10: recovery probing and the paced drain; nil gives R3/R5 alone (App Center's behaviour). The
        /// machine's own default is nil so that its tests of R3–R5 read as those rules; `Configuration` turns it on.
        var recovery: Recovery? = nil
    }

    /// SPEC R9–R10's intervals, in milliseconds.
    struct Recovery: Sendable, Equatable {
        /// The first probe's interval; each next one doubles, up to `capMs`.
        var initialMs: Int64 = 1000
        var capMs: Int64 = 10_000
        /// The cap once a fault has lasted `longFaultAfterMs`.
        var longCapMs: Int64 = 60_000
        var longFaultAfterMs: Int64 = 300_000
        /// After R6, `retryNow` or an update, the first request waits a random time up to this.
        var drainJitterMs: Int64 = 1000

        /// The wait before the next probe after `probes` were sent in a fault that began `faultMs` ago, drawn
        /// uniformly in [interval/2, interval] as R3's are.
        func probeDelay<R: RandomNumberGenerator>(probes: Int, faultMs: Int64, capped: Bool, using random: inout R) -> Int64 {
            let cap = faultMs >= longFaultAfterMs ? longCapMs : capMs
            var interval = capped ? cap : initialMs
            if !capped {
                for _ in 0..<min(probes, 62) where interval < cap { interval *= 2 }
                interval = min(interval, cap)
            }
            let low = interval / 2
            guard interval > low else { return interval }
            return Int64.random(in: low...interval, using: &random)
        }
    }

    /// SPEC R9: a fault holds from a retryable failure until a success.
    struct Fault: Equatable, Sendable {
        var sinceMs: Int64
        /// Probes sent in this fault.
        var probes = 0
        var nextProbeAtMs: Int64
    }

    /// Why nothing is sent although logs wait (SPEC R5, R1), visible through the API and `outbox status`.
    enum Stop: Equatable, Sendable {
        /// A batch used all its retries at `sinceMs` (monotonic): a probe may go through later.
        case retriesExhausted(sinceMs: Int64, lastError: String)
        /// 401/403/404 or a redirect the engine does not follow: only a restart or `update` resumes (SPEC R8).
        case refused(status: Int, reason: String)

        /// How a `retriesExhausted` reason begins, as persisted for `outbox status` (which tells it from a stop by it).
        static let retriesExhaustedWords = "retries exhausted"

        var description: String {
            switch self {
            case .retriesExhausted(_, let error): return "\(Self.retriesExhaustedWords) (last error: \(error))"
            case .refused(0, let reason): return "TLS identity: \(reason)"
            case .refused(let status, let reason): return "server answered \(status): \(reason)"
            }
        }
    }

    /// Where a batch is in its life.
    enum Phase: Equatable, Sendable {
        /// Its request is on the wire.
        case inFlight
        /// Its last attempt failed; it goes again at `atMs` (monotonic), holding its lease meanwhile (SPEC R3).
        case waitingRetry(atMs: Int64)
    }

    /// A batch holding a lease, or a part of one being split or bisected (SPEC R1 413/400).
    struct Flight: Equatable, Sendable {
        var logs: [StoredLog]
        /// The store's lease of a whole claimed batch (nil for the parts of a bisected one).
        var batchID: Int64?
        var phase: Phase = .inFlight
        /// SPEC R3: each batch has its own retry state.
        var failedAttempts = 0
        /// SPEC R5: the one batch let through while retries are exhausted; R9: the one request sent during a fault.
        var isProbe = false
        /// SPEC R9: when a batch waiting for its R3 retry is sent early as a probe, that retry's time, kept for it
        /// should the probe fail (a probe's failure uses up no attempt).
        var retryAtBeforeProbeMs: Int64?
    }

    /// What a finished transfer means for its batch (SPEC R1).
    enum Outcome: Equatable, Sendable {
        case delivered
        /// Connection errors, 408, 429, 5xx but 501/505. `retryAfterMs`: the server's wish (SPEC R4).
        case retryable(reason: String, retryAfterMs: Int64?)
        /// 413: split in halves; a single log still too large is dead-lettered.
        case split
        /// 400, 422 and any other 4xx not named elsewhere (and 501/505): bisect down to the refused logs.
        case refuse(status: Int, reason: String)
        /// 401, 403, 404, and a redirect not followed: stop sending, keep the data (SPEC R1, R8).
        case stop(status: Int, reason: String)
        /// The engine cancelled the transfer (shutdown, opt-out): the attempt does not count (SPEC C8).
        case cancelled
        /// SPEC D5: the server took the request but refused `count` of its logs without naming them: the batch is
        /// settled (never sent again); they are counted as `server_rejected`.
        case partiallyRejected(count: Int, message: String)
        /// SPEC D13, D14: the server named the logs it refuses, by their place in the batch, each with its reason:
        /// those are dead-lettered with `status`; the others are sent again at once (`.resend`: the server took none
        /// of the request) or settled as delivered (`.delivered`: it took them). A list naming none of the batch's
        /// logs is R1's refusal (bisected) when the others would be resent.
        case refusedLogs(status: Int, refused: [RefusedLog], others: Others)
    }

    /// SPEC D13, D14: one log a server refused by its index in the batch sent, and why.
    struct RefusedLog: Equatable, Sendable {
        var index: Int
        var reason: String
    }

    /// SPEC D13, D14: what becomes of the logs a partial refusal does not name.
    enum Others: Equatable, Sendable { case resend, delivered }

    enum Event: Sendable {
        /// The queue changed outside delivery (logs stored, requeued, evicted, expired): the machine re-reads it.
        case stored
        /// The result of a `.claim` action (nil: nothing was claimable).
        case claimed(ClaimedBatch?)
        /// A finished transfer as its destination's wire read it (SPEC R1, D5).
        case transferOutcome(BatchKey, Outcome)
        case timerFired
        /// SPEC R7, N2: reachability as the watcher or the host sees it; online after offline is a change (R6).
        case reachability(online: Bool)
        /// SPEC R6: the default route moved to another interface while online.
        case networkChanged
        /// SPEC C7, with the caller's waiter when it wants a result.
        case dispatch(WaiterID?)
        /// Calls back once nothing waits and nothing is in flight.
        case whenIdle(WaiterID)
        case retryNow
        case pause
        case resume
        /// SPEC T6: the user opted out (`setEnabled(false)`), or opted in again.
        case optOut
        case optIn
        /// SPEC R8: the endpoint or credentials were updated.
        case reconfigured
        /// SPEC C8: stop now; what is in flight is cancelled and returns to pending.
        case shutdown
        /// SPEC D16: this destination's share of C3's requests, given by the engine that shares them among several.
        case requestLimit(Int)
    }

    enum Action: Equatable, Sendable {
        /// Claim a batch of at most `limit` logs; before it, in the same transaction, delete the delivered batch
        /// `completing`. Answer with `.claimed`.
        case claim(limit: Int, completing: Int64?)
        case send(BatchKey, [StoredLog])
        case cancel(BatchKey)
        /// Delivered: delete a whole batch's rows by its lease, or a part's by seq.
        case complete(batchID: Int64?, seqs: [Int64])
        /// Give rows back to pending, claimable at once.
        case release(batchID: Int64?, seqs: [Int64])
        case deadLetter(seqs: [Int64], status: Int, reason: String)
        /// SPEC S4: delete these held logs, too old to send.
        case expire(seqs: [Int64])
        /// SPEC T6: delete every stored log.
        case deleteAll
        /// Wake the machine with `.timerFired` at this monotonic time; nil stops the timer.
        case arm(atMs: Int64?)
        case notify([WaiterID], DispatchResult)
        case notifyIdle([WaiterID])
        /// The disabled cause changed (persisted for `outbox status`).
        case disabledChanged(String?)
        /// SPEC D5: adds to the store's `server_rejected` total.
        case serverRejected(Int)
        case log(LogLine)
    }

    /// A line for the host's logger (a library logs at info or lower: retries at info, per-batch detail at debug).
    struct LogLine: Equatable, Sendable {
        enum Level: Sendable { case debug, info, warning, error }
        var level: Level
        var message: String
        var metadata: [String: String] = [:]
    }

    /// A dispatch whose result is owed: the batches it waits for, and whether one failed.
    private struct DispatchWait: Equatable, Sendable {
        var waiter: WaiterID
        var batches: Set<BatchKey> = []
        var failed = false
        /// Still attaching newly claimed batches: until the queue was emptied or nothing more could be sent.
        var open = true
    }

    /// What holds delivery back apart from its schedule. They are independent — paused while offline, stopped by the
    /// server and then opted out — so each keeps its own reason, and lifting one leaves the others.
    struct Holds: Equatable, Sendable {
        /// SPEC C5: the host paused sending.
        var paused = false
        /// SPEC R7: no network (the watcher's or the host's word, N2).
        var offline = false
        /// SPEC T6: the user opted out; nothing stored is kept.
        var optedOut = false
        /// SPEC R5, R1: the server's answers stopped sending (a probe may go through after exhausted retries).
        var stop: Stop?
        /// SPEC R4: a server's `Retry-After` holds the whole pipeline until then (monotonic).
        var pipelinePausedUntilMs: Int64?

        /// The host or the network keeps anything from being claimed or resent.
        var keepOffTheWire: Bool { paused || offline || optedOut }
    }

    /// The machine's mode. Shut down is for good: what comes after is refused (`handle`), not half-carried out.
    enum Mode: Equatable, Sendable {
        case running(Holds)
        /// SPEC C8.
        case shutDown
    }

    private(set) var settings: Settings
    private(set) var flights: [BatchKey: Flight] = [:]
    private(set) var mode: Mode = .running(Holds())
    /// Retries consumed since start (`outbox emit`'s `retries`).
    private(set) var retries = 0
    private(set) var counters = DeliveryCounters()
    private var nextKey: BatchKey = 1
    /// When the queue last went from empty to not empty, per priority: C2's "oldest waiting log".
    private var oldestNormalMs: Int64?
    private var oldestCriticalMs: Int64?
    private var dispatchRequested = false
    private var nextPeriodicMs: Int64?
    private var dispatches: [DispatchWait] = []
    private var idleWaiters: [WaiterID] = []
    /// A delivered batch whose rows the next claim deletes in its own transaction (one commit per request).
    private var deliveredBatch: Int64?
    private var armedAtMs: Int64?
    private var lastDisabledReason: String?
    /// SPEC R9: the fault that holds, if any (only with `settings.recovery`).
    private(set) var fault: Fault?
    /// SPEC R10: while draining after a fault, how many requests may be in flight; nil: C3's limit.
    private(set) var drainWidth: Int?
    /// SPEC R10: after R6, `retryNow` or an update, nothing is sent before this (monotonic).
    private var drainStartAtMs: Int64?
    /// SPEC R9: the next claim is a probe's (nothing waited for a retry, so the probe takes the oldest stored logs).
    private var claimIsProbe = false

    /// `waiting`: what the store holds at start. A backlog found then has waited long enough: it is due at once.
    init(settings: Settings, now: DeliveryNow, waiting: Waiting, random: IDGenerator = IDGenerator()) {
        self.settings = settings
        self.randomSource = random
        let nowMs = now.monoMs
        if waiting.normal > 0 { oldestNormalMs = nowMs - settings.normalIntervalMs }
        if waiting.critical > 0 { oldestCriticalMs = nowMs - settings.criticalIntervalMs }
        if let interval = settings.dispatchIntervalMs, interval > 0 { nextPeriodicMs = nowMs + interval }
    }

    /// The holds while running (read and changed in place); none once shut down, where changes are dropped.
    private var holds: Holds {
        get {
            guard case .running(let holds) = mode else { return Holds() }
            return holds
        }
        set {
            guard case .running = mode else { return }
            mode = .running(newValue)
        }
    }

    var isShutDown: Bool { mode == .shutDown }
    var stop: Stop? { holds.stop }
    var disabledReason: String? { stop?.description }
    var inFlightBatches: Int { flights.count }

    // MARK: - Events

    /// Handles `event` at `now`; the store holds `waiting`. Returns what to do, in order. Then, once those actions
    /// are carried out, `decide` says what to send with the queue's counts as they have become.
    mutating func handle(_ event: Event, now: DeliveryNow, waiting: Waiting) -> [Action] {
        guard !isShutDown else { return refuse(event) }
        var actions: [Action] = []
        observe(waiting, nowMs: now.monoMs)
        switch event {
        case .stored, .timerFired:
            if case .timerFired = event { armedAtMs = nil }
        case .claimed(let batch):
            claimed(batch, waiting: waiting, nowMs: now.monoMs, into: &actions)
        case .transferOutcome(let key, let outcome):
            finished(key, outcome, now: now, into: &actions)
        case .reachability(let online):
            let cameOnline = online && holds.offline
            holds.offline = !online
            actions.append(.log(LogLine(level: .info, message: "network \(online ? "online" : "offline")")))
            if cameOnline { resetBackOff(nowMs: now.monoMs) }
        case .networkChanged:
            resetBackOff(nowMs: now.monoMs)
        case .dispatch(let waiter):
            dispatch(waiter, waiting: waiting, into: &actions)
        case .whenIdle(let waiter):
            idleWaiters.append(waiter)
        case .requestLimit(let limit):
            settings.maxBatchesInFlight = max(0, limit)
        case .retryNow:
            resetBackOff(nowMs: now.monoMs)
        case .pause:
            holds.paused = true
        case .resume:
            holds.paused = false
        case .optOut:
            optOut(into: &actions)
        case .optIn:
            holds.optedOut = false
        case .reconfigured:
            // SPEC R8: a channel stopped by the server's answer starts again under the new settings.
            holds.stop = nil
            resetBackOff(nowMs: now.monoMs)
        case .shutdown:
            shutdown(into: &actions)
        }
        return actions
    }

    /// What to send now, and when to wake next; the store holds `waiting`. A `.claim` is always the last action: its
    /// answer is the next event.
    mutating func decide(now: DeliveryNow, waiting: Waiting) -> [Action] {
        guard !isShutDown else { return [] }
        var actions: [Action] = []
        observe(waiting, nowMs: now.monoMs)
        decide(now: now, waiting: waiting, into: &actions)
        return actions
    }

    /// Notes when the queue went from empty to not empty (C2 counts from the oldest waiting log).
    private mutating func observe(_ waiting: Waiting, nowMs: Int64) {
        if waiting.normal == 0 { oldestNormalMs = nil } else if oldestNormalMs == nil { oldestNormalMs = nowMs }
        if waiting.critical == 0 { oldestCriticalMs = nil } else if oldestCriticalMs == nil { oldestCriticalMs = nowMs }
    }

    private mutating func claimed(_ batch: ClaimedBatch?, waiting: Waiting, nowMs: Int64, into actions: inout [Action]) {
        deliveredBatch = nil  // the claim's transaction deleted it
        guard let batch, !batch.logs.isEmpty else {
            // Nothing claimable although the count said otherwise (or all of it settled by a policy, BEHAVIOUR H2):
            // stop asking until the queue changes.
            dispatchRequested = false
            closeDispatches()
            return
        }
        let key = nextKey
        nextKey += 1
        var isProbe = claimIsProbe
        claimIsProbe = false
        if case .retriesExhausted = stop { isProbe = true }
        flights[key] = Flight(logs: batch.logs, batchID: batch.batchID, isProbe: isProbe)
        for index in dispatches.indices where dispatches[index].open { dispatches[index].batches.insert(key) }
        if waiting.total == 0 {
            dispatchRequested = false
            closeDispatches()
        }
        actions.append(.log(LogLine(level: .debug, message: "sending batch",
                                    metadata: ["outbox.batch": "\(key)", "outbox.logs": "\(batch.logs.count)"])))
        counters.requests += 1
        actions.append(.send(key, batch.logs))
    }

    private mutating func dispatch(_ waiter: WaiterID?, waiting: Waiting, into actions: inout [Action]) {
        dispatchRequested = waiting.total > 0
        guard let waiter else { return }
        guard !holds.keepOffTheWire, holds.stop == nil else {
            actions.append(.notify([waiter], .error))
            return
        }
        if waiting.total == 0 && flights.isEmpty {
            actions.append(.notify([waiter], .noData))
            return
        }
        // Batches already held count as this dispatch's: a caller draining until `.noData` waits for them rather
        // than spinning while they finish.
        dispatches.append(DispatchWait(waiter: waiter, batches: Set(flights.keys), open: waiting.total > 0))
    }

    private mutating func closeDispatches() {
        for index in dispatches.indices { dispatches[index].open = false }
    }

    /// A batch finished one request (or was dropped): dispatches waiting for it learn how it went, and those that
    /// wait for nothing more get their result.
    private mutating func settle(_ key: BatchKey, failed: Bool, into actions: inout [Action]) {
        for index in dispatches.indices where dispatches[index].batches.contains(key) {
            dispatches[index].batches.remove(key)
            if failed { dispatches[index].failed = true }
        }
        notifySettledDispatches(into: &actions)
    }

    private mutating func notifySettledDispatches(into actions: inout [Action]) {
        var good: [WaiterID] = [], bad: [WaiterID] = []
        dispatches.removeAll { wait in
            guard wait.batches.isEmpty && !wait.open else { return false }
            if wait.failed { bad.append(wait.waiter) } else { good.append(wait.waiter) }
            return true
        }
        if !good.isEmpty { actions.append(.notify(good, .good)) }
        if !bad.isEmpty { actions.append(.notify(bad, .error)) }
    }

    /// Parts of a split batch inherit the dispatches that waited for the whole.
    private mutating func inherit(_ parts: [BatchKey], from key: BatchKey) {
        for index in dispatches.indices where dispatches[index].batches.contains(key) {
            dispatches[index].batches.formUnion(parts)
        }
    }

    // MARK: - Outcomes (SPEC R1)

    private mutating func finished(_ key: BatchKey, _ outcome: Outcome, now: DeliveryNow,
                                   into actions: inout [Action]) {
        // A batch dropped meanwhile (opt-out, shutdown) has nothing left to decide.
        guard var flight = flights[key], flight.phase == .inFlight else { return }
        let nowMs = now.monoMs
        let seqs = flight.logs.map(\.seq)
        switch outcome {
        case .cancelled:
            flights[key] = nil
            actions.append(.release(batchID: flight.batchID, seqs: seqs))
            settle(key, failed: true, into: &actions)
        case .delivered, .partiallyRejected:
            flights[key] = nil
            if case .retriesExhausted = stop { setStop(nil, into: &actions) }  // the probe got through (R5)
            recovered(nowMs: nowMs, into: &actions)
            var rejected = 0
            if case .partiallyRejected(let count, let message) = outcome {
                rejected = min(max(0, count), seqs.count)
                counters.serverRejected += rejected
                actions.append(.serverRejected(rejected))
                actions.append(.log(LogLine(level: .warning, message: "the server refused logs inside an accepted request; they are not sent again",
                                            metadata: ["outbox.rejected": "\(rejected)", "outbox.reason": String(message.prefix(200))])))
            }
            completeDelivered(flight, count: seqs.count - rejected, into: &actions)
            settle(key, failed: false, into: &actions)
        case .refusedLogs(let status, let refused, let others):
            if case .retriesExhausted = stop { setStop(nil, into: &actions) }
            recovered(nowMs: nowMs, into: &actions)  // the server answered: it is there (R9)
            var reasons: [Int: String] = [:]
            for log in refused where flight.logs.indices.contains(log.index) && reasons[log.index] == nil {
                reasons[log.index] = log.reason
            }
            if reasons.isEmpty && others == .resend {
                // Names none of the batch's logs: resending it as it is would be refused again (R1's 400).
                flights[key] = nil
                bisect(key, flight.logs, outcome: .refuse(status: status, reason: refused.first?.reason ?? "HTTP \(status)"),
                       into: &actions)
                return
            }
            deadLetter(flight.logs, reasons: reasons, status: status, into: &actions)
            let kept = flight.logs.indices.filter { reasons[$0] == nil }.map { flight.logs[$0] }
            if others == .resend && !kept.isEmpty {
                // The server took none of the request: the others go again at once, under the same key and lease.
                flight.logs = kept
                flight.isProbe = false  // the server answered: the fault it probed is over (R9)
                flight.retryAtBeforeProbeMs = nil
                flights[key] = flight
                counters.requests += 1
                actions.append(.send(key, kept))
                return
            }
            flights[key] = nil
            flight.logs = kept
            if others == .delivered {
                completeDelivered(flight, count: kept.count, into: &actions)
            } else if let batchID = flight.batchID {
                actions.append(.complete(batchID: batchID, seqs: []))  // the lease of a batch all dead-lettered
            }
            settle(key, failed: !reasons.isEmpty, into: &actions)
        case .split, .refuse:
            flights[key] = nil
            if case .retriesExhausted = stop { setStop(nil, into: &actions) }
            recovered(nowMs: nowMs, into: &actions)  // the server answered: it is there (R9)
            bisect(key, flight.logs, outcome: outcome, into: &actions)
        case .stop(let status, let reason):
            flights[key] = nil
            actions.append(.log(LogLine(level: .error, message: "the server refused the endpoint or the credentials; sending stopped, data kept",
                                        metadata: ["outbox.status": "\(status)", "outbox.reason": String(reason.prefix(200))])))
            actions.append(.release(batchID: flight.batchID, seqs: seqs))
            setStop(.refused(status: status, reason: reason), into: &actions)
            settle(key, failed: true, into: &actions)
        case .retryable(let reason, let retryAfterMs):
            if settings.recovery != nil {
                failedWithRecovery(key, flight, reason: reason, retryAfterMs: retryAfterMs, nowMs: nowMs, into: &actions)
                return
            }
            flight.failedAttempts += 1
            guard !flight.isProbe, let delay = settings.retry.delay(afterFailedAttempts: flight.failedAttempts, using: &randomSource) else {
                exhausted(key, flight, reason: reason, nowMs: nowMs, into: &actions)
                return
            }
            retries += 1
            var retryAt = nowMs + delay
            if let pause = settings.retry.pipelinePause(retryAfterMs: retryAfterMs, scheduledMs: delay) {
                // SPEC R4: the whole pipeline waits for the server.
                holds.pipelinePausedUntilMs = max(holds.pipelinePausedUntilMs ?? 0, nowMs + pause)
                retryAt = nowMs + pause
            }
            flight.phase = .waitingRetry(atMs: retryAt)
            flights[key] = flight
            actions.append(.log(LogLine(level: .info, message: "batch will be retried", metadata: [
                "outbox.batch": "\(key)", "outbox.attempt": "\(flight.failedAttempts)", "outbox.reason": reason,
                "outbox.retry_in_ms": "\(retryAt - nowMs)"])))
            settle(key, failed: true, into: &actions)
        }
    }

    /// A batch the server took: `count` of its logs delivered, its rows deleted (with the next claim for a whole
    /// batch, by seq for a part).
    private mutating func completeDelivered(_ flight: Flight, count: Int, into actions: inout [Action]) {
        counters.delivered += count
        if let batchID = flight.batchID {
            // The next claim deletes it in its own transaction; `decide` deletes it alone if none comes.
            if let earlier = deliveredBatch { actions.append(.complete(batchID: earlier, seqs: [])) }
            deliveredBatch = batchID
        } else {
            actions.append(.complete(batchID: nil, seqs: flight.logs.map(\.seq)))
        }
    }

    /// SPEC D13, D14: the logs at `reasons`' indices are dead-lettered with `status` and the server's reason for each
    /// (one action per reason, in the batch's order); counted by the store once the move committed.
    private func deadLetter(_ logs: [StoredLog], reasons: [Int: String], status: Int, into actions: inout [Action]) {
        guard !reasons.isEmpty else { return }
        var order: [String] = [], seqs: [String: [Int64]] = [:]
        for index in logs.indices {
            guard let reason = reasons[index] else { continue }
            if seqs[reason] == nil { order.append(reason) }
            seqs[reason, default: []].append(logs[index].seq)
        }
        for reason in order { actions.append(.deadLetter(seqs: seqs[reason] ?? [], status: status, reason: reason)) }
        actions.append(.log(LogLine(level: .warning, message: "logs refused by the server by name and dead-lettered",
                                    metadata: ["outbox.status": "\(status)", "outbox.refused": "\(reasons.count)"])))
    }

    /// Back-off jitter (SPEC R3): seeded by the kernel for an engine, by a test for reproducible intervals.
    var randomSource: IDGenerator

    /// SPEC R1: 413 splits in halves; 400/422 bisect down to the refused logs. A single refused (or still too
    /// large) log is dead-lettered with the server's status and reason; its neighbours are delivered.
    private mutating func bisect(_ key: BatchKey, _ logs: [StoredLog], outcome: Outcome, into actions: inout [Action]) {
        if logs.count == 1 {
            let status: Int, reason: String
            switch outcome {
            case .refuse(let code, let text): status = code; reason = text
            default: status = 413; reason = "log too large for the server"
            }
            // Counted by the store once the move committed (`LogStore.deadLetteredTotal`), not here.
            actions.append(.deadLetter(seqs: logs.map(\.seq), status: status, reason: reason))
            actions.append(.log(LogLine(level: .warning, message: "log refused by the server and dead-lettered",
                                        metadata: ["outbox.status": "\(status)"])))
            settle(key, failed: true, into: &actions)
            return
        }
        let middle = logs.count / 2
        var parts: [BatchKey] = []
        for part in [Array(logs[..<middle]), Array(logs[middle...])] {
            let partKey = nextKey
            nextKey += 1
            flights[partKey] = Flight(logs: part, batchID: nil)
            parts.append(partKey)
        }
        inherit(parts, from: key)
        settle(key, failed: false, into: &actions)
        for partKey in parts {
            counters.requests += 1
            actions.append(.send(partKey, flights[partKey]?.logs ?? []))
        }
    }

    /// SPEC R1: what a finished transfer means, read from what was received.
    static func classify(_ result: TransferResult, nowWallMs: Int64) -> Outcome {
        switch result {
        case .failure(.cancelled):
            return .cancelled
        case .failure(.identity(let reason)):
            // SPEC K2: like a 401 — sending stops with the reason, the data stays, `update` resumes.
            return .stop(status: 0, reason: reason)
        case .failure(let failure):
            return .retryable(reason: "\(failure)", retryAfterMs: nil)
        case .response(let response):
            let retryAfter = RetryPolicy.retryAfterMs(retryAfter: response.headers["Retry-After"],
                                                      msRetryAfter: response.headers["x-ms-retry-after-ms"], nowMs: nowWallMs)
            let body = String(decoding: response.body.prefix(512), as: UTF8.self)
            return classify(status: response.status, retryAfterMs: retryAfter, body: body,
                            location: response.headers["Location"])
        }
    }

    /// SPEC R1 by status. A 3xx that reaches here is one the transport did not follow (301–303, another origin,
    /// too many hops): sending stops, and the `Location` goes into the reason.
    static func classify(status: Int, retryAfterMs: Int64? = nil, body: String = "", location: String? = nil) -> Outcome {
        let text = body.isEmpty ? "HTTP \(status)" : body
        switch status {
        case 200..<300: return .delivered
        case 300..<400:
            // The Location may carry the request's own query back (GA4's api_secret, SPEC D12): masked as K3 asks.
            return .stop(status: status, reason: "redirect to \(location.map { maskingCredentials(in: $0) } ?? "nowhere") not followed")
        case 401, 403, 404: return .stop(status: status, reason: text)
        case 413: return .split
        case 408, 429: return .retryable(reason: "HTTP \(status)", retryAfterMs: retryAfterMs)
        case 501, 505: return .refuse(status: status, reason: text)
        case 500..<600: return .retryable(reason: "HTTP \(status)", retryAfterMs: retryAfterMs)
        default: return .refuse(status: status, reason: text)
        }
    }

    private mutating func setStop(_ newStop: Stop?, into actions: inout [Action]) {
        holds.stop = newStop
        if newStop != nil {
            // SPEC R5, R1: batches waiting for a retry give their rows back (nothing is deleted); otherwise they
            // would hold their leases forever and the probe, which waits until no batch holds one, never goes.
            for (key, flight) in flights.sorted(by: { $0.key < $1.key }) where flight.phase != .inFlight {
                flights[key] = nil
                actions.append(.release(batchID: flight.batchID, seqs: flight.logs.map(\.seq)))
            }
        }
        let reason = newStop?.description
        if reason != lastDisabledReason {
            lastDisabledReason = reason
            actions.append(.disabledChanged(reason))
        }
    }

    /// SPEC R5, R6: forget back-off, re-enable after exhausted retries, send waiting batches now. A stop by the
    /// server's answer stays until the configuration changes (R8) or a restart.
    private mutating func resetBackOff(nowMs: Int64) {
        if case .retriesExhausted = stop {
            holds.stop = nil
        }
        holds.pipelinePausedUntilMs = nil
        for key in flights.keys { flights[key]?.failedAttempts = 0 }
        makeRetriesDue(atMs: nowMs)
        if let recovery = settings.recovery {
            // SPEC R10: a fault ends with what ended it; a fleet that saw the same network change or update does not
            // come back in one instant: the first request waits 0–1 s, then the drain widens from one.
            fault = nil
            drainWidth = 1
            let jitter = recovery.drainJitterMs > 0 ? Int64.random(in: 0...recovery.drainJitterMs, using: &randomSource) : 0
            drainStartAtMs = nowMs + jitter
        }
    }

    /// Every batch waiting for a retry goes at `atMs` (R6's reset, R9's recovery).
    private mutating func makeRetriesDue(atMs: Int64) {
        for key in flights.keys {
            if case .waitingRetry = flights[key]?.phase { flights[key]?.phase = .waitingRetry(atMs: atMs) }
        }
    }

    // MARK: - Recovery (SPEC R9–R10)

    /// A retryable failure with recovery on. A probe's failure uses up no attempt and schedules the next probe; any
    /// other failure is R3's (an attempt used, a retry scheduled, or R5 when none is left) and starts a fault.
    private mutating func failedWithRecovery(_ key: BatchKey, _ flight: Flight, reason: String, retryAfterMs: Int64?,
                                             nowMs: Int64, into actions: inout [Action]) {
        guard let recovery = settings.recovery else { return }
        var flight = flight
        drainWidth = 1  // R10: any retryable failure narrows the drain to one request
        if let pause = settings.retry.pipelinePause(retryAfterMs: retryAfterMs, scheduledMs: 0) {
            // R9: the server's Retry-After is a floor for every request to it, probes included (capped as R4).
            holds.pipelinePausedUntilMs = max(holds.pipelinePausedUntilMs ?? 0, nowMs + pause)
        }
        if flight.isProbe {
            flight.isProbe = false
            if case .retriesExhausted = stop {
                // Disabled by R5: the probe's rows go back; the fault goes on probing at the cap.
                flights[key] = nil
                actions.append(.release(batchID: flight.batchID, seqs: flight.logs.map(\.seq)))
            } else {
                let retryAt = flight.retryAtBeforeProbeMs
                    ?? nowMs + (settings.retry.delay(afterFailedAttempts: 1, using: &randomSource) ?? recovery.capMs)
                flight.retryAtBeforeProbeMs = nil
                flight.phase = .waitingRetry(atMs: retryAt)
                flights[key] = flight
            }
            var current = fault ?? Fault(sinceMs: nowMs, nextProbeAtMs: nowMs)
            current.nextProbeAtMs = nowMs + probeDelay(current, nowMs: nowMs)
            fault = current
            actions.append(.log(LogLine(level: .info, message: "probe failed; the destination is still unreachable", metadata: [
                "outbox.reason": reason, "outbox.probe_in_ms": "\(current.nextProbeAtMs - nowMs)"])))
            settle(key, failed: true, into: &actions)
            return
        }
        flight.failedAttempts += 1
        guard let delay = settings.retry.delay(afterFailedAttempts: flight.failedAttempts, using: &randomSource) else {
            exhausted(key, flight, reason: reason, nowMs: nowMs, into: &actions)
            return
        }
        retries += 1
        flight.phase = .waitingRetry(atMs: nowMs + delay)
        flights[key] = flight
        beginFault(nowMs: nowMs)
        actions.append(.log(LogLine(level: .info, message: "batch will be retried", metadata: [
            "outbox.batch": "\(key)", "outbox.attempt": "\(flight.failedAttempts)", "outbox.reason": reason,
            "outbox.retry_in_ms": "\(delay)", "outbox.probe_in_ms": "\((fault?.nextProbeAtMs ?? nowMs) - nowMs)"])))
        settle(key, failed: true, into: &actions)
    }

    /// SPEC R5: a batch used its last attempt: its rows go back, sending is disabled (nothing deleted); with recovery
    /// on, a fault holds and probing goes on (R9).
    private mutating func exhausted(_ key: BatchKey, _ flight: Flight, reason: String, nowMs: Int64,
                                    into actions: inout [Action]) {
        flights[key] = nil
        let probing = settings.recovery != nil ? "; probing goes on" : ""
        actions.append(.log(LogLine(level: .error, message: "retries exhausted; sending disabled, data kept" + probing,
                                    metadata: ["outbox.reason": reason])))
        actions.append(.release(batchID: flight.batchID, seqs: flight.logs.map(\.seq)))
        setStop(.retriesExhausted(sinceMs: nowMs, lastError: reason), into: &actions)
        beginFault(nowMs: nowMs)
        settle(key, failed: true, into: &actions)
    }

    /// R9: a fault begins (unless one holds); its first probe goes after the schedule's first interval.
    private mutating func beginFault(nowMs: Int64) {
        guard fault == nil, settings.recovery != nil else { return }
        var started = Fault(sinceMs: nowMs, nextProbeAtMs: nowMs)
        started.nextProbeAtMs = nowMs + probeDelay(started, nowMs: nowMs)
        fault = started
    }

    private mutating func probeDelay(_ fault: Fault, nowMs: Int64) -> Int64 {
        guard let recovery = settings.recovery else { return 0 }
        var capped = false
        if case .retriesExhausted = stop { capped = true }  // R9: after R5, at the cap
        return recovery.probeDelay(probes: fault.probes, faultMs: nowMs - fault.sinceMs, capped: capped, using: &randomSource)
    }

    /// A success (or any answer that is not retryable): R9's fault ends and every batch waiting for a retry is due at
    /// once, paced by R10's drain from one request; outside a fault, a success widens the drain by one.
    private mutating func recovered(nowMs: Int64, into actions: inout [Action]) {
        guard settings.recovery != nil else { return }
        if let ended = fault {
            fault = nil
            drainWidth = 1
            makeRetriesDue(atMs: nowMs)
            actions.append(.log(LogLine(level: .info, message: "the destination answers again; draining", metadata: [
                "outbox.fault_ms": "\(nowMs - ended.sinceMs)", "outbox.probes": "\(ended.probes)"])))
        } else if let width = drainWidth {
            drainWidth = width + 1 >= settings.maxBatchesInFlight ? nil : width + 1
        }
    }

    /// R9 while a fault holds: R3 retries whose time passes count as attempts used (R5 when none is left), and one
    /// request at a time goes, the probe — the oldest batch waiting for a retry, else a claim of the oldest stored
    /// logs — when its time comes. Returns true when the probe is a claim.
    private mutating func probeIfDue(now: DeliveryNow, waiting: inout Waiting, earliest wake: inout Int64?,
                                     into actions: inout [Action]) -> Bool {
        let nowMs = now.monoMs
        for (key, flight) in flights.sorted(by: { $0.key < $1.key }) {
            guard case .waitingRetry(let at) = flight.phase else { continue }
            guard at <= nowMs else { wake = min(wake ?? at, at); continue }
            var counted = flight
            counted.failedAttempts += 1
            if let delay = settings.retry.delay(afterFailedAttempts: counted.failedAttempts, using: &randomSource) {
                retries += 1
                counted.phase = .waitingRetry(atMs: nowMs + delay)
                flights[key] = counted
                wake = min(wake ?? nowMs + delay, nowMs + delay)
            } else {
                actions.append(.log(LogLine(level: .error, message: "retries exhausted; sending disabled, data kept; probing goes on",
                                            metadata: ["outbox.reason": "the destination stayed unreachable"])))
                // setStop gives back every batch waiting for a retry: their rows wait in the store again (the
                // probe below may claim them; and the engine is not idle).
                let held = flights.values.filter { $0.phase != .inFlight }.reduce(0) { $0 + $1.logs.count }
                setStop(.retriesExhausted(sinceMs: nowMs, lastError: "the destination stayed unreachable"), into: &actions)
                waiting.normal += held
                break
            }
        }
        guard var current = fault else { return false }
        if inFlightRequests > 0 { return false }  // one request at a time
        guard nowMs >= current.nextProbeAtMs else {
            wake = min(wake ?? current.nextProbeAtMs, current.nextProbeAtMs)
            return false
        }
        let waitingRetry = flights.filter { if case .waitingRetry = $0.value.phase { return true } else { return false } }
        if let (key, flight) = waitingRetry.min(by: { ($0.value.logs.first?.seq ?? 0, $0.key) < ($1.value.logs.first?.seq ?? 0, $1.key) }) {
            current.probes += 1
            fault = current
            var probe = flight
            if case .waitingRetry(let at) = flight.phase { probe.retryAtBeforeProbeMs = at }
            probe.isProbe = true
            probe.phase = .inFlight
            flights[key] = probe
            counters.requests += 1
            counters.probes += 1
            actions.append(.log(LogLine(level: .debug, message: "probing", metadata: ["outbox.batch": "\(key)"])))
            actions.append(.send(key, probe.logs))
            return false
        }
        guard waiting.total > 0 else { return false }  // nothing to probe with: the fault waits for logs
        current.probes += 1
        fault = current
        claimIsProbe = true
        counters.probes += 1
        return true
    }

    // MARK: - Opt-out and shutdown

    /// After shutdown nothing is carried out: a waiter is answered at once (a dispatch fails, an idle waiter is told
    /// nothing is in flight), a batch claimed then goes back, and everything else is dropped — an opt-out would
    /// otherwise delete the store of an engine that is closing.
    private func refuse(_ event: Event) -> [Action] {
        switch event {
        case .dispatch(let waiter?): return [.notify([waiter], .error)]
        case .whenIdle(let waiter): return [.notifyIdle([waiter])]
        case .claimed(let batch?): return [.release(batchID: batch.batchID, seqs: batch.logs.map(\.seq))]
        default: return []
        }
    }

    /// SPEC T6: opt-out is total. Batches waiting for a retry are dropped, transfers in flight cancelled (their
    /// late answers find no batch), and every stored log deleted.
    private mutating func optOut(into actions: inout [Action]) {
        holds.optedOut = true
        for (key, flight) in flights.sorted(by: { $0.key < $1.key }) where flight.phase == .inFlight {
            actions.append(.cancel(key))
        }
        flights = [:]
        deliveredBatch = nil
        dispatchRequested = false
        holds.pipelinePausedUntilMs = nil
        actions.append(.deleteAll)
        let owed = dispatches.map(\.waiter)
        dispatches = []
        if !owed.isEmpty { actions.append(.notify(owed, .error)) }
    }

    /// SPEC C8: cancels what is in flight (the rows return to pending; the attempt does not count) and answers every
    /// waiter.
    private mutating func shutdown(into actions: inout [Action]) {
        mode = .shutDown
        if let batch = deliveredBatch { actions.append(.complete(batchID: batch, seqs: [])) }
        deliveredBatch = nil
        for (key, flight) in flights.sorted(by: { $0.key < $1.key }) {
            if flight.phase == .inFlight { actions.append(.cancel(key)) }
            actions.append(.release(batchID: flight.batchID, seqs: flight.logs.map(\.seq)))
        }
        flights = [:]
        actions.append(.arm(atMs: nil))
        let owed = dispatches.map(\.waiter)
        dispatches = []
        if !owed.isEmpty { actions.append(.notify(owed, .error)) }
        if !idleWaiters.isEmpty { actions.append(.notifyIdle(idleWaiters)) }
        idleWaiters = []
    }

    // MARK: - Decisions

    /// Sends what is due, and arms the timer for the next moment something will be.
    private mutating func decide(now: DeliveryNow, waiting given: Waiting, into actions: inout [Action]) {
        var waiting = given
        let nowMs = now.monoMs
        var wake: Int64?
        func earliest(_ time: Int64?) { if let time { wake = min(wake ?? time, time) } }

        if !holds.keepOffTheWire {  // SPEC R7, C5, T6
            if let until = holds.pipelinePausedUntilMs, nowMs >= until { holds.pipelinePausedUntilMs = nil }
            if let start = drainStartAtMs, nowMs >= start { drainStartAtMs = nil }
            if let until = holds.pipelinePausedUntilMs ?? drainStartAtMs {
                earliest(until)
            } else if fault != nil {
                // SPEC R9: only the probe; a stop by the server's answer (R1) sends nothing at all.
                if !isRefused, probeIfDue(now: now, waiting: &waiting, earliest: &wake, into: &actions) {
                    actions.append(.claim(limit: settings.batchSize, completing: deliveredBatch))
                    return
                }
            } else {
                if stop == nil { resendDue(now: now, earliest: &wake, into: &actions) }
                if shouldClaim(nowMs: nowMs, waiting: waiting, earliest: &wake) {
                    actions.append(.claim(limit: settings.batchSize, completing: deliveredBatch))
                    return
                }
            }
        }
        if let batch = deliveredBatch {
            deliveredBatch = nil
            actions.append(.complete(batchID: batch, seqs: []))
        }
        if flights.isEmpty && waiting.total == 0 {
            closeDispatches()
            notifySettledDispatches(into: &actions)
            if !idleWaiters.isEmpty {
                actions.append(.notifyIdle(idleWaiters))
                idleWaiters = []
            }
        } else if !dispatches.isEmpty && (waiting.total == 0 || holds.offline || holds.paused || stop != nil || fault != nil) {
            // Nothing more will be claimed for these dispatches: they wait only for the batches they hold.
            closeDispatches()
            notifySettledDispatches(into: &actions)
        }
        if wake != armedAtMs {
            armedAtMs = wake
            actions.append(.arm(atMs: wake))
        }
    }

    /// Batches whose retry time came go again first (they hold the oldest logs). SPEC S4: logs that grew too old
    /// while they waited are deleted, never sent.
    private mutating func resendDue(now: DeliveryNow, earliest wake: inout Int64?, into actions: inout [Action]) {
        for (key, flight) in flights.sorted(by: { $0.key < $1.key }) {
            guard case .waitingRetry(let at) = flight.phase else { continue }
            guard at <= now.monoMs else {
                wake = min(wake ?? at, at)
                continue
            }
            let expired = flight.logs.filter { Self.isExpired($0, now: now, maxAgeMs: settings.maxAgeMs) }
            var kept = flight
            if !expired.isEmpty {
                actions.append(.expire(seqs: expired.map(\.seq)))
                let gone = Set(expired.map(\.seq))
                kept.logs.removeAll { gone.contains($0.seq) }
                if kept.logs.isEmpty {
                    flights[key] = nil
                    actions.append(.complete(batchID: flight.batchID, seqs: []))
                    settle(key, failed: false, into: &actions)
                    continue
                }
            }
            if let width = drainWidth, inFlightRequests >= width { continue }  // SPEC R10: paced
            kept.phase = .inFlight
            flights[key] = kept
            counters.requests += 1
            actions.append(.send(key, kept.logs))
        }
    }

    /// Requests on the wire now (batches waiting for a retry hold a lease but no request).
    private var inFlightRequests: Int { flights.values.count(where: { $0.phase == .inFlight }) }

    private var isRefused: Bool {
        if case .refused? = stop { return true }
        return false
    }

    /// SPEC S4: a log's age is its boot-time age when it was captured during this boot, its wall-clock age otherwise.
    static func isExpired(_ log: StoredLog, now: DeliveryNow, maxAgeMs: Int64) -> Bool {
        let ageMs = log.boot == now.boot ? (now.monoNs - log.monoNs) / 1_000_000 : now.wallMs - log.wallMs
        return ageMs > maxAgeMs
    }

    /// Whether to claim a new batch now (SPEC C2–C7, R5); otherwise notes when it will be due.
    private mutating func shouldClaim(nowMs: Int64, waiting: Waiting, earliest wake: inout Int64?) -> Bool {
        func earliest(_ time: Int64?) { if let time { wake = min(wake ?? time, time) } }
        guard waiting.total > 0 else { return false }
        switch stop {
        case .refused?:
            return false
        case .retriesExhausted(let since, _)?:
            // One probe batch at a time, every probe interval.
            guard let probe = settings.probeIntervalMs, flights.isEmpty else { return false }
            if nowMs >= since + probe { return true }
            earliest(since + probe)
            return false
        case nil:
            break
        }
        guard flights.count < settings.maxBatchesInFlight else { return false }
        if let width = drainWidth, inFlightRequests >= width { return false }  // SPEC R10
        if dispatchRequested { return true }
        if let interval = settings.dispatchIntervalMs {
            if interval <= 0 { return false }  // manual: only dispatch()
            if let periodic = nextPeriodicMs, nowMs >= periodic {
                nextPeriodicMs = nowMs + interval
                dispatchRequested = true
                return true
            }
            earliest(nextPeriodicMs)
            return false
        }
        // SPEC C2: a full batch, or the oldest waiting log reached its maximum delay.
        if waiting.total >= settings.batchSize { return true }
        if let oldest = oldestCriticalMs {
            if nowMs - oldest >= settings.criticalIntervalMs { return true }
            earliest(oldest + settings.criticalIntervalMs)
        }
        if let oldest = oldestNormalMs {
            if nowMs - oldest >= settings.normalIntervalMs { return true }
            earliest(oldest + settings.normalIntervalMs)
        }
        return false
    }
}

/// What delivery did since the engine started.
public struct DeliveryCounters: Sendable, Equatable {
    public var requests = 0
    public var delivered = 0
    /// SPEC D5: logs a server refused inside a request it accepted.
    public var serverRejected = 0
    /// SPEC R9: requests sent as probes during a fault (also counted in `requests`).
    public var probes = 0
}
