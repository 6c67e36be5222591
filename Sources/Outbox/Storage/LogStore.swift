import CSQLite
import Logging

/// The durable queue of logs (SPEC S1–S7, C4, C9, R2): one SQLite file in WAL mode, one connection, owned
/// by the engine's loop thread.
///
/// ```swift
/// let store = try LogStore(path: "/var/lib/app/outbox.sqlite", limits: StoreLimits(),
///                          clock: SystemClock(), logger: logger)
/// let result = try store.append(logs)                 // one transaction (group commit)
/// if let batch = try store.claim(limit: 50, nowMs: clock.wallMs()) {
///     // send batch.logs …
///     try store.complete(batchID: batch.batchID)      // or release(batchID:nextAttemptMs:)
/// }
/// store.close()
/// ```
///
/// Not thread-safe and not `Sendable`: every call must come from the thread that owns the store — the creating
/// thread, until the engine hands it to its loop (`owner`), checked at every entry in every build (ThreadOwner.swift:
/// the connection has no mutex of its own).
/// Every method throws `OutboxError` only.
///
/// Its rooms: each table's statements are its table type's (`Tables/`); every count kept in memory is the `ledger`'s,
/// applied once a transaction has committed; the room and the disk are the `disk` budget's; eviction is
/// `EvictionPlanner`'s plan. This type sequences them: transactions, retries on a full store or disk, recovery.
final class LogStore {
    let path: String
    let limits: StoreLimits
    let clock: any OutboxClock
    let logger: Logger

    /// The path the corrupt database was moved to, when this store had to start afresh (SPEC S7).
    var recoveredFromCorruption: String?
    /// Whether this open created the store file (there was none).
    var createdAtOpen = false
    /// `<path>-mark` (see CommitMark.swift); nil when it cannot be opened.
    var commitMark: CommitMark?
    /// Whether the open ran `PRAGMA quick_check` (it does unless the last session closed the file cleanly).
    var checkedAtOpen = true

    var db: Database
    /// BEHAVIOUR O1–O2: set by the engine once the store is open; nil (tools reading a store): none emitted.
    var metrics: StoreMetrics?
    /// SPEC K1: the keys of a sealed store (nil: plain); the tables seal and open with them.
    var keys: StoreKeys?
    /// The key rotation running on this connection, and where it is (LogStore+Keys.swift); nil before its first step.
    var rotation: KeyRotation?
    /// SPEC K1: sealed logs that did not open (altered on disk) and were deleted, since the store was opened.
    var unreadableTotal: Int { ledger.totals.unreadable }
    /// The thread that owns the store (see the type).
    let owner = ThreadOwner()
    private var lock: FileLock?

    /// Every count kept of what the file holds and of what the store did; changed only through `record` (a change that
    /// committed, or what a read found: StoreLedger.swift).
    private(set) var ledger = StoreLedger()
    /// The caps, the soft budget and the disk's state (DiskBudget.swift).
    var disk: DiskBudget
    /// SPEC D16–D17: each destination's progress when the engine has several (LogStore+Destinations.swift); nil with
    /// one destination named `default`, whose delivered logs leave at once.
    var destinationBook: DestinationBook?
    /// The boot id logs captured now carry: their age is measured on CLOCK_BOOTTIME (SPEC S4).
    var boot: Int64 = BootID.current

    static let batchIDBlock: Int64 = 4096
    /// Smallest accepted `maxStorageSize` (SPEC S2).
    static let minimumStorageSize = 24 * 1024
    static let schemaVersion = LogSchema.version

    // The tables, on the connection of the moment (a corrupt file's replacement has its own).
    var logsTable: LogsTable { LogsTable(db: db, keys: keys) }
    var leasesTable: LeasesTable { LeasesTable(db: db) }
    var deadLettersTable: DeadLettersTable { DeadLettersTable(db: db, keys: keys) }
    var metaTable: MetaTable { MetaTable(db: db) }
    var eventNamesTable: EventNamesTable { EventNamesTable(db: db, keys: keys) }
    var contextsTable: ContextsTable { ContextsTable(db: db, keys: keys) }

