import Foundation
import Logging

/// Result of one `dispatch(completion:)` (SPEC C7; Google Analytics' GAIDispatchResult).
public enum DispatchResult: Sendable, Equatable {
    /// A request delivered logs.
    case good
    /// Nothing was waiting.
    case noData
    /// The request failed (the logs stay stored and are retried).
    case error
}

/// Carries out the scheduler's decisions on the loop thread: claims batches from the store, encodes them, sends
/// them through the transport, and applies each outcome (SPEC C1–C9, R1–R7). Owns no policy of its own.
final class DeliveryDriver {
    private let store: LogStore
    private let transport: Transport
    private let configuration: Configuration
    private let logger: Logger
    private let clock: any OutboxClock
    private let url: String
    private let headers: [(String, String)]
    private var scheduler: DeliveryScheduler
    private var random = SystemRandomNumberGenerator()
    private let wakeTimer: LoopTimer
    private var wakeAtMs: Int64?
    private var correction: ClockCorrection
    private var encoder: BatchEncoder
    /// SPEC W1: bodies of 1400 bytes and more are gzip-compressed (`Configuration.bodyCompression`). Nil if the
    /// compressor could not start: bodies then go uncompressed.
    private let compressor: BodyCompressor?
    private let boot: Int64
    private var nextKey: DeliveryScheduler.BatchKey = 1
    /// A delivered batch whose rows the next claim deletes, in its transaction (set only inside `finished`).
    private var deliveredBatch: Int64?

    /// A batch holding a lease, or a part of one being bisected (SPEC R1 413/400).
    private struct Flight {
        var logs: [StoredLog]
        /// The store's lease of a whole claimed batch (nil for the parts of a bisected one): deleting by lease is
        /// one statement rather than one per log.
        var batchID: Int64? = nil
        var transfer: TransferID?
        var dispatchWaiters: [(DispatchResult) -> Void] = []
    }
    private var flights: [DeliveryScheduler.BatchKey: Flight] = [:]
    private var pendingDispatchWaiters: [(DispatchResult) -> Void] = []
    /// Dispatch callers whose dispatch started no batch while others were pending: the next completion answers them.
    private var nextCompletionWaiters: [(DispatchResult) -> Void] = []
    private var idleWaiters: [() -> Void] = []
    private(set) var counters = DeliveryCounters()
    private var isClosing = false

