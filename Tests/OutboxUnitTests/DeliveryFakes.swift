import Foundation
import Logging
import OutboxTestSupport
@testable import Outbox

/// An in-memory `BatchQueue`: logs by seq, leases by batch, dead letters. What the SQLite store does, minus the disk.
final class FakeQueue: BatchQueue {
    private(set) var logs: [Int64: StoredLog] = [:]
    private(set) var held: [Int64: Int64] = [:]  // seq → batch id
    private(set) var deadLetters: [(seq: Int64, status: Int, reason: String)] = []
    private(set) var expired: [Int64] = []
    private(set) var deleteAllCalls = 0
    private(set) var disabledReason: String?
    private var nextSeq: Int64 = 1
    private var nextBatch: Int64 = 1

    /// Adds `count` logs captured at `wallMs`/`monoNs` under `boot`; returns their seqs.
    @discardableResult
    func add(_ count: Int, priority: Priority = .normal, wallMs: Int64 = 1_700_000_000_000, monoNs: Int64 = 1_000_000_000,
             boot: Int64 = 7) -> [Int64] {
        (0..<count).map { _ in
            let seq = nextSeq
            nextSeq += 1
            logs[seq] = StoredLog(seq: seq, id: UUIDBytes(high: UInt64(seq), low: 1), priority: priority, wallMs: wallMs,
                                  monoNs: monoNs, boot: boot, context: 0, payload: Array("{\"i\":\(seq)}".utf8))
            return seq
        }
    }

    var stored: Int { logs.count }

    /// Adds one log with this exact payload.
    func addRaw(_ payload: [UInt8]) {
        let seq = nextSeq
        nextSeq += 1
        logs[seq] = StoredLog(seq: seq, id: UUIDBytes(high: UInt64(seq), low: 1), priority: .normal,
                              wallMs: 1_700_000_000_000, monoNs: 1_000_000_000, boot: 7, context: 0, payload: payload)
    }

    func waiting() throws(OutboxError) -> Waiting {
        var waiting = Waiting()
        for log in logs.values where held[log.seq] == nil {
            if log.priority == .critical { waiting.critical += 1 } else { waiting.normal += 1 }
        }
        return waiting
    }

    func claimBatch(limit: Int, completing: Int64?) throws(OutboxError) -> ClaimedBatch? {
        if let completing { _ = try complete(batchID: completing) }
        let free = logs.values.filter { held[$0.seq] == nil }
            .sorted { ($0.priority.rawValue, -$0.seq) > ($1.priority.rawValue, -$1.seq) }
        guard !free.isEmpty else { return nil }
        let batch = nextBatch
        nextBatch += 1
        let taken = Array(free.prefix(limit))
        for log in taken { held[log.seq] = batch }
        return ClaimedBatch(batchID: batch, logs: taken)
    }

    func complete(batchID: Int64) throws(OutboxError) -> Int {
        let seqs = held.filter { $0.value == batchID }.map(\.key)
        return try complete(seqs: seqs)
    }

    func complete(seqs: [Int64]) throws(OutboxError) -> Int {
        var deleted = 0
        for seq in seqs where logs.removeValue(forKey: seq) != nil {
            held[seq] = nil
            deleted += 1
        }
        return deleted
    }

    func release(batchID: Int64, nextAttemptMs: Int64) throws(OutboxError) -> Int {
        try release(seqs: held.filter { $0.value == batchID }.map(\.key), nextAttemptMs: nextAttemptMs)
    }

    func release(seqs: [Int64], nextAttemptMs: Int64) throws(OutboxError) -> Int {
        seqs.reduce(0) { count, seq in held.removeValue(forKey: seq) != nil ? count + 1 : count }
    }

    func deadLetter(seqs: [Int64], status: Int, reason: String) throws(OutboxError) -> Int {
        for seq in seqs where logs[seq] != nil { deadLetters.append((seq, status, reason)) }
        return try complete(seqs: seqs)
    }

    func expire(seqs: [Int64]) throws(OutboxError) -> Int {
        expired += seqs
        return try complete(seqs: seqs)
    }

    func deleteAllLogs() throws(OutboxError) -> Int {
        deleteAllCalls += 1
        let count = logs.count
        logs = [:]
        held = [:]
        return count
    }

    func context(id: Int64) throws(OutboxError) -> [UInt8]? { nil }
    func setDisabledReason(_ reason: String?) throws(OutboxError) { disabledReason = reason }
}