    // The ledger's and the budget's figures, read where the store is used.
    var logCount: Int { ledger.logCount }
    var nextSeq: Int64 { ledger.nextSeq }
    var leases: Leases { ledger.leases }
    var evictedTotal: Int { ledger.totals.evicted }
    var expiredTotal: Int { ledger.totals.expired }
    var deadLetteredTotal: Int { ledger.totals.deadLettered }
    var deadLettersDroppedTotal: Int { ledger.totals.deadLettersDropped }
    var fullRetriesTotal: Int { ledger.totals.fullRetries }
    var diskFullTotal: Int { ledger.totals.diskFull }
    /// Logs whose commits the database lost while the engine was stopped (a WAL cut short, SPEC S7), found at open
    /// by the commit mark and reported once.
    var lostAtOpen: Int { ledger.totals.lostAtOpen }
    var pageSize: Int { disk.pageSize }
    var diskCapped: Bool { disk.diskCapped }
    var lastDiskCheckNs: Int64 {
        get { disk.lastCheckNs }
        set { disk.lastCheckNs = newValue }
    }
    var walAutocheckpointPages: Int { disk.walAutocheckpointPages }
    var walSizeLimit: Int { disk.walSizeLimit }

    /// Applies `change` to the ledger: what a transaction of the store's did once it committed (StoreLedger.swift). The
    /// only way the ledger changes; called by the store's own files (`Storage/`), never by its users, which read it.
    func record(_ change: StoreLedger.Change) {
        ledger.apply(change)
        if metrics != nil { reportMetrics(change) }
        guard destinationBook != nil else { return }
        switch change {
        case .appended(let stored, _, _): destinationBook?.appended(stored)
        case .claimed, .completed, .completedSeqs, .released, .releasedSeqs, .deadLettered, .deadLetteredFor, .lostAtOpen,
             .diskFull, .retriedFull, .recounted: break
        case .expired(let count, _) where count == 0: break
        // An eviction check that took nothing (every append under a cap makes one) leaves the counts as they were.
        case .evicted(count: 0), .unreadable(count: 0): break
        case .opened, .deletedAll: destinationBook?.reset()
        case .expired, .evicted, .requeued, .unreadable: destinationBook?.forgetPending()
        }
    }

    /// Opens (creating if needed) the store at `path` and takes its lock. See the type's documentation.
    init(path: String, limits: StoreLimits, clock: any OutboxClock, logger: Logger) throws(OutboxError) {
        try Self.validate(limits)
        self.path = path
        self.limits = limits
        self.clock = clock
        self.logger = logger
        self.disk = DiskBudget(limits: limits)

        // Before anything is created at or beside the path: a file that is not a store stays untouched (S7).
        _ = try StorePathCheck.classify(path)
        let lock: FileLock
        do {
            lock = try FileLock(path: path + ".lock")
        } catch {
            switch error {
            case .held: throw .storeLocked(path: path)
            case .io(let message): throw .io(path: path + ".lock", message: "cannot lock the store: \(message)")
            }
        }

        Self.releaseReserveIfDiskFull(path: path)
        // A store file created now has no commits to lose: a mark left by a deleted store is no loss of this one.
        self.createdAtOpen = !FileSystem.exists(path)
        let opened = try StoreOpener(path: path, limits: limits, clock: clock, logger: logger).openOrRecover()
        self.lock = lock
        self.db = opened.db
        do throws(OutboxError) {
            do throws(OutboxError) {
                try start(opened)
                try sealIfKeyed()
            } catch where error.isCorruption && recoveredFromCorruption == nil {
                // Damage that the start-up's own reads found (the row count reads every leaf): the same
                // treatment as at any other moment (S7). Likelier when the open skipped quick_check.
                try recoverFromCorruption(cause: error)
            }
        } catch {
            db.close()
            lock.unlock()
            throw error
        }
        // In exclusive mode SQLite holds the database's lock from the open's first read until `close()`: the `.lock`
        // file only kept two openers from racing through the open, and its descriptor need not stay (SPEC F4).
        if limits.exclusiveLock {
            lock.unlock()
            self.lock = nil
        }
    }

