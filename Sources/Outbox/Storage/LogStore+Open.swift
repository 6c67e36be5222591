import CSQLite
import Logging

/// Configuring and recovering the opened store (SPEC S1, S6, S7, C9); opening the file is `StoreOpener`'s.
extension LogStore {
    /// Records a clean close (`MetaKey.closedCleanly`, with the page count) just before the connection closes and
    /// SQLite checkpoints the WAL into the file. Best effort: without the marker the next open checks the file,
    /// as after a crash.
    func markClosedCleanly() {
        guard db.isOpen, !db.isInTransaction else { return }
        do throws(OutboxError) {
            try db.transaction { () throws(OutboxError) in
                try metaTable.set(.closedCleanly, String(try db.pragma("page_count")))
            }
        } catch {
            logger.debug("could not mark the store closed cleanly; the next open checks it", metadata: ["outbox.error": "\(error)"])
        }
    }

    /// Per-connection settings, then the start-up duties: in-flight rows back to pending (S6, C9), the cap
    /// re-applied (S2, after a configuration change), expiry (S4).
    func configureOpenedDatabase() throws(OutboxError) {
        let pageSize = Int(try db.pragma("page_size"))
        guard pageSize > 0 else {
            throw .storage(code: SQLITE_CORRUPT, message: "page size of \(path) reads as 0")
        }
        disk.opened(pageSize: pageSize)
        // max_page_count is not stored in the file: it must be set on every open. SQLite refuses to go below
        // the current page count, which `enforceCapAtOpen` then fixes.
        try db.exec("PRAGMA max_page_count = \(disk.maxPages)")
        try db.exec("PRAGMA journal_size_limit = \(disk.walSizeLimit)")
        holdDiskReserve(leaving: 2 * disk.diskReserveBytes)
        let checkpointer = WALCheckpointer(
            walPath: db.walPath, checkpointPages: disk.walAutocheckpointPages,
            writeBackPages: WALCheckpointer.writeBackPages(checkpointPages: disk.walAutocheckpointPages, pageSize: pageSize),
            disk: diskWatch)
        checkpointer.keepsDescriptor = !limits.exclusiveLock
        db.setWALCheckpointer(checkpointer)
        // A store rebuilt by VACUUM (opt-out, cap lowered) needs its temporary copy somewhere; memory keeps
        // it off the disk that may be full.
        try db.exec("PRAGMA temp_store = MEMORY")

        let flagged = try metaTable.value(.retryTimes) != nil
        try db.transaction { () throws(OutboxError) in
            // C9, S6: whatever was in flight when the last process stopped is sent again; and the retry
            // state (R3) lived in that process, so every row is claimable at once. next_attempt_ms values are
            // in the old process's clock anyway. Only a store flagged by a release that set one holds any.
            try leasesTable.deleteAll()
            // From the first write on, the file is no longer as the clean close left it.
            try metaTable.set(.closedCleanly, nil)
            if flagged {
                try logsTable.clearRetryTimes()
                try metaTable.set(.retryTimes, nil)
            }
        }
        disk.baseBytes = (Int(try db.int64("SELECT count(*) FROM sqlite_schema WHERE rootpage > 0") ?? 0) + 1) * pageSize
        checkCommitMark(held: try loadCounters())
        try enforceCapAtOpen()
        _ = try expireOnce(nowMs: clock.wallMs())
        try pruneContexts()
    }

    /// Returns the highest seq the file holds or ever held.
    func loadCounters() throws(OutboxError) -> Int64 {
        let counts = try logsTable.openingCounts(boot: boot)
        // Numbering goes on above every seq this file ever held, delivered ones included, so that the commit mark
        // (CommitMark) and the database count the same way across sessions.
        let high = Int64(try metaTable.value(.seqHigh) ?? "") ?? 0
        // The stored batch id is a reservation (`batchIDBlock`): numbering goes on above it.
        let reservation = Int64(try metaTable.value(.lastBatch) ?? "") ?? 0
        let held = max(counts.highestSeq, high)
        record(.opened(logCount: counts.count, highestSeq: held, batchReservation: reservation, bound: counts.bound))
        return held
    }

