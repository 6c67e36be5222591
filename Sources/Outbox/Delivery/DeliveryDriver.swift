import FoundationEssentials
import Logging
import CoreMetrics

/// Result of one `dispatch(completion:)` (SPEC C7; Google Analytics' GAIDispatchResult).
public enum DispatchResult: Sendable, Equatable {
    /// Every request the dispatch started delivered its logs.
    case good
    /// Nothing was waiting.
    case noData
    /// A request failed, or sending is paused, offline or disabled (the logs stay stored and are retried).
    case error
}

/// The thin shell around `DeliveryMachine`, which decides in pure code: it feeds the machine events with the time
/// and the queue's counts, and carries out the actions it returns against a `BatchQueue` and an `HTTPSender`. It
/// holds no delivery state of its own beyond what carrying out needs: the closures of waiters, the transfer id of
/// each batch on the wire, and the device contexts the wire encodes with. Loop-owned: every entry asserts the loop's thread.
final class DeliveryDriver {
    private let queue: any BatchQueue
    private var sender: any HTTPSender
    /// Senders replaced by `reconfigure`: their transfers finish under the old settings (SPEC R8); closed with the driver.
    private var retiredSenders: [any HTTPSender] = []
    private let logger: Logger
    private let clock: any OutboxClock
    private let boot: Int64
    private let assertOwner: () -> Void
    private var request: RequestSettings
    private var machine: DeliveryMachine
    private let timer: any DeliveryTimer
    private var correction: ClockCorrection
    /// The device contexts the wires read, by id (0: the current one); a few, dropped when they pile up.
    private var contexts: [Int64: [UInt8]]
    /// SPEC W1: bodies of 1400 bytes and more are gzip-compressed. Nil if the compressor could not start: bodies
    /// then go uncompressed.
    private let compressor: BodyCompressor?
    private var transfers: [DeliveryMachine.BatchKey: (sender: any HTTPSender, id: TransferID)] = [:]
    private var dispatchWaiters: [WaiterID: (DispatchResult) -> Void] = [:]
    private var idleWaiters: [WaiterID: () -> Void] = [:]
    private var nextWaiter: WaiterID = 1
    private var isClosed = false
    /// Set while actions are carried out: an event raised meanwhile (a sender completing synchronously) waits its turn.
    private var isHandling = false
    private var deferredEvents: [DeliveryMachine.Event] = []

    /// Where and how requests go (the wire's `request`); replaced as a whole by `update` (SPEC R8).
    struct RequestSettings {
        var url: String
        var headers: [(String, String)]

        init(url: String, headers: [(String, String)]) {
            self.url = url
            self.headers = headers
        }
    }

    /// The destination's wire (SPEC D1): encodes batches and reads answers; replaced by `update` (R8).
    private var wire: any DeliveryWire
    /// The destination last recorded in the store as the one sent to (`outbox status`).
    private var recordedDestination: Destination?

    init(queue: any BatchQueue, sender: any HTTPSender, timer: any DeliveryTimer, settings: DeliveryMachine.Settings,
         request: RequestSettings, clock: any OutboxClock, logger: Logger, device: DeviceContext,
         clockSkewThresholdMs: Int64, bodyCompression: BodyCompression, boot: Int64 = BootID.current,
         random: IDGenerator = IDGenerator(), wire: any DeliveryWire,
         assertOwner: @escaping () -> Void = {}) {
        self.queue = queue
        self.wire = wire
        self.sender = sender
        self.timer = timer
        self.request = request
        self.clock = clock
        self.logger = logger
        self.boot = boot
        self.assertOwner = assertOwner
        self.correction = ClockCorrection(thresholdMs: clockSkewThresholdMs)
        self.contexts = [0: device.json()]
        self.compressor = BodyCompressor(bodyCompression)
        let waiting = (try? queue.waiting()) ?? Waiting()
        self.machine = DeliveryMachine(settings: settings, now: DeliveryNow(clock, boot: boot), waiting: waiting, random: random)
        // SPEC R5: a restart re-enables sending; a cause left by the last run no longer holds.
        try? queue.setDisabledReason(nil)
        timer.action = { [unowned self] in self.handle(.timerFired) }
    }

