import CSQLite
import FoundationEssentials
import Logging

/// The dead-letter table (SPEC R2): logs the server refused, kept for inspection under a cap.
extension LogStore {
    /// Longest `reason` kept: a server may answer with a whole HTML page.
    static let maxReasonLength = 1000

    /// The cap that applies: R2's 1 MiB, but never more than a quarter of a small store, so refused logs
    /// cannot crowd out the logs still to send.
    var deadLetterCap: Int { min(limits.maxDeadLetterBytes, limits.maxStorageSize / 4) }

    /// Moves logs the server refused into the dead-letter table with the status and reason. Returns how many
    /// moved. The table is capped (`deadLetterCap`, payload bytes): the oldest letters are dropped first,
    /// counted and logged. A letter larger than the whole cap is dropped at once, also counted.
    @discardableResult
    func deadLetter(seqs: [Int64], status: Int, reason: String) throws(OutboxError) -> Int {
        guard !seqs.isEmpty else { return 0 }
        let reason = String(reason.prefix(Self.maxReasonLength))
        return try guarded { () throws(OutboxError) -> Int in
            // At the cap a letter may not fit where its log was (page fragmentation): each retry makes room in the
            // dead-letter table first, and as a last resort drops the new letters, loudly and counted.
            try retryingOnFull(.deadLettering) { (retry) throws(OutboxError) -> Int in
                try moveToDeadLetters(seqs: seqs, status: status, reason: reason, mode: DeadLetterMode(attempt: retry.attempt))
            }
        }
    }

    /// What an attempt (`FullRetryPlan.deadLettering`, from 1) does with the letters.
    private enum DeadLetterMode {
        case keep, dropOldLettersFirst, dropNewLetters

        init(attempt: Int) {
            switch attempt {
            case 1: self = .keep
            case 2: self = .dropOldLettersFirst
            default: self = .dropNewLetters
            }
        }
    }

    private func moveToDeadLetters(seqs: [Int64], status: Int, reason: String,
                                   mode: DeadLetterMode) throws(OutboxError) -> Int {
        let atMs = clock.wallMs()
        let cap = deadLetterCap
        let (moved, dropped) = try db.transaction { () throws(OutboxError) -> (Int, Int) in
            let logs = logsTable, letters = deadLettersTable
            var dropped = 0
            if mode != .keep { dropped += try letters.deleteAll() }
            let insert = try letters.inserter()
            var moved = 0
            var highestMoved: Int64?
            for seq in seqs {
                guard let log = try logs.letterFields(seq: seq) else { continue }
                // The log goes first, so that its pages are free for the letter.
                _ = try logs.delete(seqs: CollectionOfOne(seq))
                moved += 1
                highestMoved = max(highestMoved ?? seq, seq)
                if mode == .dropNewLetters || log.payload.count > cap {
                    dropped += 1
                    continue
                }
                try letters.insert(with: insert, logSeq: seq, priority: log.priority, wallMs: log.wallMs, status: status,
                                   atMs: atMs, reason: reason, id: log.id, payload: log.payload)
            }
            try keepSeqHigh(deletingThrough: highestMoved)
            dropped += try letters.trim(toBytes: cap)
            return (moved, dropped)
        }
        record(.deadLettered(moved: moved, dropped: dropped))
        if moved > 0 {
            logger.info("moved refused logs to the dead-letter table (SPEC R2)", metadata: [
                "outbox.dead_lettered": "\(moved)", "outbox.status": "\(status)",
            ])
        }
        if dropped > 0 {
            logger.info("dropped dead letters to keep the table under its cap (SPEC R2)", metadata: [
                "outbox.dropped": "\(dropped)", "outbox.cap_bytes": "\(cap)",
            ])
        }
        return moved
    }

    /// Deletes the oldest letters until the payload bytes fit the cap. Returns how many were dropped.
    /// Dead letters, oldest first.
    func deadLetters(limit: Int = .max) throws(OutboxError) -> [DeadLetter] {
        try guarded { () throws(OutboxError) -> [DeadLetter] in try deadLettersTable.list(limit: limit) }
    }

    // MARK: Listing, requeue and purge (SPEC R2, X6)

    /// Dead letters with what a requeue needs, oldest first; `ids` limits them to those logs (an id that is
    /// not there is skipped).
    func deadLetterRows(ids: [UUIDBytes]? = nil) throws(OutboxError) -> [DeadLetterRow] {
        try guarded { () throws(OutboxError) -> [DeadLetterRow] in try deadLettersTable.rows(ids: ids) }
    }

    /// The dead letters as `DeadLetterRecord`s: each log's JSON as it is sent, with the latest device context.
    func deadLetterRecords(ids: [UUIDBytes]? = nil, destination: String? = nil) throws(OutboxError) -> [DeadLetterRecord] {
        try guarded { () throws(OutboxError) -> [DeadLetterRecord] in
            try db.transaction(.deferred) { () throws(OutboxError) -> [DeadLetterRecord] in
                try Self.records(db, keys: keys, ids: ids, destination: destination)
            }
        }
    }

