import CSQLite
import Logging

/// The start-up on a connection `StoreOpener` opened, before the store uses it (SPEC S2, S4, S6, S7, C9): the
/// per-connection settings, the last process's leases and retry times cleared, the counts read, the commit mark
/// checked, the cap re-applied, expiry, the contexts pruned. A type of its own holding the connection and the few
/// things the start-up needs; eviction and expiry are `StoreEviction`'s and `StoreExpiry`'s, as in the store. It
/// hands the store the ledger's changes and returns what else it keeps (`Started`), so that the store is built, or
/// rebuilt after corruption, from the connection and that alone.
struct StoreOpening {
    let db: Database
    /// SPEC K1: the keys of a sealed store; nil for a plain one.
    let keys: StoreKeys?
    /// The path, the limits, the clock and the logger.
    let opener: StoreOpener
    /// The boot id logs captured now carry (SPEC S4).
    let boot: Int64

    /// What the start-up leaves for the store.
    struct Started {
        /// The room, with the file's page size, the schema's bytes and the reserve's state.
        var disk: DiskBudget
        /// `<path>-mark`; nil when it cannot be opened.
        var commitMark: CommitMark?
    }

    private var path: String { opener.path }
    private var limits: StoreLimits { opener.limits }
    private var logger: Logger { opener.logger }

    /// Runs the start-up. `disk`, `ledger` and `commitMark` are the store's as they are: the start-up decides on a
    /// copy of the ledger, so that numbering goes on above what it gave out already (`.opened`), and hands the store
    /// each change it reads or makes (`.opened`, `.lostAtOpen`, `.evicted`, `.expired`) as it happens, through
    /// `record`: a start-up that fails part way (corruption its reads found, then S7's move aside) leaves the ledger as
    /// far as it went. `reportsLoss`: false for a file created now or just moved aside (S7), whose mark starts afresh.
    func start(disk: DiskBudget, ledger: StoreLedger, commitMark: CommitMark?, reportsLoss: Bool,
               record store: (StoreLedger.Change) -> Void) throws(OutboxError) -> Started {
        var started = Started(disk: disk, commitMark: commitMark)
        var ledger = ledger
        func record(_ change: StoreLedger.Change) {
            ledger.apply(change)
            store(change)
        }
        let pageSize = try configure(&started.disk)
        try clearLastSession()
        started.disk.baseBytes = (Int(try db.int64("SELECT count(*) FROM sqlite_schema WHERE rootpage > 0") ?? 0) + 1) * pageSize
        let held = try loadCounts(record: record)
        started.commitMark = checkCommitMark(started.commitMark, held: held, reportsLoss: reportsLoss, record: record)
        try enforceCap(started.disk, ledger: ledger, record: record)
        _ = try StoreExpiry(db: db, keys: keys, boot: boot, maxAgeMs: limits.maxAgeMs, ledger: ledger)
            .expire(nowMs: opener.clock.wallMs(), monoNs: opener.clock.monoNs(), logger: logger, record: record)
        // Device contexts no log refers to any more, except the latest (which new logs will use).
        try db.transaction { () throws(OutboxError) in try ContextsTable(db: db, keys: keys).prune() }
        return started
    }

    /// Per-connection settings (none is stored in the file: every open sets them), the caps from the file's page size,
    /// the disk reserve and the WAL's checkpointer. Returns the page size.
    private func configure(_ disk: inout DiskBudget) throws(OutboxError) -> Int {
        let pageSize = Int(try db.pragma("page_size"))
        guard pageSize > 0 else {
            throw .storage(code: SQLITE_CORRUPT, message: "page size of \(path) reads as 0")
        }
        disk.opened(pageSize: pageSize)
        // max_page_count is not stored in the file: it must be set on every open. SQLite refuses to go below
        // the current page count, which `enforceCap` then fixes.
        try db.exec("PRAGMA max_page_count = \(disk.maxPages)")
        try db.exec("PRAGMA journal_size_limit = \(disk.walSizeLimit)")
        let reserve = DiskReserve(path: path)
        reserve.hold(&disk, leaving: 2 * disk.diskReserveBytes, logger: logger)
        let checkpointer = WALCheckpointer(
            walPath: db.walPath, checkpointPages: disk.walAutocheckpointPages,
            writeBackPages: WALCheckpointer.writeBackPages(checkpointPages: disk.walAutocheckpointPages, pageSize: pageSize),
            disk: reserve.watch(disk))
        checkpointer.keepsDescriptor = !limits.exclusiveLock
        db.setWALCheckpointer(checkpointer)
        // A store rebuilt by VACUUM (opt-out, cap lowered) needs its temporary copy somewhere; memory keeps
        // it off the disk that may be full.
        try db.exec("PRAGMA temp_store = MEMORY")
        return pageSize
    }