    /// SPEC D16: told whenever a request of this destination starts or ends, so that an engine of several shares C3's
    /// requests among them (`DeliveryGroup`); nil with one destination.
    var requestsChanged: (() -> Void)?
    /// Requests of this destination on the wire now.
    var requestsInFlight: Int { transfers.count }
    /// Whether it has logs to send or batches held.
    var hasWork: Bool { machine.inFlightBatches > 0 || ((try? queue.waiting().total) ?? 0) > 0 }
    private(set) var requestLimit = DeliveryMachine.Settings().maxBatchesInFlight

    /// SPEC D16: this destination's share of C3's requests.
    func setRequestLimit(_ limit: Int) {
        guard limit != requestLimit else { return }
        requestLimit = limit
        handle(.requestLimit(limit))
    }

    /// BEHAVIOUR O1–O2: this destination's metrics, set by `DeliveryGroup` with its name; nil: none emitted.
    var metrics: DestinationMetrics?
    /// The machine's counters as last reported to `metrics`: what moved since is emitted after each event.
    private var reported = (DeliveryCounters(), 0)
    /// When each batch on the wire was sent (monotonic ns) and its oldest log's wall time (ms), for O2's timers.
    private var sentAt: [DeliveryMachine.BatchKey: (monoNs: Int64, oldestWallMs: Int64)] = [:]
    private var isDisabledReported = false

    /// BEHAVIOUR H2–H4: what this destination leaves out of what it sends; nil: every log whole. Replaced by `update`:
    /// its skipping applies to the batches claimed from then on, its redaction to every request from then on.
    var policy: DestinationPolicy?
    /// BEHAVIOUR H2, D18: logs this destination's policy settled without sending them, since the engine started.
    private(set) var skipped = 0

    var disabledReason: String? { machine.disabledReason }
    var retries: Int { machine.retries }
    var counters: DeliveryCounters { machine.counters }
    var inFlightBatches: Int { machine.inFlightBatches }
    /// SPEC R9–R10: the fault that holds and the drain's width, for status and tests.
    var fault: DeliveryMachine.Fault? { machine.fault }
    var drainWidth: Int? { machine.drainWidth }

    // MARK: - Events from the engine

    /// The queue changed outside delivery: logs stored, requeued, evicted or expired.
    func stored() { handle(.stored) }
    func pause() { handle(.pause) }
    func resume() { handle(.resume) }
    func retryNow() { handle(.retryNow) }
    func optOut() { handle(.optOut) }
    func optIn() { handle(.optIn) }

    /// SPEC N2, R6, R7: reachability as the watcher or the host sees it.
    func reachability(online: Bool) { handle(.reachability(online: online)) }
    /// SPEC R6: the default route moved while online.
    func networkChanged() { handle(.networkChanged) }

    /// SPEC C7: `completion` is called once, after every request this dispatch started has finished.
    func dispatch(completion: ((DispatchResult) -> Void)?) {
        guard let completion else { handle(.dispatch(nil)); return }
        let id = newWaiter()
        dispatchWaiters[id] = completion
        handle(.dispatch(id))
    }

    /// Calls `done` once nothing waits and nothing is in flight (`emit --wait-delivered`, `shutdown(drainFor:)`).
    func whenIdle(_ done: @escaping () -> Void) {
        let id = newWaiter()
        idleWaiters[id] = done
        handle(.whenIdle(id))
    }

    private func newWaiter() -> WaiterID {
        defer { nextWaiter += 1 }
        return nextWaiter
    }

    /// SPEC R8: later requests go to the new endpoint with the new secret (and through `sender`, when the transport's
    /// own settings changed); batches on the wire finish as they are.
    func reconfigure(_ request: RequestSettings, sender newSender: (any HTTPSender)? = nil, wire newWire: (any DeliveryWire)? = nil) {
        assertOwner()
        self.request = request
        // SPEC R8: batches waiting for a retry hold stored logs, not bodies: they are encoded again by the new wire.
        if let newWire { wire = newWire }
        if let newSender {
            retiredSenders.append(sender)
            sender = newSender
        }
        handle(.reconfigured)
    }