    /// Reads the dead letters of the store file at `path` without taking it over, like `inspect`: works while
    /// an engine runs on it (SPEC X6).
    static func inspectDeadLetters(path: String, key: StoreKey? = nil, ids: [UUIDBytes]?,
                                   destination: String? = nil) throws(OutboxError) -> [DeadLetterRecord] {
        let db = try StoreInspector.openReadOnly(path: path)
        defer { db.close() }
        return try db.transaction(.deferred) { () throws(OutboxError) -> [DeadLetterRecord] in
            let keys = try StoreKeyCheck.keys(db, key: key, path: path)
            return try records(db, keys: keys, ids: ids, destination: destination)
        }
    }

    /// SPEC D18: the store's destinations by id; empty for a store of one.
    static func destinationNames(_ db: Database) throws(OutboxError) -> [Int64: String] {
        guard try db.userVersion >= 5 else { return [:] }
        return Dictionary(uniqueKeysWithValues: try DestinationsTable(db: db).all().map { ($0.id, $0.name) })
    }

    /// The id of the destination `name` (nil for nil: every destination); a name the store does not serve is refused.
    static func destinationID(named name: String?, in names: [Int64: String]) throws(OutboxError) -> Int64? {
        guard let name else { return nil }
        if names.isEmpty && name == NamedDestination.defaultName { return 0 }
        guard let id = names.first(where: { $0.value == name })?.key else {
            let known = names.isEmpty ? [NamedDestination.defaultName] : names.values.sorted()
            throw .invalidConfiguration("the store has no destination named '\(name)'; it has: \(known.joined(separator: ", "))")
        }
        return id
    }

    private static func records(_ db: Database, keys: StoreKeys?, ids: [UUIDBytes]?,
                                destination: String? = nil) throws(OutboxError) -> [DeadLetterRecord] {
        let names = try destinationNames(db)
        let wanted = try destinationID(named: destination, in: names)
        let rows = try DeadLettersTable(db: db, keys: keys).rows(ids: ids).filter { wanted == nil || $0.dest == wanted }
        guard !rows.isEmpty else { return [] }
        let device = try ContextsTable(db: db, keys: keys).latest()?.json
        return rows.map { row in
            var record = DeadLetterRecord(id: row.id.uuid, status: row.status, reason: row.reason, deadLetteredAtMs: row.atMs,
                                          log: String(decoding: sentJSON(of: row, device: device), as: UTF8.self))
            record.destination = names.isEmpty ? nil : names[row.dest] ?? "(removed)"
            return record
        }
    }

    /// The log's JSON object as `BatchEncoder` writes it into a request body, timestamped with its capture time.
    static func sentJSON(of row: DeadLetterRow, device: [UInt8]?) -> [UInt8] {
        var writer = JSONWriter(capacity: row.payload.count + (device?.count ?? 0) + 64)
        BatchEncoder.write(row.payload, timestampMs: row.wallMs, device: device, into: &writer)
        return writer.bytes
    }

    /// Puts dead letters (all, or those of `ids`) back in the queue as pending logs, in one transaction: each
    /// keeps its id, priority and wall-clock capture time, gets a new seq (it queues behind the logs waiting now,
    /// C4) and is claimable at once (a fresh retry state: retries belong to a batch, R3). The store's limits
    /// apply as to an append (S2, S3, S5): room is made by eviction, and a letter that cannot be stored stays
    /// a dead letter (`kept`).
    ///
    /// The table does not keep a log's monotonic capture time, boot or device-context version: the requeued log
    /// gets boot 0, which no boot id equals, so its timestamp and age are read from the wall clock (A9, S4), and
    /// context 0, the current device context.
    @discardableResult
    func requeueDeadLetters(ids: [UUIDBytes]? = nil, destination: String? = nil) throws(OutboxError) -> DeadLetterRequeue {
        try guarded { () throws(OutboxError) -> DeadLetterRequeue in
            // As an append: after SQLITE_FULL the file could not grow as far as the budget said, so ask for more room.
            try retryingOnFull(.requeueing(pageSize: pageSize)) { (retry) throws(OutboxError) -> DeadLetterRequeue in
                let extra = retry.asksForRoom ? retry.extraBytes(usedBytes: try Self.usedBytes(db), budgetBytes: disk.budgetBytes) : 0
                return try requeueOnce(ids: ids, destination: destination, extraBytes: extra)
            }
        }
    }

    private struct RequeueOutcome {
        var result = DeadLetterRequeue()
        var evictions: [EvictionEvent] = []
        var nextSeq: Int64
        var minWallMs: Int64?
        /// SPEC D18: the requeued logs settled at once for the destinations that did not refuse them.
        var settledForOthers: [(dest: Int64, stretch: LeaseStretch)] = []
    }