    /// When the cap was lowered since the file was written, evicts down to it and rebuilds the file so that it
    /// shrinks (without auto_vacuum, freed pages stay in the file).
    func enforceCapAtOpen() throws(OutboxError) {
        let pageCount = Int(try db.pragma("page_count"))
        let used = try Self.usedBytes(db)
        let countOver = limits.maxLogCount.map { ledger.logCount > $0 } ?? false
        guard pageCount > disk.maxPages || used > disk.budgetBytes || countOver else { return }
        let evicted = try db.transaction { () throws(OutboxError) -> [EvictionEvent] in
            try makeRoom(for: [], mandatoryBytes: 0, extraBytes: 0, overflowMayEvictCritical: true).evictions
        }
        commitEvictions(evicted, reason: "cap lowered")
        if pageCount > disk.maxPages {
            try db.exec("VACUUM")
            try db.checkpoint(.truncate)
            try db.exec("PRAGMA max_page_count = \(disk.maxPages)")
        }
    }

    /// Device contexts no log refers to any more, except the latest (which new logs will use).
    func pruneContexts() throws(OutboxError) {
        try db.transaction { () throws(OutboxError) in try contextsTable.prune() }
    }

    /// Mid-session corruption (S7): the same treatment as at open, keeping the lock.
    func recoverFromCorruption(cause: OutboxError) throws(OutboxError) {
        db.close()
        let opened = try StoreOpener(path: path, limits: limits, clock: clock, logger: logger).replaceCorrupt(cause: cause)
        db = opened.db
        checkedAtOpen = opened.checked
        keys = opened.keys
        rotation = nil
        recoveredFromCorruption = opened.movedAside
        // The engine may still hold seqs and batch ids of the lost file: the ledger's numbering continues above them
        // (`.opened`), so a late complete(seqs:) or complete(batchID:) cannot touch a row of the fresh file. The mark
        // stays at what the fresh file holds (`checkCommitMark`): raised to the lost file's seqs, it would report the
        // loss again at the next open, though the move aside has reported it already.
        try configureOpenedDatabase()
        try sealIfKeyed()
    }

    /// SPEC K1: a plain store opened with a key is sealed now, to the end (a fresh one has only its meta to seal).
    func sealIfKeyed() throws(OutboxError) {
        // A plain store whose sealing a kill cut short still holds plaintext: freed pages are zeroed until it ends.
        if case .plain? = keys?.previous { try db.exec("PRAGMA secure_delete = ON") }
        guard let key = limits.key, keys == nil else { return }
        try seal(with: key)
    }
}

/// The commit mark (SPEC S7, see `CommitMark`): how far the appends went, checked at open against the database.
extension LogStore {
    var commitMarkPath: String { path + "-mark" }

    /// At open, with `held` the highest seq the file holds or ever held (`loadCounters`): when the mark says appends committed seqs the database does not hold, their
    /// commits were cut from the WAL while the engine was stopped (or lost with the power): reports them once,
    /// then brings the mark in line, so the next open reports nothing. A store just moved aside (S7) has reported
    /// its loss already and starts its mark afresh, as do a store file created now and a missing or garbled mark.
    func checkCommitMark(held: Int64) {
        if commitMark == nil { commitMark = CommitMark(path: commitMarkPath) }
        guard let commitMark else { return }
        if recoveredFromCorruption == nil, !createdAtOpen, let marked = commitMark.read(), marked > held {
            let lost = Int(marked - held)
            record(.lostAtOpen(count: lost))
            logger.error("the store's WAL was cut short while the engine was stopped: the logs of its last commits are lost and will not be sent (SPEC S7)", metadata: [
                "outbox.store": "\(path)",
                "outbox.lost": "\(lost)",
                "outbox.committed_seq": "\(marked)",
                "outbox.stored_seq": "\(held)",
            ])
        }
        commitMark.write(held)
    }
}