    deinit { close() }

    /// BEHAVIOUR O1–O2: the store's gauges and outcomes after `change`; the size is read again only when rows came or
    /// went.
    private func reportMetrics(_ change: StoreLedger.Change) {
        guard var metrics else { return }
        var usedBytes: Int?
        var pending = ledger.pending
        if metrics.isLive && db.isOpen {
            switch change {
            case .claimed, .released, .releasedSeqs, .recounted, .diskFull, .retriedFull, .deadLetteredFor, .lostAtOpen: break
            default: usedBytes = try? Self.usedBytes(db)
            }
            // The ledger forgets its pending counts after a change of their shape (and keeps none while several
            // destinations read the store): counted again from the index, as `waiting()` would.
            if pending == nil, let counted = try? waitingCounts() {
                pending = Waiting(normal: counted.normal, critical: counted.critical)
            }
        }
        metrics.update(pending: pending, bytes: usedBytes, evictedTotal: evictedTotal, expiredTotal: expiredTotal)
        self.metrics = metrics
    }

    /// Closes the database (SQLite checkpoints and removes the WAL when the last connection closes) and
    /// releases the lock. Idempotent; every later call throws `shutDown`.
    func close() {
        guard db.isOpen || lock != nil else { return }
        owner.check()
        metrics?.leave()
        StoreOpener.markClosedCleanly(db, logger: logger)
        db.close()
        commitMark = nil
        // SPEC S7: the WAL file is gone now; its room is the next open's reserve, should the disk be full by then.
        if !disk.reserveHeld && disk.pageSize > 0 { holdDiskReserve(leaving: 0) }
        lock?.unlock()
        lock = nil
    }

    var isOpen: Bool { db.isOpen }

    static func validate(_ limits: StoreLimits) throws(OutboxError) {
        if limits.maxStorageSize < minimumStorageSize {
            throw .invalidConfiguration("maxStorageSize must be at least \(minimumStorageSize) bytes (24 KiB), got \(limits.maxStorageSize)")
        }
        if let count = limits.maxLogCount, count < 1 {
            throw .invalidConfiguration("maxLogCount must be at least 1 when set, got \(count)")
        }
        if limits.maxAgeMs <= 0 {
            throw .invalidConfiguration("maxAgeMs must be positive, got \(limits.maxAgeMs)")
        }
        if limits.maxDeadLetterBytes < 0 {
            throw .invalidConfiguration("maxDeadLetterBytes must not be negative, got \(limits.maxDeadLetterBytes)")
        }
    }

    /// Runs `body`; when the database turns out to be corrupt mid-session, moves it aside, starts a fresh one
    /// (SPEC S7) and runs `body` once more.
    func guarded<T>(_ body: () throws(OutboxError) -> T) throws(OutboxError) -> T {
        owner.check()
        guard db.isOpen else { throw .shutDown }
        do throws(OutboxError) {
            return try body()
        } catch {
            guard error.isCorruption else { throw error }
            try recoverFromCorruption(cause: error)
            return try body()
        }
    }

    // MARK: Claiming (C4, C9)

    /// Marks up to `limit` claimable logs as one in-flight batch and returns them: critical logs first, then
    /// normal ones, each in ascending `seq` (C4). Claimable: not in flight and `next_attempt_ms <= nowMs`.
    /// `priority` restricts the claim to one priority. Expired logs (S4) are deleted first.
    /// `nowMs` and `nextAttemptMs` are in the caller's clock; the store only compares them.
    func claim(limit: Int, nowMs: Int64, priority: Priority? = nil) throws(OutboxError) -> ClaimedBatch? {
        try claim(limit: limit, nowMs: nowMs, priority: priority, completing: nil).batch
    }

