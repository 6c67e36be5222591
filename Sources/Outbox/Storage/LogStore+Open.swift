import CSQLite
import Logging

/// Opening, configuring and recovering the store file (SPEC S1, S6, S7, C9).
extension LogStore {
    /// Page size for a new database. 4 KiB pages are the fastest here, but the empty schema alone takes
    /// 8 pages (one per table and index, plus the schema page): 32 KiB, more than the smallest allowed cap
    /// (24 KiB). Small caps therefore get 1 KiB pages. An existing file keeps the page size it was created
    /// with (SQLite cannot change it in WAL mode).
    static func pageSize(for maxStorageSize: Int) -> Int {
        maxStorageSize >= 512 * 1024 ? 4096 : 1024
    }

    struct Opened {
        var db: Database
        var movedAside: String?
        /// Whether the open ran `quick_check` (false: the file was closed cleanly and is as that close left it).
        var checked = true
    }

    /// Written by a clean `close()` with the file's page count, removed by the next open's first transaction.
    /// While it is there and the file is as that close left it, the open skips `quick_check`.
    static let closedCleanlyKey = "store.closed_cleanly"

    /// Opens the database; a corrupt or non-database file is moved aside and a fresh one created (S7).
    static func openOrRecover(path: String, limits: StoreLimits, clock: any OutboxClock,
                              logger: Logger) throws(OutboxError) -> Opened {
        do throws(OutboxError) {
            return try openDatabase(path: path, limits: limits)
        } catch {
            guard error.isCorruption else { throw error }
            let moved = try moveAside(path: path, clock: clock)
            reportCorruption(path: path, movedTo: moved, cause: error, logger: logger)
            var opened = try openDatabase(path: path, limits: limits)
            opened.movedAside = moved
            return opened
        }
    }

    /// SQLite's page cache per store, in KiB: a 256th of the cap, between 1 MiB and 4 MiB (SQLite's default is
    /// 2 000 KiB whatever the file). Delivery reads each row once, in order, so what a cache must hold is the
    /// b-trees' interior pages, whose number follows the store's size: ~1.2 MB of them for a million logs. Below
    /// a 256 MiB cap 1 MiB holds them all (an intake group commit that outgrows it writes pages to the WAL
    /// early); a 1 GiB cap gets 4 MiB. It follows the configuration, not the backlog: a process's memory does
    /// not grow with what it stores (BENCHMARKS.md, memory).
    static func pageCacheKiB(for maxStorageSize: Int) -> Int {
        min(4096, max(1024, maxStorageSize / 256 / 1024))
    }

    /// Opens, checks and migrates. Throws a corruption error (`isCorruption`) when the file is unusable.
    static func openDatabase(path: String, limits: StoreLimits) throws(OutboxError) -> Opened {
        // A WAL left beside the file means the last connection did not close cleanly (or another one is open).
        let walLeft = (FileSystem.size(path + "-wal") ?? 0) > 0
        try FileSystem.createIfMissing(path, mode: 0o600)
        // A file from elsewhere (a copy, an older tool) may be readable by others: logs are user data (S1).
        for file in [path, path + "-wal", path + "-shm"] {
            if let mode = FileSystem.mode(file), mode & 0o077 != 0 { FileSystem.chmod(file, 0o600) }
        }
        let db = try Database(path: path)
        do throws(OutboxError) {
            // Only effective on an empty file, and only before WAL mode is set.
            try db.exec("PRAGMA page_size = \(pageSize(for: limits.maxStorageSize))")
            // Reading the header happens here: a file that is not a database fails with SQLITE_NOTADB.
            let mode = try db.string("PRAGMA journal_mode = WAL")
            if mode?.lowercased() != "wal" {
                throw .storage(code: SQLITE_ERROR, message: "cannot switch \(path) to WAL mode (got \(mode ?? "nothing"))")
            }
            // NORMAL in WAL mode: a commit survives a killed process (the kernel has the write, T5); a power
            // loss may roll back the commits since the last WAL sync but never corrupts. FULL would sync on
            // every commit (DESIGN: ~56k vs ~6k commits/s).
            try db.exec("PRAGMA synchronous = NORMAL")
            // Debian builds SQLite with SECURE_DELETE, which overwrites every deleted row with zeros: for a
            // delivered log that is work without a purpose (~2 300 instructions per log, BENCHMARKS.md). When the
            // user opts out (T6), `deleteAllLogs` rebuilds the file, which scrubs the free pages anyway.
            try db.exec("PRAGMA secure_delete = OFF")
            // Before quick_check, which reads every page of the file through the cache.
            try db.exec("PRAGMA cache_size = -\(pageCacheKiB(for: limits.maxStorageSize))")
            let checked = try walLeft ? true : !closedCleanly(db, path: path)
            if checked { try quickCheck(db) }
            try LogSchema.migrator.migrate(db)
            return Opened(db: db, checked: checked)
        } catch {
            db.close()
            throw error
        }
    }