    /// SPEC A10: the device context that logs are captured under from now on, with its version id in the store.
    /// It also serves logs stored without a version (id 0).
    func setDeviceContext(id: Int64, json: [UInt8]) {
        // A flapping network makes a version per change: older versions are dropped here and read back from the
        // store when a batch still needs them.
        if contexts.count >= 64 { contexts.removeAll(keepingCapacity: true) }
        contexts[id] = json
        contexts[0] = json
    }

    /// SPEC C8: cancels what is in flight (rows return to pending; the attempt does not count) and closes the
    /// sender and the timer.
    func close() {
        guard !isClosed else { return }
        handle(.shutdown)
        isClosed = true
        // O2: this engine's share of the shared gauges leaves with it.
        for _ in sentAt { metrics?.inFlight.decrement() }
        sentAt = [:]
        if isDisabledReported { metrics?.disabled.decrement(); isDisabledReported = false }
        sender.close()
        retiredSenders.forEach { $0.close() }
        timer.close()
    }

    // MARK: - Carrying out

    private func handle(_ event: DeliveryMachine.Event) {
        assertOwner()
        // After close the machine is shut down and refuses what comes (answering waiters): it is still asked.
        if isHandling { deferredEvents.append(event); return }
        let requestsBefore = transfers.count
        isHandling = true
        var next: DeliveryMachine.Event? = event
        while let event = next ?? (deferredEvents.isEmpty ? nil : deferredEvents.removeFirst()) {
            next = nil
            for action in machine.handle(event, now: DeliveryNow(clock, boot: boot), waiting: waiting()) {
                _ = perform(action)
            }
            // Decided on the counts as the event's own actions left them.
            for action in machine.decide(now: DeliveryNow(clock, boot: boot), waiting: waiting()) {
                if let answer = perform(action) { next = answer }
            }
        }
        isHandling = false
        // BEHAVIOUR D16: told once the machine is done, never in the middle: a share given then would reach this machine
        // only after it had claimed under the old one.
        if transfers.count != requestsBefore { requestsChanged?() }
        if metrics != nil { reportCounters() }
    }

    /// BEHAVIOUR O1: what the machine counted since the last event, added to the destination's counters.
    private func reportCounters() {
        guard let metrics else { return }
        let counters = machine.counters, retries = machine.retries
        if counters.delivered > reported.0.delivered { metrics.delivered.increment(by: Int64(counters.delivered - reported.0.delivered)) }
        if counters.probes > reported.0.probes { metrics.probes.increment(by: Int64(counters.probes - reported.0.probes)) }
        if retries > reported.1 { metrics.retries.increment(by: Int64(retries - reported.1)) }
        reported = (counters, retries)
    }

    private func waiting() -> Waiting {
        do {
            return try queue.waiting()
        } catch {
            logger.error("reading the queue's counts failed", metadata: ["outbox.error": "\(error)"])
            return Waiting()
        }
    }

    /// Carries out one action; returns the event that answers it (a claim's result).
    private func perform(_ action: DeliveryMachine.Action) -> DeliveryMachine.Event? {
        do {
            switch action {
            case .claim(let limit, let completing):
                let most = min(limit, wire.maxLogsPerRequest ?? limit)
                let claimed = try queue.claimBatch(limit: most, completing: completing)
                guard let policy else { return .claimed(claimed) }
                return .claimed(try skipping(claimed, policy: policy, limit: most))
            case .send(let key, let logs):
                send(key, logs)
            case .cancel(let key):
                if let transfer = transfers.removeValue(forKey: key) {
                    transfer.sender.cancel(transfer.id)
                    if sentAt.removeValue(forKey: key) != nil { metrics?.inFlight.decrement() }
                }
            case .complete(let batchID, let seqs):
                if let batchID { _ = try queue.complete(batchID: batchID) } else { _ = try queue.complete(seqs: seqs) }
            case .release(let batchID, let seqs):
                if let batchID { _ = try queue.release(batchID: batchID, nextAttemptMs: 0) }
                else { _ = try queue.release(seqs: seqs, nextAttemptMs: 0) }
            case .deadLetter(let seqs, let status, let reason):
                _ = try queue.deadLetter(seqs: seqs, status: status, reason: reason)
                metrics?.deadLettered.increment(by: Int64(seqs.count))
            case .expire(let seqs):
                _ = try queue.expire(seqs: seqs)
            case .deleteAll:
                _ = try queue.deleteAllLogs()
            case .arm(let atMs):
                timer.stop()
                if let atMs { timer.start(afterMs: UInt64(max(0, atMs - clock.monoNs() / 1_000_000)), repeatMs: 0) }
            case .notify(let ids, let result):
                for id in ids { dispatchWaiters.removeValue(forKey: id)?(result) }
            case .notifyIdle(let ids):
                for id in ids { idleWaiters.removeValue(forKey: id)?() }
            case .disabledChanged(let reason):
                if let metrics, (reason != nil) != isDisabledReported {
                    isDisabledReported = reason != nil
                    if isDisabledReported { metrics.disabled.increment() } else { metrics.disabled.decrement() }
                }
                try queue.setDisabledReason(reason)
            case .serverRejected(let count):
                try queue.addServerRejected(count)
            case .log(let line):
                log(line)
            }
        } catch {
            // What failed stays as the store had it: rows held by a batch return to pending at the next open.
            logger.error("carrying out a delivery action failed", metadata: ["outbox.error": "\(error)"])
        }
        return nil
    }