    /// `claim`, and before it, in the same transaction, what `complete(batchID: completing)` does: delivery deletes a
    /// delivered batch with the claim of the next one, one commit per request instead of two (each commit writes
    /// the `leases` page and the WAL's bookkeeping again). Returns the claimed batch (nil when nothing was
    /// claimable; the delivered one is deleted all the same) and how many of `completing`'s rows were deleted.
    func claim(limit: Int, nowMs: Int64, priority: Priority? = nil,
               completing: Int64?) throws(OutboxError) -> (batch: ClaimedBatch?, completed: Int) {
        guard limit > 0 else {
            guard let completing else { return (nil, 0) }
            return (nil, try complete(batchID: completing))
        }
        return try guarded { () throws(OutboxError) -> (batch: ClaimedBatch?, completed: Int) in
            _ = try expireOnce(nowMs: clock.wallMs())
            let delivered = completing.map { ledger.leases.stretches(of: $0) } ?? []
            let batchID = ledger.lastBatchID + 1
            // A lease is a row of its own: at the cap that can need a page.
            var unreadable: [Int64] = []
            let (claimed, completed) = try withRoom(bytes: 64 * min(limit, 1000)) { () throws(OutboxError) -> ((ClaimedBatch, [LeaseStretch], reserved: Int64?)?, Int) in
                unreadable.removeAll()
                var completed = 0
                if let completing { completed = try deleteDelivered(completing, delivered) }
                var logs: [StoredLog] = []
                logs.reserveCapacity(min(limit, 512))
                var stretches: [LeaseStretch] = []
                let table = logsTable
                for candidate in [Priority.critical, .normal] where priority == nil || priority == candidate {
                    guard logs.count < limit else { break }
                    stretches += try table.claim(candidate, from: ledger.claimFloor[candidate.rawValue],
                                                 leased: ledger.leases.stretches(candidate), limit: limit,
                                                 nowMs: nowMs, batchID: batchID, into: &logs, unreadable: &unreadable)
                }
                // SPEC K1: a sealed row that does not open can never be sent; it goes, counted and reported (below).
                if !unreadable.isEmpty {
                    _ = try table.delete(seqs: unreadable)
                    try keepSeqHigh(deletingThrough: unreadable.max())
                }
                guard !logs.isEmpty else { return (nil, completed) }
                try leasesTable.record(stretches)
                var reserved: Int64?
                if batchID > ledger.reservedBatchID {
                    let reservation = batchID + Self.batchIDBlock - 1
                    try metaTable.set(.lastBatch, String(reservation))
                    reserved = reservation
                }
                return ((ClaimedBatch(batchID: batchID, logs: logs), stretches, reserved), completed)
            }
            if let completing { record(.completed(batchID: completing, deleted: completed)) }
            if !unreadable.isEmpty {
                record(.unreadable(count: unreadable.count))
                logger.error("sealed logs did not open under the store's key (altered on disk?): deleted, never sent (SPEC K1)", metadata: [
                    "outbox.store": "\(path)", "outbox.unreadable": "\(unreadable.count)",
                    "outbox.seqs": "\(unreadable.prefix(10).map(String.init).joined(separator: ","))",
                ])
            }
            guard let (batch, stretches, reserved) = claimed else { return (nil, completed) }
            let critical = batch.logs.reduce(0) { $0 + ($1.priority == .critical ? 1 : 0) }
            // With every pending row claimable (nowMs = Int64.max, as delivery claims), the claim took the lowest
            // pending rows of each priority: none is left below the last one taken.
            let floors: [Int64?] = Priority.allCases.sorted().map { candidate in
                guard nowMs == Int64.max else { return nil }
                return batch.logs.last(where: { $0.priority == candidate }).map { $0.seq + 1 }
            }
            record(.claimed(batchID: batch.batchID, stretches: stretches, reservedThrough: reserved,
                                  taken: Waiting(normal: batch.logs.count - critical, critical: critical), floors: floors))
            return (batch, completed)
        }
    }