    init(store: LogStore, transport: Transport, configuration: Configuration, loop: EventLoop, installID: UUID,
         device: DeviceContext, waitingNormal: Int, waitingCritical: Int) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.logger = configuration.logger
        self.clock = configuration.clock
        let base = (configuration.endpoint ?? "").hasSuffix("/") ? String((configuration.endpoint ?? "").dropLast()) : (configuration.endpoint ?? "")
        self.url = base + "/logs?api-version=1.0.0"
        self.headers = [("Content-Type", "application/json"), ("App-Secret", configuration.appSecret),
                        ("Install-ID", installID.uuidString.lowercased())]
        self.scheduler = DeliveryScheduler(settings: configuration.schedulerSettings, nowMs: Self.nowMs(configuration.clock),
                                           waitingNormal: waitingNormal, waitingCritical: waitingCritical)
        self.correction = ClockCorrection(thresholdMs: configuration.clockSkewThreshold.milliseconds)
        self.encoder = BatchEncoder(contexts: [0: device.json()])
        self.compressor = BodyCompressor(configuration.bodyCompression)
        self.boot = BootID.current
        // SPEC R5: a restart re-enables sending; a cause left by the last run no longer holds.
        try? store.setMeta(MetaKey.disabledReason, nil)
        self.wakeTimer = LoopTimer(loop: loop)
        self.wakeTimer.action = { [unowned self] in
            self.wakeAtMs = nil
            self.pump()
        }
    }

    private static func nowMs(_ clock: any OutboxClock) -> Int64 { clock.monoNs() / 1_000_000 }
    private var nowMs: Int64 { Self.nowMs(clock) }

    var disabledReason: String? { scheduler.disabled?.description }
    var retries: Int { scheduler.retries }
    var inFlightBatches: Int { flights.count }

    // MARK: - Events from the engine

    func stored(normal: Int, critical: Int) {
        scheduler.stored(normal: normal, critical: critical, nowMs: nowMs)
        pump()
    }

    func removed(normal: Int, critical: Int) { scheduler.removedWaiting(normal: normal, critical: critical) }

    func pause() { scheduler.pause() }
    func resume() { scheduler.resume(); pump() }

    /// SPEC C7. `completion` is called once: with the result of the first request this dispatch starts; if it
    /// starts none while requests are pending (in flight or waiting for a retry), with the result of the next one
    /// to complete; `.noData` when nothing waits at all; `.error` when sending is paused, offline or disabled.
    func dispatch(completion: ((DispatchResult) -> Void)?) {
        scheduler.dispatch()
        if let completion { pendingDispatchWaiters.append(completion) }
        pump()
        guard !pendingDispatchWaiters.isEmpty else { return }
        let waiters = pendingDispatchWaiters
        pendingDispatchWaiters = []
        if !flights.isEmpty {
            nextCompletionWaiters.append(contentsOf: waiters)
        } else {
            let result: DispatchResult = (scheduler.waitingNormal + scheduler.waitingCritical) == 0 ? .noData : .error
            waiters.forEach { $0(result) }
        }
    }

    /// SPEC A10: the device context that logs are captured under from now on, with its version id in the store.
    /// It also serves logs stored without a version (id 0).
    func setDeviceContext(id: Int64, json: [UInt8]) {
        // A flapping network makes a version per change: older versions are dropped here and read back from the
        // store when a batch still needs them.
        if encoder.contexts.count >= 64 { encoder.contexts.removeAll(keepingCapacity: true) }
        encoder.contexts[id] = json
        encoder.contexts[0] = json
    }

    /// A log is sent with the context it was captured under: versions not in memory are read from the store.
    private func loadContexts(of logs: [StoredLog]) {
        // A batch's logs nearly always share one context: a lookup per change of id, not a set per batch.
        var previous: Int64?
        for log in logs where log.context != previous {
            previous = log.context
            if encoder.contexts[log.context] == nil, let json = try? store.context(id: log.context) {
                encoder.contexts[log.context] = json
            }
        }
    }

    func networkChanged(online: Bool) {
        scheduler.networkChanged(online: online, nowMs: nowMs)
        persistDisabledReason()
        logger.info("network \(online ? "online" : "offline")")
        pump()
    }

    func retryNow() {
        scheduler.retryNow(nowMs: nowMs)
        persistDisabledReason()
        pump()
    }

    /// Calls `done` once nothing waits and nothing is in flight (for `emit --wait-delivered` and `shutdown(drainFor:)`).
    func whenIdle(_ done: @escaping () -> Void) {
        if isIdle { done() } else { idleWaiters.append(done) }
    }

    /// Cheap checks first: the store is asked (a count over the table) only when the scheduler already believes
    /// nothing waits — otherwise a drain of a large backlog would count the table after every batch. By then the
    /// table is empty or nearly, and the count is the table's own, not a figure kept beside it.
    var isIdle: Bool {
        guard flights.isEmpty, scheduler.waitingNormal + scheduler.waitingCritical == 0 else { return false }
        return (try? store.counts()).map { $0.pendingNormal + $0.pendingCritical + $0.inFlight == 0 } ?? false
    }

    private func notifyIdleIfNeeded() {
        guard !idleWaiters.isEmpty, isIdle else { return }
        let waiters = idleWaiters
        idleWaiters = []
        waiters.forEach { $0() }
    }

    // MARK: - The pump

    /// Asks the scheduler what to do until it says wait; arms the one timer for that moment.
    func pump() {
        guard !isClosing else { return }
        releaseParkedBatches()
        while true {
            switch scheduler.next(nowMs: nowMs) {
            case .sendNewBatch:
                guard claimAndSend() else { continue }
            case .resend(let key):
                send(key)
            case .wait(let until):
                arm(until)
                notifyIdleIfNeeded()
                return
            }
        }
    }

    private func arm(_ until: Int64?) {
        guard let until else { wakeTimer.stop(); wakeAtMs = nil; return }
        if wakeAtMs == until { return }
        wakeAtMs = until
        wakeTimer.start(afterMs: UInt64(max(0, until - nowMs)))
    }

    /// Claims a batch and sends it. Returns false when the store had nothing (the scheduler learns it).
    private func claimAndSend() -> Bool {
        do {
            // SPEC S4: expired logs are deleted before a batch is loaded.
            counters.expired += try store.expire(nowMs: clock.wallMs())
            let claimed = try store.claim(limit: configuration.batchSize, nowMs: Int64.max, completing: deliveredBatch)
            deliveredBatch = nil
            guard let batch = claimed.batch, !batch.logs.isEmpty else {
                scheduler.nothingToClaim()
                return false
            }
            let critical = batch.logs.filter { $0.priority == .critical }.count
            let key = nextKey
            nextKey += 1
            scheduler.claimed(key, normal: batch.logs.count - critical, critical: critical,
                              exhausted: batch.logs.count < configuration.batchSize)
            var flight = Flight(logs: batch.logs, batchID: batch.batchID)
            flight.dispatchWaiters = pendingDispatchWaiters
            pendingDispatchWaiters = []
            flights[key] = flight
            send(key)
            return true
        } catch {
            logger.error("claiming a batch failed", metadata: ["outbox.error": "\(error)"])
            scheduler.nothingToClaim()
            return false
        }
    }

    private func send(_ key: DeliveryScheduler.BatchKey) {
        guard var flight = flights[key] else { return }
        loadContexts(of: flight.logs)
        let wallNow = clock.wallMs(), monoNow = clock.monoNs()
        let correction = self.correction, boot = self.boot
        var body = encoder.encode(flight.logs, sentAtMs: correction.timestamp(wallMs: wallNow, monoNs: monoNow, boot: boot,
                                                                           nowWallMs: wallNow, nowMonoNs: monoNow, nowBoot: boot)) { log in
            correction.timestamp(wallMs: log.wallMs, monoNs: log.monoNs, boot: log.boot, nowWallMs: wallNow,
                                 nowMonoNs: monoNow, nowBoot: boot)
        }
        var headers = self.headers
        if body.count >= 1400, let compressed = compressor?.compress(body) {
            body = compressed
            headers.append(("Content-Encoding", "gzip"))
        }
        logger.debug("sending batch", metadata: ["outbox.batch": "\(key)", "outbox.logs": "\(flight.logs.count)"])
        counters.requests += 1
        flight.transfer = transport.send(HTTPRequest(url: url, headers: headers, body: body)) { [weak self] result in
            self?.finished(key, result)
        }
        flights[key] = flight
    }

    // MARK: - Outcomes (SPEC R1)

    private func finished(_ key: DeliveryScheduler.BatchKey, _ result: TransferResult) {
        guard var flight = flights[key] else { return }
        flight.transfer = nil
        if !nextCompletionWaiters.isEmpty {
            let waiters = nextCompletionWaiters
            nextCompletionWaiters = []
            var delivered = false
            if case .response(let response) = result, response.isSuccess { delivered = true }
            waiters.forEach { $0(delivered ? .good : .error) }
        }
        let outcome: Outcome
        switch result {
        case .failure(.cancelled):
            // SPEC C8: an interrupted attempt does not count; the rows stay stored for the next run.
            flights[key] = nil
            scheduler.cancelled(key)
            flight.dispatchWaiters.forEach { $0(.error) }
            return
        case .failure(let failure):
            outcome = .retryable(reason: "\(failure)", retryAfterMs: nil)
        case .response(let response):
            learnServerClock(response)
            let retryAfter = RetryPolicy.retryAfterMs(retryAfter: response.headers["Retry-After"],
                                                      msRetryAfter: response.headers["x-ms-retry-after-ms"], nowMs: clock.wallMs())
            let reason = String(decoding: response.body.prefix(512), as: UTF8.self)
            outcome = Outcome.classify(status: response.status, retryAfterMs: retryAfter, body: reason)
        }
        let seqs = flight.logs.map(\.seq)
        let followUp = scheduler.finished(key, outcome: outcome, nowMs: nowMs, random: &random)
        do {
            switch outcome {
            case .delivered:
                // The next claim deletes this batch in its own transaction (one commit per request instead of
                // two); when the pump claims nothing, it is deleted here on its own. Its rows stay leased until
                // then, so the claim cannot take them again.
                flights[key] = nil
                deliveredBatch = flight.batchID
                pump()
                if let batchID = deliveredBatch {
                    deliveredBatch = nil
                    try store.complete(batchID: batchID)
                } else if flight.batchID == nil {
                    try store.complete(seqs: seqs)
                }
                counters.delivered += seqs.count
                flight.dispatchWaiters.forEach { $0(.good) }
            case .split, .refuse:
                flights[key] = nil
                flight.dispatchWaiters.forEach { $0(.error) }
                try bisect(flight.logs, outcome: outcome)
            case .stop(let status, let reason):
                logger.error("the server refused the credentials or the endpoint; sending stopped, data kept",
                             metadata: ["outbox.status": "\(status)", "outbox.reason": "\(reason.prefix(200))"])
                try store.release(seqs: seqs, nextAttemptMs: 0)
                flights[key] = nil
                released(flight.logs)
                flight.dispatchWaiters.forEach { $0(.error) }
            case .retryable(let reason, _):
                flight.dispatchWaiters.forEach { $0(.error) }
                flight.dispatchWaiters = []
                switch followUp {
                case .retry(let at):
                    logger.info("batch will be retried", metadata: [
                        "outbox.batch": "\(key)", "outbox.reason": "\(reason)", "outbox.retry_in_ms": "\(at - nowMs)"])
                    flights[key] = flight
                case .releaseRows, .done:
                    if followUp == .releaseRows {
                        logger.error("retries exhausted; sending disabled, data kept", metadata: ["outbox.reason": "\(reason)"])
                    }
                    try store.release(seqs: seqs, nextAttemptMs: 0)
                    flights[key] = nil
                    released(flight.logs)
                }
            }
        } catch {
            logger.error("storing the outcome of a batch failed", metadata: ["outbox.error": "\(error)"])
            flights[key] = nil
        }
        persistDisabledReason()
        pump()
    }

    /// SPEC R5: when sending is disabled, batches waiting for a retry return their rows to pending.
    private func releaseParkedBatches() {
        for key in scheduler.takeParkedBatches() {
            guard let flight = flights.removeValue(forKey: key) else { continue }
            do {
                try store.release(seqs: flight.logs.map(\.seq), nextAttemptMs: 0)
            } catch {
                // The rows stay in flight until the next open, which returns them to pending.
                logger.error("releasing a parked batch failed", metadata: ["outbox.error": "\(error)"])
            }
            released(flight.logs)
        }
    }

    private var persistedDisabledReason: String?

    /// SPEC R5: the disabled state and its cause are visible to `outbox status`, also from another process.
    private func persistDisabledReason() {
        let reason = scheduler.disabled?.description
        guard reason != persistedDisabledReason else { return }
        persistedDisabledReason = reason
        try? store.setMeta(MetaKey.disabledReason, reason)
    }

    private func released(_ logs: [StoredLog]) {
        let critical = logs.filter { $0.priority == .critical }.count
        scheduler.rowsReleased(normal: logs.count - critical, critical: critical, nowMs: nowMs)
    }

    /// SPEC R1: 413 splits in halves; 400/422 bisect down to the refused logs. A single refused (or still too
    /// large) log is dead-lettered with the server's status and reason; its neighbours get delivered.
    private func bisect(_ logs: [StoredLog], outcome: Outcome) throws {
        if logs.count == 1 {
            let status: Int
            let reason: String
            switch outcome {
            case .refuse(let code, let text): status = code; reason = text
            default: status = 413; reason = "log too large for the server"
            }
            try store.deadLetter(seqs: logs.map(\.seq), status: status, reason: reason)
            counters.deadLettered += 1
            logger.warning("log refused by the server and dead-lettered", metadata: ["outbox.status": "\(status)"])
            return
        }
        let middle = logs.count / 2
        for part in [Array(logs[..<middle]), Array(logs[middle...])] {
            let key = nextKey
            nextKey += 1
            scheduler.adopt(key)
            flights[key] = Flight(logs: part)
            send(key)
        }
    }

    /// The last `Date` header and its value: a server answers many requests within one second, and parsing the
    /// same text again cost ~20 000 instructions per request.
    private var lastServerDate: (text: String, ms: Int64)?

    private func learnServerClock(_ response: HTTPResponse) {
        guard let date = response.headers["Date"] else { return }
        let serverMs: Int64
        if let last = lastServerDate, last.text == date {
            serverMs = last.ms
        } else {
            guard let parsed = HTTPDate.parse(date) else { return }
            lastServerDate = (date, parsed)
            serverMs = parsed
        }
        correction.learn(serverMs: serverMs, localWallMs: clock.wallMs())
    }

    // MARK: - Shutdown (SPEC C8)

    /// Cancels what is in flight (rows return to pending; the attempt does not count) and closes the transport.
    func close() {
        isClosing = true
        wakeTimer.stop()
        for (key, flight) in flights {
            // Best effort: if this fails the rows stay in flight, and the next open returns them to pending.
            _ = try? store.release(seqs: flight.logs.map(\.seq), nextAttemptMs: 0)
            scheduler.cancelled(key)
        }
        flights = [:]
        transport.cancelAll()
        transport.close()
        wakeTimer.close()
        (pendingDispatchWaiters + nextCompletionWaiters).forEach { $0(.error) }
        pendingDispatchWaiters = []
        nextCompletionWaiters = []
        let waiters = idleWaiters
        idleWaiters = []
        waiters.forEach { $0() }
    }
}

/// What delivery did since the engine started.
public struct DeliveryCounters: Sendable, Equatable {
    public var requests = 0
    public var delivered = 0
    public var deadLettered = 0
    public var expired = 0
}