    /// BEHAVIOUR H2, H4: the claimed batch without the logs this destination's policy skips, which are settled for it
    /// at once (`skipped`). A batch of only skipped logs is settled in the claim of the next one, one commit each, until
    /// a batch holds a log to send or nothing is left.
    private func skipping(_ claimed: ClaimedBatch?, policy: DestinationPolicy, limit: Int) throws(OutboxError) -> ClaimedBatch? {
        var batch = claimed
        while let current = batch {
            let (kept, skipped) = policy.partition(current.logs)
            guard !skipped.isEmpty else { break }
            self.skipped += skipped.count
            metrics?.recordSkipped(skipped.count)
            if kept.isEmpty {
                batch = try queue.claimBatch(limit: limit, completing: current.batchID)
                continue
            }
            _ = try queue.complete(seqs: skipped)
            batch = ClaimedBatch(batchID: current.batchID, logs: kept)
            break
        }
        return batch
    }

    private func log(_ line: DeliveryMachine.LogLine) {
        let metadata = line.metadata.mapValues { Logger.MetadataValue.string($0) }
        switch line.level {
        case .debug: logger.debug("\(line.message)", metadata: metadata)
        case .info: logger.info("\(line.message)", metadata: metadata)
        case .warning: logger.warning("\(line.message)", metadata: metadata)
        case .error: logger.error("\(line.message)", metadata: metadata)
        }
    }

    /// A log is sent with the context it was captured under: versions not in memory are read from the store.
    private func loadContexts(of logs: [StoredLog]) {
        var previous: Int64?
        for log in logs where log.context != previous {
            previous = log.context
            if contexts[log.context] == nil, let json = try? queue.context(id: log.context) {
                contexts[log.context] = json
            }
        }
    }