    /// C9, S6: whatever was in flight when the last process stopped is sent again; and the retry state (R3) lived in
    /// that process, so every row is claimable at once. next_attempt_ms values are in the old process's clock anyway.
    /// Only a store flagged by a release that set one holds any.
    private func clearLastSession() throws(OutboxError) {
        let meta = MetaTable(db: db)
        let flagged = try meta.value(.retryTimes) != nil
        try db.transaction { () throws(OutboxError) in
            try LeasesTable(db: db).deleteAll()
            // From the first write on, the file is no longer as the clean close left it.
            try meta.set(.closedCleanly, nil)
            if flagged {
                try LogsTable(db: db, keys: keys).clearRetryTimes()
                try meta.set(.retryTimes, nil)
            }
        }
    }

    /// Records the file's counts (`.opened`); returns the highest seq the file holds or ever held.
    private func loadCounts(record: (StoreLedger.Change) -> Void) throws(OutboxError) -> Int64 {
        let counts = try LogsTable(db: db, keys: keys).openingCounts(boot: boot)
        let meta = MetaTable(db: db)
        // Numbering goes on above every seq this file ever held, delivered ones included, so that the commit mark
        // (CommitMark) and the database count the same way across sessions.
        let high = Int64(try meta.value(.seqHigh) ?? "") ?? 0
        // The stored batch id is a reservation (`LogStore.batchIDBlock`): numbering goes on above it.
        let reservation = Int64(try meta.value(.lastBatch) ?? "") ?? 0
        let held = max(counts.highestSeq, high)
        record(.opened(logCount: counts.count, highestSeq: held, batchReservation: reservation, bound: counts.bound))
        return held
    }

    /// The commit mark (SPEC S7, see `CommitMark`), with `held` the highest seq the file holds or ever held: when the
    /// mark says appends committed seqs the database does not hold, their commits were cut from the WAL while the
    /// engine was stopped (or lost with the power): reports them once, then brings the mark in line, so the next open
    /// reports nothing. A store just moved aside (S7) has reported its loss already and starts its mark afresh, as do a
    /// store file created now and a missing or garbled mark. Returns the mark (nil when it cannot be opened).
    private func checkCommitMark(_ mark: CommitMark?, held: Int64, reportsLoss: Bool,
                                 record: (StoreLedger.Change) -> Void) -> CommitMark? {
        guard let mark = mark ?? CommitMark(path: path + "-mark") else { return nil }
        if reportsLoss, let marked = mark.read(), marked > held {
            let lost = Int(marked - held)
            record(.lostAtOpen(count: lost))
            logger.error("the store's WAL was cut short while the engine was stopped: the logs of its last commits are lost and will not be sent (SPEC S7)", metadata: [
                "outbox.store": "\(path)",
                "outbox.lost": "\(lost)",
                "outbox.committed_seq": "\(marked)",
                "outbox.stored_seq": "\(held)",
            ])
        }
        mark.write(held)
        return mark
    }

    /// SPEC S2, after a configuration change: when the cap was lowered since the file was written, evicts down to it
    /// and rebuilds the file so that it shrinks (without auto_vacuum, freed pages stay in the file).
    private func enforceCap(_ disk: DiskBudget, ledger: StoreLedger,
                            record: (StoreLedger.Change) -> Void) throws(OutboxError) {
        let pageCount = Int(try db.pragma("page_count"))
        let used = try LogStore.usedBytes(db)
        let countOver = limits.maxLogCount.map { ledger.logCount > $0 } ?? false
        guard pageCount > disk.maxPages || used > disk.budgetBytes || countOver else { return }
        let eviction = StoreEviction(db: db, keys: keys, disk: disk, ledger: ledger, maxLogCount: limits.maxLogCount)
        let evicted = try db.transaction { () throws(OutboxError) -> [StoreEviction.Event] in
            try eviction.makeRoom(for: [], mandatoryBytes: 0, extraBytes: 0, overflowMayEvictCritical: true).evictions
        }
        StoreEviction.commit(evicted, reason: "cap lowered", logger: logger, record: record)
        if pageCount > disk.maxPages {
            try db.exec("VACUUM")
            try db.checkpoint(.truncate)
            try db.exec("PRAGMA max_page_count = \(disk.maxPages)")
        }
    }
}
