import CSQLite
import Logging

/// Opening the store file (SPEC S1, S7): the file's mode, SQLite's settings, the integrity check unless the last
/// session closed cleanly, migration; and a corrupt or unreadable file moved aside for a fresh one, at open or
/// mid-session (`replaceCorrupt`). A value of what opening needs (the path, the limits, the clock, the logger): the
/// store is built, or rebuilt after corruption, from the connection it returns, once `StoreOpening` has started it.
struct StoreOpener {
    let path: String
    let limits: StoreLimits
    let clock: any OutboxClock
    let logger: Logger

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
        /// SPEC K1: the keys of a sealed store; nil for a plain one.
        var keys: StoreKeys?
    }

    /// Opens the database; a corrupt or non-database file is moved aside and a fresh one created (S7).
    func openOrRecover() throws(OutboxError) -> Opened {
        do throws(OutboxError) {
            return try Self.openDatabase(path: path, limits: limits)
        } catch {
            guard error.isCorruption else { throw error }
            return try replaceCorrupt(cause: error)
        }
    }

    /// A corrupt file (its connection closed) moved aside, reported, and a fresh one opened in its place (S7).
    func replaceCorrupt(cause: OutboxError) throws(OutboxError) -> Opened {
        let moved = try Self.moveAside(path: path, clock: clock)
        Self.reportCorruption(path: path, movedTo: moved, cause: cause, logger: logger)
        var opened = try Self.openDatabase(path: path, limits: limits)
        opened.movedAside = moved
        return opened
    }

    /// SQLite's page cache per store, in KiB: a 256th of the cap, between 1 MiB and 4 MiB (SQLite's default is
    /// 2 000 KiB whatever the file). Delivery reads each row once, in order, so what a cache must hold is the
    /// b-trees' interior pages, whose number follows the store's size. Below a 256 MiB cap 1 MiB holds them all
    /// (an intake group commit that outgrows it writes pages to the WAL early); a 1 GiB cap gets 4 MiB. It follows
    /// the configuration, not the backlog: a process's memory does not grow with what it stores.
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
            if limits.exclusiveLock {
                // Before the first access to the WAL: SQLite then keeps the wal-index in the heap (no `-shm` file
                // is created or opened) and holds an exclusive lock on the database file for the connection's
                // life, so another connection gets SQLITE_BUSY, mapped below to `storeLocked`.
                let mode = try db.string("PRAGMA locking_mode = EXCLUSIVE")
                if mode?.lowercased() != "exclusive" {
                    throw .storage(code: SQLITE_ERROR, message: "cannot set \(path) to exclusive locking (got \(mode ?? "nothing"))")
                }
            }
            // Only effective on an empty file, and only before WAL mode is set.
            try db.exec("PRAGMA page_size = \(pageSize(for: limits.maxStorageSize))")
            // Reading the header happens here: a file that is not a database fails with SQLITE_NOTADB.
            let mode = try db.string("PRAGMA journal_mode = WAL")
            if mode?.lowercased() != "wal" {
                throw .storage(code: SQLITE_ERROR, message: "cannot switch \(path) to WAL mode (got \(mode ?? "nothing"))")
            }
            // NORMAL in WAL mode: a commit survives a killed process (the kernel has the write, T5); a power
            // loss may roll back the commits since the last WAL sync but never corrupts. FULL would sync on
            // every commit, a disk write per group commit for a guarantee that only a power loss needs.
            try db.exec("PRAGMA synchronous = NORMAL")
            // Debian builds SQLite with SECURE_DELETE, which overwrites every deleted row with zeros: for a
            // delivered log of a plain store that is work without a purpose, on the loop, for every log. When the
            // user opts out (T6), `deleteAllLogs` rebuilds the file, which scrubs the free pages anyway. A sealed
            // store (SPEC K1) zeroes what it deletes inside its pages (FAST: ON would also rewrite whole freed pages,
            // a fifth of the commit rate for ciphertext; sealing a plain store sets ON while it runs, LogStore+Keys).
            try db.exec("PRAGMA secure_delete = \(limits.key == nil ? "OFF" : "FAST")")
            // Before quick_check, which reads every page of the file through the cache.
            try db.exec("PRAGMA cache_size = -\(limits.pageCacheKiB ?? pageCacheKiB(for: limits.maxStorageSize))")
            let checked = try walLeft ? true : !closedCleanly(db, path: path)
            if checked { try quickCheck(db) }
            // SPEC K1: before the first write (the migration's), so that a wrong or missing key leaves the file as it was.
            let keys = try StoreKeyCheck.keys(db, key: limits.key, path: path)
            try LogSchema.migrator.migrate(db)
            // Marks the file as Outbox's (S7), so that it is told from another program's database by its header.
            if try db.pragma("application_id") != StorePathCheck.applicationID {
                try db.exec("PRAGMA application_id = \(StorePathCheck.applicationID)")
            }
            return Opened(db: db, checked: checked, keys: keys)
        } catch {
            db.close()
            // Another connection holds the file: in exclusive mode that is SQLite's own lock (no busy timeout is
            // set, so it is reported at once), and it means what the `.lock` file means.
            if case .storage(let code, _) = error, SQLite.primary(code) == SQLite.busy { throw .storeLocked(path: path) }
            throw error
        }
    }

    /// Whether the last session closed the file cleanly and nothing changed its length since: the marker
    /// `MetaKey.closedCleanly` holds the page count of that close, and the file is exactly that many pages. A file
    /// cut short or grown by something else, or left by a crash, fails this and gets `quick_check`.
    static func closedCleanly(_ db: Database, path: String) throws(OutboxError) -> Bool {
        guard try MetaTable.exists(db),
              let marker = try MetaTable(db: db).value(.closedCleanly),
              let pages = Int64(marker) else { return false }
        let pageSize = try db.pragma("page_size")
        return try db.pragma("page_count") == pages && FileSystem.size(path).map(Int64.init) == pages * pageSize
    }

    /// Records a clean close (`MetaKey.closedCleanly`, with the page count) just before the connection closes and
    /// SQLite checkpoints the WAL into the file: what `closedCleanly` reads at the next open. Best effort: without the
    /// marker the next open checks the file, as after a crash.
    static func markClosedCleanly(_ db: Database, logger: Logger) {
        guard db.isOpen, !db.isInTransaction else { return }
        do throws(OutboxError) {
            try db.transaction { () throws(OutboxError) in
                try MetaTable(db: db).set(.closedCleanly, String(try db.pragma("page_count")))
            }
        } catch {
            logger.debug("could not mark the store closed cleanly; the next open checks it", metadata: ["outbox.error": "\(error)"])
        }
    }

    /// `PRAGMA quick_check`: verifies every b-tree page's structure (not index contents), so a truncated or
    /// scribbled file is caught at open instead of at a random later query. It reads the whole file, which is why a
    /// cleanly closed file skips it.
    static func quickCheck(_ db: Database) throws(OutboxError) {
        let check = try db.prepare("PRAGMA quick_check(1)")
        guard try check.step() else { return }
        let verdict = check.string(at: 0)
        if verdict != "ok" {
            throw .storage(code: SQLITE_CORRUPT, message: "integrity check failed: \(verdict.prefix(200))")
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
}
