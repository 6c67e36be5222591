import CSQLite
import Glibc

/// Reading a store file without taking it over (SPEC X4, R2): read-only, without the lock, recovery, migration or
/// expiry, so that `outbox status` works while an engine runs on the file (WAL readers do not block the writer).
enum StoreInspector {
    /// The store at `path`, read-only; refused when it is missing, not a store, or of a newer schema (SPEC S7).
    /// The caller closes it.
    static func openReadOnly(path: String) throws(OutboxError) -> Database {
        guard FileSystem.exists(path) else {
            throw .io(path: path, message: "no store at this path (check --store)")
        }
        _ = try StorePathCheck.classify(path, reading: true)
        let db = try Database(path: openPath(path), flags: [.readOnly, .noMutex, .uri])
        do throws(OutboxError) {
            // A writer's checkpoint can briefly hold the WAL index; wait for it rather than fail.
            sqlite3_busy_timeout(db.handle, 2000)
            let version = try db.userVersion
            if version > LogStore.schemaVersion {
                throw .storeTooNew(version: version, supported: LogStore.schemaVersion)
            }
            if version == 0 { throw .io(path: path, message: "not an Outbox store (no schema)") }
            return db
        } catch {
            db.close()
            throw error
        }
    }

    /// What SQLite opens to read the store at `path`. A WAL reader creates or maps the `-shm` index beside the file;
    /// in a directory it cannot write (a read-only file system, a backup's mount) it could not, so there the file is
    /// opened `immutable` — exact only when no WAL holds committed pages, which is so when there is none (an engine
    /// that closed checkpoints and removes it). A WAL left there is read through the index as usual (SQLite reads an
    /// existing `-shm` read-only).
    static func openPath(_ path: String) -> String {
        let uri = "file:" + StorePathCheck.uriEscaped(path)
        guard access(FileSystem.directory(of: path), W_OK) != 0 else { return uri }
        var wal = stat()
        if stat(path + "-wal", &wal) == 0 && wal.st_size > 0 { return uri }
        return uri + "?immutable=1"
    }

    /// Opens the store at `path` read-only — without its lock, without recovery, migration or expiry — and
    /// reads its counts and meta, for `outbox status` while an engine runs (SPEC X4).
    /// SPEC K1: a sealed store needs its key here too (`storeKeyInvalid` without it, or with another).
    static func inspect(path: String, key: StoreKey? = nil) throws(OutboxError) -> (counts: StoreCounts, meta: [MetaKey: String]) {
        let db = try openReadOnly(path: path)
        defer { db.close() }
        _ = try StoreKeyCheck.keys(db, key: key, path: path)
        let counts = try readCounts(db)
        return (counts, try MetaTable(db: db).all())
    }

    /// What the file holds, read through the tables; a store of an older schema version (one an older engine wrote,
    /// read here without migrating) through `LegacySchema`.
    static func readCounts(_ db: Database) throws(OutboxError) -> StoreCounts {
        try db.transaction(.deferred) { () throws(OutboxError) -> StoreCounts in
            var counts = StoreCounts()
            let logs = LogsTable(db: db, keys: nil)
            let total = try logs.count()
            let inFlightSQL = LegacySchema.countInFlight(version: try db.userVersion) ?? LogsTable.countInFlight
            let split = try logs.splitByState(total: total, inFlightSQL: inFlightSQL)
            counts.inFlight = split.inFlight
            counts.pendingCritical = split.pendingCritical
            counts.pendingNormal = split.pendingNormal
            counts.bytes = try LogStore.usedBytes(db)
            counts.oldestWallMs = try logs.oldestWallMs()
            counts.deadLetters = try DeadLettersTable(db: db, keys: nil).count()
            return counts
        }
    }
}

/// What reading a store of an older schema version needs (SPEC X4: `inspect` reads without migrating, see `LogSchema`
/// for the versions): the statements whose tables changed since.
enum LegacySchema {
    /// In-flight logs and how many of them are critical, as `LogsTable.countInFlight`, for a file of `version`: leases
    /// were rows of `in_flight` in version 2 and a column of `logs` in version 1. Nil for the current layout (3 on).
    static func countInFlight(version: Int) -> String? {
        switch version {
        case 2: "SELECT count(*), coalesce(sum(logs.priority = 1), 0) FROM in_flight JOIN logs ON logs.seq = in_flight.seq"
        case ..<2: "SELECT count(*), coalesce(sum(priority = 1), 0) FROM logs WHERE batch IS NOT NULL"
        default: nil
        }
    }
}