    private func send(_ key: DeliveryMachine.BatchKey, _ claimed: [StoredLog]) {
        let logs = policy?.redacting(claimed) ?? claimed
        loadContexts(of: logs)
        let wallNow = clock.wallMs(), monoNow = clock.monoNs()
        let correction = self.correction, boot = self.boot
        let times = WireTimes(sentAtMs: correction.timestamp(wallMs: wallNow, monoNs: monoNow, boot: boot,
                                                             nowWallMs: wallNow, nowMonoNs: monoNow, nowBoot: boot),
                              timestamp: { log in
                                  correction.timestamp(wallMs: log.wallMs, monoNs: log.monoNs, boot: log.boot,
                                                       nowWallMs: wallNow, nowMonoNs: monoNow, nowBoot: boot)
                              },
                              deviceNowMs: wallNow,
                              deviceTimestamp: { WireTimes.deviceTime(of: $0, nowWallMs: wallNow, nowMonoNs: monoNow, nowBoot: boot) })
        if let most = wire.maxLogsPerRequest, logs.count > most {
            // A batch claimed under another wire (R8) is more than this one carries a request: halves, as a 413's.
            handle(.transferOutcome(key, .split))
            return
        }
        if let refused = logs.lazy.compactMap({ self.wire.refusal(of: $0, times: times) }).first {
            // What the destination must never receive is bisected out and dead-lettered with the wire's reason.
            handle(.transferOutcome(key, .refuse(status: 422, reason: refused)))
            return
        }
        if let tooLarge = oversize(logs, times: times) {
            // SPEC D6: what the destination would refuse is not sent; the machine bisects it as it bisects a refused
            // batch, down to the single log, which is dead-lettered with the limit in its reason.
            handle(.transferOutcome(key, .refuse(status: 413, reason: tooLarge)))
            return
        }
        var body = wire.encode(logs, contexts: contexts, times: times)
        if let limit = wire.maxRequestBytes, body.count > limit {
            handle(.transferOutcome(key, .refuse(status: 413, reason:
                "a body of \(body.count) bytes is over the \(wire.destination) limit of \(limit) bytes per request")))
            return
        }
        if recordedDestination != wire.destination {
            recordedDestination = wire.destination
            do {
                try queue.recordDestination(wire.destination.name)
            } catch {
                logger.warning("could not record the destination in the store", metadata: ["outbox.error": "\(error)"])
            }
        }
        var headers = request.headers
        if body.count >= 1400, wire.acceptsGzipBody, let compressed = compressor?.compress(body) {
            body = compressed
            headers.append(("Content-Encoding", "gzip"))
        }
        let sender = self.sender, url = request.url
        let id = sender.send(HTTPRequest(url: url, headers: headers, body: body)) { [weak self] result in
            self?.transferFinished(key, result, url: url)
        }
        transfers[key] = (sender, id)
        if let metrics {
            metrics.inFlight.increment()
            sentAt[key] = (clock.monoNs(), logs.lazy.map(\.wallMs).min() ?? wallNow)
        }
    }

    private func transferFinished(_ key: DeliveryMachine.BatchKey, _ result: TransferResult, url: String) {
        transfers[key] = nil
        if metrics != nil { reportRequest(key, result) }
        if case .response(let response) = result { learnServerClock(response) }
        var outcome = wire.outcome(of: result, nowWallMs: clock.wallMs())
        if case .stop(let status, let reason) = outcome, case .response = result {
            // SPEC R1: a stop names the URL the answer came from (an endpoint given with the wire's path twice, a
            // proxy's path): the user sees what was requested, its credentials masked (K3).
            outcome = .stop(status: status, reason: "POST \(maskingCredentials(in: url)): \(reason)")
        }
        handle(.transferOutcome(key, outcome))
        requestsChanged?()
    }

    /// BEHAVIOUR O1–O2: a finished request counted by its status (`error`: no HTTP answer), its duration timed, and
    /// for a 2xx the delay from its oldest log's tracking to now.
    private func reportRequest(_ key: DeliveryMachine.BatchKey, _ result: TransferResult) {
        guard metrics != nil, let sent = sentAt.removeValue(forKey: key) else { return }
        metrics?.inFlight.decrement()
        let status: Int?
        switch result {
        case .response(let response): status = response.status
        case .failure: status = nil
        }
        metrics?.requestCounter(status: status).increment()
        metrics?.requestDuration.recordNanoseconds(max(0, clock.monoNs() - sent.monoNs))
        if let status, (200..<300).contains(status) {
            metrics?.deliveryDelay.recordMilliseconds(max(0, clock.wallMs() - sent.oldestWallMs))
        }
    }

    /// SPEC D6: why the batch must not go as it is — a log over the destination's per-log limit (alone, it is
    /// dead-lettered with this reason); nil when every log fits.
    private func oversize(_ logs: [StoredLog], times: WireTimes) -> String? {
        guard let limit = wire.maxLogBytes else { return nil }
        for log in logs {
            // A log far below the limit is not encoded twice: its record is at most about twice its payload plus
            // its device context (escapes, repeated device fields) and a fixed envelope.
            if 2 * (log.payload.count + (contexts[log.context]?.count ?? 0)) + 4096 < limit { continue }
            let size = wire.encode([log], contexts: contexts, times: times).count
            if size > limit {
                return "a log of \(size) bytes is over the \(wire.destination) limit of \(limit) bytes per log"
            }
        }
        return nil
    }

    /// The last `Date` header and its value: a server answers many requests within one second.
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
        correction.learn(serverMs: serverMs, monoNs: clock.monoNs(), boot: boot)
    }
}