    private func requeueOnce(ids: [UUIDBytes]?, destination: String?, extraBytes: Int) throws(OutboxError) -> DeadLetterRequeue {
        let outcome = try db.transaction { () throws(OutboxError) -> RequeueOutcome in
            var outcome = RequeueOutcome(nextSeq: ledger.nextSeq)
            let logs = logsTable, letters = deadLettersTable
            let destinations = try Self.destinationNames(db)
            let wanted = try Self.destinationID(named: destination, in: destinations)
            // A letter whose sealed values do not open (SPEC K1) stays as it is: requeued, it would send nothing.
            let rows = try letters.rows(ids: ids).filter { !$0.unreadable && (wanted == nil || $0.dest == wanted) }
            guard !rows.isEmpty else { return outcome }
            // The letters go first, so that their pages count as free when room is made for the logs.
            for row in rows { try letters.delete(seq: row.seq) }
            var candidates: [Candidate] = []
            var keep: [Int] = []
            let largest = disk.maxSingleLogBytes
            for index in rows.indices {
                let bytes = disk.estimatedRowBytes(payload: rows[index].payload.count)
                if bytes > largest {
                    keep.append(index)
                } else {
                    candidates.append(Candidate(index: index, bytes: bytes, priority: rows[index].priority))
                }
            }
            let plan = try makeRoom(for: candidates, mandatoryBytes: 0, extraBytes: extraBytes,
                                    overflowMayEvictCritical: false)
            outcome.evictions = plan.evictions
            keep += plan.rejected.map { candidates[$0].index }
            // No boot id, no monotonic time, context 0: the letter kept none of them.
            let taken = candidates.indices.filter { !plan.rejected.contains($0) }.map { rows[candidates[$0].index] }
            let requeued = taken.map { row in
                NewLog(id: row.id, priority: row.priority, wallMs: row.wallMs, monoNs: 0, boot: 0, context: 0,
                       payload: row.payload)
            }
            let firstSeq = outcome.nextSeq
            outcome.nextSeq = try logs.insert(requeued, at: Array(requeued.indices), firstSeq: outcome.nextSeq)
            // SPEC D18: a requeued letter is pending for the destination that refused it only.
            for (offset, row) in taken.enumerated() where destinations[row.dest] != nil {
                let seq = firstSeq + Int64(offset)
                for other in destinations.keys where other != row.dest {
                    let stretch = LeaseStretch(batch: 0, priority: row.priority, first: seq, last: seq)
                    try destinationsTable.recordSettled([stretch], dest: other)
                    outcome.settledForOthers.append((other, stretch))
                }
            }
            for log in requeued {
                outcome.minWallMs = min(outcome.minWallMs ?? log.wallMs, log.wallMs)
                if log.priority == .critical { outcome.result.critical += 1 } else { outcome.result.normal += 1 }
            }
            // What the store cannot take stays where it was, as it was.
            for index in keep.sorted() { try letters.restore(rows[index]) }
            outcome.result.kept = keep.count
            return outcome
        }
        // Requeued logs carry no boot id (the dead letters do not keep it): they age on the wall clock (SPEC S4).
        record(.requeued(count: outcome.result.requeued, nextSeq: outcome.nextSeq, oldestWallMs: outcome.minWallMs))
        for (dest, stretch) in outcome.settledForOthers {
            destinationBook?.update(dest) { $0.settled.insert(stretch.first...stretch.last, stretch.priority) }
        }
        var result = outcome.result
        result.evicted = commitEvictions(outcome.evictions, reason: "requeued dead letters")
        if result.requeued > 0 {
            logger.info("requeued dead letters as pending logs (SPEC R2)", metadata: [
                "outbox.requeued": "\(result.requeued)", "outbox.critical": "\(result.critical)",
            ])
        }
        if result.kept > 0 {
            logger.warning("some dead letters could not be requeued: the store has no room for them (SPEC S2)", metadata: [
                "outbox.kept": "\(result.kept)",
            ])
        }
        return result
    }

    /// Deletes dead letters (all, or those of `ids`) in one transaction. Returns how many.
    @discardableResult
    func purgeDeadLetters(ids: [UUIDBytes]? = nil, destination: String? = nil) throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in
            let purged = try db.transaction { () throws(OutboxError) -> Int in
                guard let id = try Self.destinationID(named: destination, in: try Self.destinationNames(db)) else {
                    return try deadLettersTable.purge(ids: ids)
                }
                // SPEC D18: the named destination's letters only.
                let rows = try deadLettersTable.rows(ids: ids).filter { $0.dest == id }
                for row in rows { try deadLettersTable.delete(seq: row.seq) }
                return rows.count
            }
            if purged > 0 {
                logger.info("purged dead letters (SPEC R2)", metadata: ["outbox.purged": "\(purged)"])
            }
            return purged
        }
    }
}

extension UUIDBytes {
    init(_ uuid: UUID) {
        let b = uuid.uuid
        high = [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7].reduce(0) { $0 << 8 | UInt64($1) }
        low = [b.8, b.9, b.10, b.11, b.12, b.13, b.14, b.15].reduce(0) { $0 << 8 | UInt64($1) }
    }

    var uuid: UUID {
        let h = high.bigEndian, l = low.bigEndian
        return withUnsafeBytes(of: (h, l)) { raw in
            UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                        raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }
}