/// An in-memory `HTTPSender`: requests wait until the test answers them.
final class FakeSender: HTTPSender {
    struct Sent {
        var id: TransferID
        var request: HTTPRequest
        var completion: (TransferResult) -> Void
        /// The `i` of every log in the body.
        var seqs: [Int64]
    }
    private(set) var open: [Sent] = []
    private(set) var all: [Sent] = []
    private(set) var cancelled: [TransferID] = []
    private var next: UInt64 = 1

    func send(_ request: HTTPRequest, completion: @escaping (TransferResult) -> Void) -> TransferID {
        let id = TransferID(rawValue: next)
        next += 1
        let gzipped = request.headers.contains { $0.0 == "Content-Encoding" && $0.1 == "gzip" }
        let body = gzipped ? ((try? TestGzip.decompress(request.body)) ?? []) : request.body
        let text = String(decoding: body, as: UTF8.self)
        let seqs = text.components(separatedBy: "\"i\":").dropFirst().compactMap { Int64($0.prefix { $0.isNumber }) }
        let sent = Sent(id: id, request: request, completion: completion, seqs: seqs)
        open.append(sent)
        all.append(sent)
        return id
    }

    func cancel(_ id: TransferID) {
        cancelled.append(id)
        // The transport answers a cancel on its next turn; the fake answers at once, which is harder on the shell.
        if let index = open.firstIndex(where: { $0.id == id }) {
            open.remove(at: index).completion(.failure(.cancelled))
        }
    }

    func close() {
        let pending = open
        open = []
        pending.forEach { $0.completion(.failure(.cancelled)) }
    }

    /// Answers the oldest open request with `status` (and headers), or a transport failure.
    func answer(_ status: Int, headers: [(String, String)] = [], body: String = "") {
        guard !open.isEmpty else { return }
        let sent = open.removeFirst()
        let timing = TransferTiming(queued: .zero, connect: .zero, firstByte: .zero, total: .zero)
        sent.completion(.response(HTTPResponse(status: status, headers: HTTPHeaders(headers), body: Array(body.utf8),
                                               bodyBytesReceived: body.utf8.count, timing: timing, reusedConnection: false)))
    }

    func fail(_ failure: TransportFailure) {
        guard !open.isEmpty else { return }
        open.removeFirst().completion(.failure(failure))
    }

    /// Answers every open request, again and again, until none is open.
    func answerAll(_ status: Int) { while !open.isEmpty { answer(status) } }
}

/// A timer the test fires by hand.
final class ManualTimer: DeliveryTimer {
    var action: () -> Void = {}
    private(set) var dueMs: UInt64?
    private(set) var isClosed = false
    func start(afterMs: UInt64, repeatMs: UInt64) { dueMs = afterMs }
    func stop() { dueMs = nil }
    func close() { isClosed = true; dueMs = nil }
}

/// The delivery shell over fakes, with a clock the test moves: the whole path from a stored log to a dead letter
/// runs in microseconds.
final class DeliveryRig {
    let queue = FakeQueue()
    let sender = FakeSender()
    let timer = ManualTimer()
    let clock = ManualClock(wallMs: 1_700_000_000_000, monoNs: 1_000_000_000)
    let boot: Int64 = 7
    private(set) var driver: DeliveryDriver!

    init(backlog: Int = 0, wire: any DeliveryWire = AppCenterWire(appSecret: "s3cret", installID: UUID()), _ change: (inout DeliveryMachine.Settings) -> Void = { _ in }) {
        var settings = DeliveryMachine.Settings()
        change(&settings)
        if backlog > 0 { queue.add(backlog, monoNs: clock.monoNs()) }
        driver = DeliveryDriver(queue: queue, sender: sender, timer: timer, settings: settings,
                                request: AppCenterWire(appSecret: "s3cret", installID: UUID()).request(endpoint: "http://127.0.0.1:9", headers: []),
                                clock: clock, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
                                device: DeviceContext(), clockSkewThresholdMs: 1000, bodyCompression: .fast, boot: boot,
                                random: IDGenerator(seed: 1), wire: wire)
    }

    /// Stores `count` logs now and tells delivery.
    @discardableResult
    func track(_ count: Int, priority: Priority = .normal) -> [Int64] {
        let seqs = queue.add(count, priority: priority, wallMs: clock.wallMs(), monoNs: clock.monoNs(), boot: boot)
        driver.stored()
        return seqs
    }

    /// Moves time forward and fires the timer when it is due by then.
    func advance(ms: Int64) {
        clock.advance(ms: ms)
        timer.action()
    }
}