    /// Deletes a delivered batch. Returns the number of rows deleted (fewer than claimed when some were
    /// evicted or expired meanwhile).
    @discardableResult
    func complete(batchID: Int64) throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in
            let stretches = ledger.leases.stretches(of: batchID)
            let deleted = try retryingOnFull(.freeingRoom) { (_) throws(OutboxError) -> Int in
                try db.transaction { () throws(OutboxError) -> Int in try deleteDelivered(batchID, stretches) }
            }
            record(.completed(batchID: batchID, deleted: deleted))
            return deleted
        }
    }

    /// Deletes a delivered batch's rows and its leases, in the caller's transaction (which applies `.completed` to
    /// the ledger once it has committed).
    private func deleteDelivered(_ batchID: Int64, _ stretches: [LeaseStretch]) throws(OutboxError) -> Int {
        let deleted = try logsTable.delete(stretches: stretches)
        try leasesTable.drop(batch: batchID)
        try keepSeqHigh(deletingThrough: stretches.lazy.map(\.last).max())
        return deleted
    }

    /// Deletes the given logs (part of a split batch that was delivered).
    @discardableResult
    func complete(seqs: [Int64]) throws(OutboxError) -> Int {
        try delete(seqs: seqs, expired: false)
    }

    /// Deletes held logs by seq; `expired`: found too old to send (SPEC S4), counted as expired.
    func delete(seqs: [Int64], expired: Bool) throws(OutboxError) -> Int {
        guard !seqs.isEmpty else { return 0 }
        return try guarded { () throws(OutboxError) -> Int in
            let cut = ledger.leases.cutting(seqs)
            let deleted = try retryingOnFull(.freeingRoom) { (_) throws(OutboxError) -> Int in try db.transaction { () throws(OutboxError) -> Int in
                let deleted = try logsTable.delete(seqs: seqs)
                try leasesTable.rewrite(cut)
                try keepSeqHigh(deletingThrough: seqs.max())
                return deleted
            } }
            record(.completedSeqs(cut: cut, deleted: deleted, expired: expired))
            return deleted
        }
    }

    /// Returns a batch's logs to pending, claimable again from `nextAttemptMs` (C9, R3).
    @discardableResult
    func release(batchID: Int64, nextAttemptMs: Int64) throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in
            let stretches = ledger.leases.stretches(of: batchID)
            let released = try withRoom(bytes: 4 * pageSize) { () throws(OutboxError) -> Int in
                let released = try logsTable.release(stretches: stretches, nextAttemptMs: nextAttemptMs)
                try leasesTable.drop(batch: batchID)
                try flagRetryTimes(nextAttemptMs)
                return released
            }
            record(.released(batchID: batchID, retryTime: nextAttemptMs != 0))
            return released
        }
    }

    /// Returns the given logs to pending, claimable again from `nextAttemptMs` (splitting a batch, R1).
    @discardableResult
    func release(seqs: [Int64], nextAttemptMs: Int64) throws(OutboxError) -> Int {
        guard !seqs.isEmpty else { return 0 }
        return try guarded { () throws(OutboxError) -> Int in
            let cut = ledger.leases.cutting(seqs)
            let released = try withRoom(bytes: 16 * seqs.count + 64 * cut.count + 64) { () throws(OutboxError) -> Int in
                let released = try logsTable.setNextAttempt(nextAttemptMs, seqs: seqs)
                try leasesTable.rewrite(cut)
                try flagRetryTimes(nextAttemptMs)
                return released
            }
            record(.releasedSeqs(cut: cut, retryTime: nextAttemptMs != 0))
            return released
        }
    }

    /// Stores `MetaKey.retryTimes` with the session's first retry time, in the caller's transaction.
    private func flagRetryTimes(_ nextAttemptMs: Int64) throws(OutboxError) {
        if nextAttemptMs != 0 && !ledger.retryTimesFlagged { try metaTable.set(.retryTimes, "1") }
    }

    // MARK: Expiry (S4)

    /// Deletes logs older than `maxAgeMs` (SPEC S4: boot-time age under this boot, wall-clock age before `nowMs`
    /// otherwise), counts and logs them. Returns how many were deleted.
    @discardableResult
    func expire(nowMs: Int64) throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in try expireOnce(nowMs: nowMs) }
    }

    func expireOnce(nowMs: Int64) throws(OutboxError) -> Int {
        try expiry.expire(nowMs: nowMs, monoNs: clock.monoNs(), logger: logger, record: record)
    }

    /// The store's expiry (StoreExpiry.swift) over the connection and the figures of the moment.
    var expiry: StoreExpiry {
        StoreExpiry(db: db, keys: keys, boot: boot, maxAgeMs: limits.maxAgeMs, ledger: ledger)
    }

    // MARK: Inspection (X4)

    func counts() throws(OutboxError) -> StoreCounts {
        try guarded { () throws(OutboxError) -> StoreCounts in try StoreInspector.readCounts(db) }
    }

    /// Logs waiting to be claimed, by priority, from the row count kept in memory, the critical logs' index and
    /// the leases: unlike `counts()`, no scan of the table (`count(*)` and `min(wall_ms)` read every page, which a
    /// large store would pay at every engine start).
    func waitingCounts() throws(OutboxError) -> (normal: Int, critical: Int) {
        try guarded { () throws(OutboxError) -> (normal: Int, critical: Int) in
            let split = try logsTable.splitByState(total: ledger.logCount)
            return (split.pendingNormal, split.pendingCritical)
        }
    }

    /// `(page_count − freelist_count) × page_size`: what the database holds, free pages excluded.
    static func usedBytes(_ db: Database) throws(OutboxError) -> Int {
        let pages = try db.pragma("page_count")
        let free = try db.pragma("freelist_count")
        let size = try db.pragma("page_size")
        return Int(pages - free) * Int(size)
    }

    /// Every stored log in ascending `seq` (tests and inspection; loads everything).
    func allLogs() throws(OutboxError) -> [StoredLog] {
        try guarded { () throws(OutboxError) -> [StoredLog] in try logsTable.all() }
    }

    // MARK: Opt-out (T6)

    /// Deletes every stored log and dead letter (the user opted out), then rebuilds the file and truncates the
    /// WAL so that the deleted content does not linger in free pages. Meta, event names and device contexts
    /// stay. Returns the number of logs deleted.
    @discardableResult
    func deleteAllLogs() throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in
            let deleted = try db.transaction { () throws(OutboxError) -> Int in
                let deleted = try logsTable.deleteAll()
                try keepSeqHigh(deletingThrough: ledger.nextSeq - 1)
                try leasesTable.deleteAll()
                _ = try deadLettersTable.deleteAll()
                return deleted
            }
            record(.deletedAll)
            // The deletion is what the user asked for and it is committed; the rebuild only scrubs free pages, so
            // its failure (e.g. a full disk) is reported, not thrown.
            do throws(OutboxError) {
                try db.exec("VACUUM")
                try db.checkpoint(.truncate)
            } catch {
                logger.info("could not rebuild the store after deleting its logs; deleted content may remain in free pages until reused",
                            metadata: ["outbox.error": "\(error)"])
            }
            return deleted
        }
    }

    // MARK: WAL

    /// Copies the WAL back into the database and truncates it (housekeeping). Returns false when a reader
    /// (`inspect` in another process) kept it from finishing: not an error, the next checkpoint catches up.
    /// Never waits: the loop thread must not block on another process.
    @discardableResult
    func checkpoint() throws(OutboxError) -> Bool {
        owner.check()
        guard db.isOpen else { throw .shutDown }
        return try !db.checkpoint(.truncate).busy
    }

    /// Size of the -wal file now (0 when absent).
    var walFileSize: Int { FileSystem.size(path + "-wal") ?? 0 }
}