    /// Whether the last session closed the file cleanly and nothing changed its length since: the marker
    /// `closedCleanlyKey` holds the page count of that close, and the file is exactly that many pages. A file
    /// cut short or grown by something else, or left by a crash, fails this and gets `quick_check`.
    static func closedCleanly(_ db: Database, path: String) throws(OutboxError) -> Bool {
        guard try db.int64("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'") == 1,
              let marker = try db.string("SELECT value FROM meta WHERE key = ?", [.text(closedCleanlyKey)]),
              let pages = Int64(marker) else { return false }
        let pageSize = try db.pragma("page_size")
        return try db.pragma("page_count") == pages && FileSystem.size(path).map(Int64.init) == pages * pageSize
    }

    /// `PRAGMA quick_check`: verifies every b-tree page's structure (not index contents), so a truncated or
    /// scribbled file is caught at open instead of at a random later query. It reads the whole file; opening
    /// a full 10 MiB store, this check included, takes ~25 ms here.
    static func quickCheck(_ db: Database) throws(OutboxError) {
        let check = try db.prepare("PRAGMA quick_check(1)")
        guard try check.step() else { return }
        let verdict = check.string(at: 0)
        if verdict != "ok" {
            throw .storage(code: SQLITE_CORRUPT, message: "integrity check failed: \(verdict.prefix(200))")
        }
    }

    /// Records a clean close (`closedCleanlyKey`, with the page count) just before the connection closes and
    /// SQLite checkpoints the WAL into the file. Best effort: without the marker the next open checks the file,
    /// as after a crash.
    func markClosedCleanly() {
        guard db.isOpen, !db.isInTransaction else { return }
        do throws(OutboxError) {
            try db.transaction { () throws(OutboxError) in
                try writeMeta(Self.closedCleanlyKey, String(try db.pragma("page_count")))
            }
        } catch {
            logger.debug("could not mark the store closed cleanly; the next open checks it", metadata: ["outbox.error": "\(error)"])
        }
    }

    /// Moves `path` and its -wal/-shm to `<path>.corrupt-<unix-seconds>` (with `-wal`/`-shm` suffixes).
    /// Returns the new path of the main file.
    static func moveAside(path: String, clock: any OutboxClock) throws(OutboxError) -> String {
        let stamp = clock.wallMs() / 1000
        var target = "\(path).corrupt-\(stamp)"
        var attempt = 1
        // Two corruptions within one second must not overwrite the first evidence.
        while FileSystem.exists(target) {
            target = "\(path).corrupt-\(stamp)-\(attempt)"
            attempt += 1
        }
        try FileSystem.moveIfPresent(path, to: target)
        try FileSystem.moveIfPresent(path + "-wal", to: target + "-wal")
        try FileSystem.moveIfPresent(path + "-shm", to: target + "-shm")
        return target
    }

    static func reportCorruption(path: String, movedTo: String, cause: OutboxError, logger: Logger) {
        logger.error("the store was corrupt or unreadable: moved it aside and started a fresh one; its logs are not sent (SPEC S7)", metadata: [
            "outbox.store": "\(path)",
            "outbox.moved_to": "\(movedTo)",
            "outbox.cause": "\(cause)",
        ])
    }

