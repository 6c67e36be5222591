/// When to send (SPEC C1–C8, R3–R7) as a pure value type (STYLE 1): the loop feeds it events with `nowMs` (a
/// monotonic clock in milliseconds) and carries out the decisions it returns. No clock, timer or I/O in here.
struct DeliveryScheduler: Sendable {
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
    }

    /// Why nothing is sent although logs wait (SPEC R5, R1), visible through the API and `outbox status`.
    enum Disabled: Equatable, Sendable {
        /// A batch used all its retries at `sinceMs`.
        case retriesExhausted(sinceMs: Int64, lastError: String)
        /// 401/403/404: the endpoint or the credentials are wrong.
        case rejectedCredentials(status: Int, reason: String)

        var description: String {
            switch self {
            case .retriesExhausted(_, let error): return "retries exhausted (last error: \(error))"
            case .rejectedCredentials(let status, let reason): return "server answered \(status): \(reason)"
            }
        }
    }

    enum Decision: Equatable, Sendable {
        /// Claim a new batch from the store and send it.
        case sendNewBatch
        /// Send this waiting batch again (its retry time came).
        case resend(BatchKey)
        /// Nothing now; wake at this time (nil: only an event can change anything).
        case wait(untilMs: Int64?)
    }

    typealias BatchKey = Int64

    /// A batch holding a lease: being sent, or waiting for its next attempt (SPEC R3: its own retry state).
    struct Batch: Equatable, Sendable {
        var failedAttempts = 0
        var retryAtMs: Int64? = nil
        var isProbe = false
    }

    let settings: Settings
    private(set) var waitingNormal = 0
    private(set) var waitingCritical = 0
    private var oldestNormalMs: Int64?
    private var oldestCriticalMs: Int64?
    private(set) var batches: [BatchKey: Batch] = [:]
    private(set) var isPaused = false
    private(set) var isOnline = true
    private(set) var disabled: Disabled?
    private(set) var pipelinePausedUntilMs: Int64?
    private var dispatchRequested = false
    private var nextPeriodicMs: Int64?
    /// Retries consumed since start (for `outbox emit`'s `retries`).
    private(set) var retries = 0

    init(settings: Settings, nowMs: Int64, waitingNormal: Int = 0, waitingCritical: Int = 0) {
        self.settings = settings
        // A backlog found at start has waited long enough already: it is due at once.
        if waitingNormal > 0 { self.waitingNormal = waitingNormal; oldestNormalMs = nowMs - settings.normalIntervalMs }
        if waitingCritical > 0 { self.waitingCritical = waitingCritical; oldestCriticalMs = nowMs - settings.criticalIntervalMs }
        if let interval = settings.dispatchIntervalMs, interval > 0 { nextPeriodicMs = nowMs + interval }
    }

    var isDispatchManual: Bool { (settings.dispatchIntervalMs ?? 1) <= 0 }

    // MARK: - Events

    /// Logs were committed to the store.
    mutating func stored(normal: Int, critical: Int, nowMs: Int64) {
        if normal > 0 {
            if waitingNormal == 0 { oldestNormalMs = nowMs }
            waitingNormal += normal
        }
        if critical > 0 {
            if waitingCritical == 0 { oldestCriticalMs = nowMs }
            waitingCritical += critical
        }
    }

    /// Logs left the store without being sent (eviction, expiry, opt-out).
    mutating func removedWaiting(normal: Int, critical: Int) {
        waitingNormal = max(0, waitingNormal - normal)
        waitingCritical = max(0, waitingCritical - critical)
        if waitingNormal == 0 { oldestNormalMs = nil }
        if waitingCritical == 0 { oldestCriticalMs = nil }
    }

    /// A claim took these logs; `exhausted` when the store had no more eligible logs.
    /// The oldest-waiting times of what remains are kept: they can only make the next batch earlier, never later (C2).
    mutating func claimed(_ key: BatchKey, normal: Int, critical: Int, exhausted: Bool) {
        waitingNormal = max(0, waitingNormal - normal)
        waitingCritical = max(0, waitingCritical - critical)
        if exhausted { waitingNormal = 0; waitingCritical = 0 }
        if waitingNormal == 0 { oldestNormalMs = nil }
        if waitingCritical == 0 { oldestCriticalMs = nil }
        if waitingNormal == 0 && waitingCritical == 0 { dispatchRequested = false }
        let isProbe: Bool
        if case .retriesExhausted = disabled { isProbe = true } else { isProbe = false }
        batches[key] = Batch(isProbe: isProbe)
    }

    /// A part of a batch being bisected (SPEC R1) takes a lease slot of its own, with its own retry state.
    mutating func adopt(_ key: BatchKey) { batches[key] = Batch() }

    /// The store had nothing to claim.
    mutating func nothingToClaim() {
        waitingNormal = 0
        waitingCritical = 0
        oldestNormalMs = nil
        oldestCriticalMs = nil
        dispatchRequested = false
    }

    /// What the loop must do with a batch whose request finished.
    enum FollowUp: Equatable, Sendable {
        /// Delete its rows (2xx), or — for split/refuse — hand it to the bisection.
        case done
        /// Wait for `retryAtMs`, then `.resend` (the lease is kept).
        case retry(atMs: Int64)
        /// Give its rows back to pending (retries exhausted, or sending stopped): nothing is deleted.
        case releaseRows
    }

    /// A request of batch `key` finished with `outcome` at `nowMs`.
    mutating func finished<R: RandomNumberGenerator>(_ key: BatchKey, outcome: Outcome, nowMs: Int64,
                                                      random: inout R) -> FollowUp {
        guard var batch = batches[key] else { return .done }
        switch outcome {
        case .delivered, .split, .refuse:
            batches[key] = nil
            // A batch got through: the server is back, so a retries-exhausted stop ends (SPEC R5 probe).
            if case .retriesExhausted = disabled { disabled = nil }
            return .done
        case .stop(let status, let reason):
            batches[key] = nil
            disabled = .rejectedCredentials(status: status, reason: reason)
            return .releaseRows
        case .retryable(let reason, let retryAfterMs):
            batch.failedAttempts += 1
            guard !batch.isProbe, let delay = settings.retry.delay(afterFailedAttempts: batch.failedAttempts, using: &random) else {
                // SPEC R5: every channel is disabled; nothing is deleted.
                batches[key] = nil
                disabled = .retriesExhausted(sinceMs: nowMs, lastError: reason)
                return .releaseRows
            }
            retries += 1
            var retryAt = nowMs + delay
            if let pause = settings.retry.pipelinePause(retryAfterMs: retryAfterMs, scheduledMs: delay) {
                // SPEC R4: the whole pipeline waits for the server.
                pipelinePausedUntilMs = max(pipelinePausedUntilMs ?? 0, nowMs + pause)
                retryAt = nowMs + pause
            }
            batch.retryAtMs = retryAt
            batches[key] = batch
            return .retry(atMs: retryAt)
        }
    }

    /// SPEC R5, R1: once sending is disabled, batches waiting for a retry give their rows back to pending (nothing
    /// is deleted). Without this they would hold their leases forever, and the probe — which waits until no batch
    /// holds one — would never go. Returns the batches whose rows the loop must release.
    mutating func takeParkedBatches() -> [BatchKey] {
        guard disabled != nil else { return [] }
        let parked = batches.filter { $0.value.retryAtMs != nil }.map(\.key).sorted()
        for key in parked { batches[key] = nil }
        return parked
    }

    /// A batch's request was cancelled (shutdown): the attempt does not count (SPEC C8).
    mutating func cancelled(_ key: BatchKey) { batches[key] = nil }

    /// A rows-returned batch goes back to waiting (after `.releaseRows`).
    mutating func rowsReleased(normal: Int, critical: Int, nowMs: Int64) { stored(normal: normal, critical: critical, nowMs: nowMs) }

    mutating func pause() { isPaused = true }
    mutating func resume() { isPaused = false }

    /// SPEC C7: send everything waiting now, whatever the mode.
    mutating func dispatch() { dispatchRequested = true }

    /// SPEC R6, R7: offline stops every attempt; coming online (or a route change) resets every retry state.
    mutating func networkChanged(online: Bool, nowMs: Int64) {
        isOnline = online
        guard online else { return }
        retryNow(nowMs: nowMs)
    }

    /// SPEC R5, R6: re-enable, forget back-off, send waiting batches immediately. Credentials errors stay until
    /// the configuration changes (`credentialsChanged`).
    mutating func retryNow(nowMs: Int64) {
        if case .retriesExhausted = disabled { disabled = nil }
        pipelinePausedUntilMs = nil
        for key in batches.keys {
            batches[key]?.failedAttempts = 0
            if batches[key]?.retryAtMs != nil { batches[key]?.retryAtMs = nowMs }
        }
    }

    /// SPEC R1: sending resumes when the configuration is updated.
    mutating func credentialsChanged(nowMs: Int64) {
        disabled = nil
        retryNow(nowMs: nowMs)
    }

    // MARK: - Decision

    /// The next thing to do at `nowMs`. Call repeatedly until it returns `.wait`.
    mutating func next(nowMs: Int64) -> Decision {
        guard isOnline, !isPaused else { return .wait(untilMs: nil) }  // SPEC R7, C5
        if let until = pipelinePausedUntilMs {
            if nowMs < until { return .wait(untilMs: until) }
            pipelinePausedUntilMs = nil
        }
        var wake: Int64? = nil
        func earliest(_ time: Int64?) { if let time { wake = min(wake ?? time, time) } }

        // Batches due for a retry go first: they hold the oldest logs.
        if disabled == nil {
            for (key, batch) in batches.sorted(by: { $0.key < $1.key }) {
                guard let at = batch.retryAtMs else { continue }
                if at <= nowMs {
                    batches[key]?.retryAtMs = nil
                    return .resend(key)
                }
                earliest(at)
            }
        }

        switch disabled {
        case .rejectedCredentials?:
            return .wait(untilMs: nil)
        case .retriesExhausted(let since, _)?:
            // One probe batch at a time, every probe interval.
            guard let probe = settings.probeIntervalMs, waitingNormal + waitingCritical > 0 else { return .wait(untilMs: nil) }
            guard batches.isEmpty else { return .wait(untilMs: nil) }
            if nowMs >= since + probe { return .sendNewBatch }
            return .wait(untilMs: since + probe)
        case nil:
            break
        }

        guard batches.count < settings.maxBatchesInFlight else { return .wait(untilMs: wake) }
        let waiting = waitingNormal + waitingCritical
        guard waiting > 0 else { return .wait(untilMs: wake) }
        if dispatchRequested { return .sendNewBatch }

        if let interval = settings.dispatchIntervalMs {
            if interval <= 0 { return .wait(untilMs: wake) }  // manual: only dispatch()
            if let periodic = nextPeriodicMs, nowMs >= periodic {
                nextPeriodicMs = nowMs + interval
                dispatchRequested = true
                return .sendNewBatch
            }
            earliest(nextPeriodicMs)
            return .wait(untilMs: wake)
        }

        // SPEC C2: a full batch, or the oldest waiting log reached its maximum delay.
        if waiting >= settings.batchSize { return .sendNewBatch }
        if let oldest = oldestCriticalMs, waitingCritical > 0 {
            if nowMs - oldest >= settings.criticalIntervalMs { return .sendNewBatch }
            earliest(oldest + settings.criticalIntervalMs)
        }
        if let oldest = oldestNormalMs, waitingNormal > 0 {
            if nowMs - oldest >= settings.normalIntervalMs { return .sendNewBatch }
            earliest(oldest + settings.normalIntervalMs)
        }
        return .wait(untilMs: wake)
    }
}
