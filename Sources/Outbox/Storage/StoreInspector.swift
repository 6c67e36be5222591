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
    static func inspect(path: String, key: StoreKey? = nil)
        throws(OutboxError) -> (counts: StoreCounts, meta: [MetaKey: String], destinations: [String: DestinationReport]?) {
        let db = try openReadOnly(path: path)
        defer { db.close() }
        _ = try StoreKeyCheck.keys(db, key: key, path: path)
        let counts = try readCounts(db)
        return (counts, try MetaTable(db: db).all(), try readDestinations(db))
    }

    /// What the file holds, read through the tables; a store of an older schema version (one an older engine wrote,
    /// read here without migrating) through `LegacySchema`.
    static func readCounts(_ db: Database) throws(OutboxError) -> StoreCounts {
        try db.transaction(.deferred) { () throws(OutboxError) -> StoreCounts in
            var counts = StoreCounts()
            let logs = LogsTable(db: db, keys: nil)
            let total = try logs.count()
            let version = try db.userVersion
            var inFlightSQL = LegacySchema.countInFlight(version: version) ?? LogsTable.countInFlight
            // SPEC D18: with several destinations two may hold one log in flight; the total counts it once.
            if version >= 5, try db.int64("SELECT count(*) FROM destinations") ?? 0 > 0 { inFlightSQL = LogsTable.countInFlightOnce }
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

extension StoreInspector {
    /// SPEC D18: each destination's figures, by name, when the store has a list (nil for one destination named
    /// `default`, whose figures are the totals): logs it has still to send (`pending`, by the logs it has not settled
    /// nor holds in flight), in flight, its dead letters, what servers refused inside accepted requests, and why its
    /// sending is disabled.
    static func readDestinations(_ db: Database) throws(OutboxError) -> [String: DestinationReport]? {
        guard try db.userVersion >= 5 else { return nil }
        let table = DestinationsTable(db: db)
        return try db.transaction(.deferred) { () throws(OutboxError) -> [String: DestinationReport]? in
            let rows = try table.all()
            guard !rows.isEmpty else { return nil }
            let total = try LogsTable(db: db, keys: nil).count()
            let settled = try table.settled()
            var leased: [Int64: SeqStretches] = [:]
            let select = try db.cachedStatement("SELECT dest, priority, first, last FROM leases")
            defer { select.reset() }
            while try select.step() {
                leased[select.int64(at: 0), default: SeqStretches()].insert(select.int64(at: 2)...select.int64(at: 3),
                                                                             Priority(rawValue: select.int(at: 1)) ?? .normal)
            }
            var reports: [String: DestinationReport] = [:]
            for row in rows {
                func count(_ stretches: SeqStretches?) throws(OutboxError) -> Int {
                    guard let stretches else { return 0 }
                    var sum = 0
                    for priority in Priority.allCases {
                        for range in stretches.ranges(priority) { sum += try table.count(priority, in: range) }
                    }
                    return sum
                }
                let inFlight = try count(leased[row.id])
                let letters = Int(try db.int64("SELECT count(*) FROM dead_letters WHERE dest = ?", [.integer(row.id)]) ?? 0)
                reports[row.name] = DestinationReport(pending: max(0, total - (try count(settled[row.id])) - inFlight), inFlight: inFlight,
                                                      deadLetters: letters, serverRejected: row.serverRejected,
                                                      disabledReason: row.disabledReason, wire: row.wire)
            }
            return reports
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