    /// Per-connection settings, then the start-up duties: in-flight rows back to pending (S6, C9), the cap
    /// re-applied (S2, after a configuration change), expiry (S4).
    func configureOpenedDatabase() throws(OutboxError) {
        pageSize = Int(try db.pragma("page_size"))
        guard pageSize > 0 else {
            throw .storage(code: SQLITE_CORRUPT, message: "page size of \(path) reads as 0")
        }
        maxPages = max(1, limits.maxStorageSize / pageSize)
        configuredMaxPages = maxPages
        diskCapped = false
        // max_page_count is not stored in the file: it must be set on every open. SQLite refuses to go below
        // the current page count, which `enforceCapAtOpen` then fixes.
        try db.exec("PRAGMA max_page_count = \(maxPages)")
        try db.exec("PRAGMA journal_size_limit = \(walSizeLimit)")
        holdDiskReserve(leaving: 2 * diskReserveBytes)
        db.setWALCheckpointer(WALCheckpointer(
            walPath: db.walPath, checkpointPages: walAutocheckpointPages,
            writeBackPages: WALCheckpointer.writeBackPages(checkpointPages: walAutocheckpointPages, pageSize: pageSize),
            disk: diskWatch))
        // A store rebuilt by VACUUM (opt-out, cap lowered) needs its temporary copy somewhere; memory keeps
        // it off the disk that may be full.
        try db.exec("PRAGMA temp_store = MEMORY")

        let flagged = try db.string("SELECT value FROM meta WHERE key = ?", [.text(Self.retryTimesKey)]) != nil
        try db.transaction { () throws(OutboxError) in
            // C9, S6: whatever was in flight when the last process stopped is sent again; and the retry
            // state (R3) lived in that process, so every row is claimable at once. next_attempt_ms values are
            // in the old process's clock anyway. Only a store flagged by a release that set one holds any.
            try db.execute("DELETE FROM leases")
            // From the first write on, the file is no longer as the clean close left it.
            try writeMeta(Self.closedCleanlyKey, nil)
            if flagged {
                try db.execute("UPDATE logs SET next_attempt_ms = 0 WHERE next_attempt_ms <> 0")
                try writeMeta(Self.retryTimesKey, nil)
            }
        }
        retryTimesFlagged = false
        leases.removeAll()
        claimFloor = [0, 0]
        baseBytes = (Int(try db.int64("SELECT count(*) FROM sqlite_schema WHERE rootpage > 0") ?? 0) + 1) * pageSize
        try loadCounters()
        try enforceCapAtOpen()
        _ = try expireOnce(nowMs: clock.wallMs())
        try pruneContexts()
    }

    func loadCounters() throws(OutboxError) {
        let scan = try db.prepare("""
            SELECT count(*), max(seq), min(CASE WHEN boot != ?1 THEN wall_ms END), min(CASE WHEN boot = ?1 THEN mono_ns END)
            FROM logs
            """)
        try scan.bind(boot, at: 1)
        if try scan.step() {
            logCount = scan.int(at: 0)
            nextSeq = (scan.optionalInt64(at: 1) ?? 0) + 1
            expiryBound = ExpiryBound(otherBootWallMs: scan.optionalInt64(at: 2), thisBootMonoNs: scan.optionalInt64(at: 3))
        }
        pending = nil
        // The stored value is a reservation (`batchIDBlock`): numbering goes on above it.
        lastBatchID = Int64(try db.string("SELECT value FROM meta WHERE key = ?", [.text(Self.lastBatchKey)]) ?? "") ?? 0
        reservedBatchID = lastBatchID
    }

    /// When the cap was lowered since the file was written, evicts down to it and rebuilds the file so that it
    /// shrinks (without auto_vacuum, freed pages stay in the file).
    func enforceCapAtOpen() throws(OutboxError) {
        let pageCount = Int(try db.pragma("page_count"))
        let used = try Self.usedBytes(db)
        let countOver = limits.maxLogCount.map { logCount > $0 } ?? false
        guard pageCount > maxPages || used > budgetBytes || countOver else { return }
        let evicted = try db.transaction { () throws(OutboxError) -> [EvictionEvent] in
            try makeRoom(for: [], mandatoryBytes: 0, extraBytes: 0, overflowMayEvictCritical: true).evictions
        }
        commitEvictions(evicted, reason: "cap lowered")
        if pageCount > maxPages {
            try db.exec("VACUUM")
            try db.checkpoint(.truncate)
            try db.exec("PRAGMA max_page_count = \(maxPages)")
        }
    }

    /// Device contexts no log refers to any more, except the latest (which new logs will use).
    func pruneContexts() throws(OutboxError) {
        try db.transaction { () throws(OutboxError) in
            try db.execute("""
                DELETE FROM contexts WHERE id <> (SELECT max(id) FROM contexts)
                AND id NOT IN (SELECT context FROM logs)
                """)
        }
    }

    /// Mid-session corruption (S7): the same treatment as at open, keeping the lock.
    func recoverFromCorruption(cause: OutboxError) throws(OutboxError) {
        // The engine may still hold seqs and batch ids of the lost file: numbering continues above them, so a
        // late complete(seqs:) or complete(batchID:) cannot touch a row of the fresh file.
        let previousSeq = nextSeq
        let previousBatch = lastBatchID
        db.close()
        let moved = try Self.moveAside(path: path, clock: clock)
        Self.reportCorruption(path: path, movedTo: moved, cause: cause, logger: logger)
        let opened = try Self.openDatabase(path: path, limits: limits)
        db = opened.db
        checkedAtOpen = opened.checked
        recoveredFromCorruption = moved
        try configureOpenedDatabase()
        nextSeq = max(nextSeq, previousSeq)
        lastBatchID = max(lastBatchID, previousBatch)
    }
}
