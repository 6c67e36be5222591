/// The store's schema, its migrations and the SQL of the hot paths.
///
/// `logs` column order matters: SQLite stores a row's columns in declaration order and spills the tail of a
/// large row to overflow pages, so the small columns that the claim and eviction queries filter on (`priority`,
/// `batch`, `next_attempt_ms`) come first and `payload` last — filtering never reads an overflow page.
///
/// Indexes are partial so that the common insert (a pending normal log) touches none of them: `logs_critical`
/// holds critical rows only (C4: claimed first). Pending normal rows are found in rowid (= `seq`) order, which is
/// the order C4 asks for.
///
/// Leases (C9) live in their own small table, `in_flight(seq, batch)`, since version 2. Marking a batch used to
/// UPDATE each claimed row, and SQLite rewrites a whole record on UPDATE: with ~500-byte rows that made the claim
/// the most expensive step of delivery (BENCHMARKS.md). `logs.batch` is unused since then.
enum LogSchema {
    static let migrator = Migrator([
        Migration(version: 1, name: "initial schema") { (db: Database) throws(OutboxError) in
            try db.exec("""
                CREATE TABLE logs (
                    seq INTEGER PRIMARY KEY,
                    priority INTEGER NOT NULL,
                    batch INTEGER,
                    next_attempt_ms INTEGER NOT NULL DEFAULT 0,
                    wall_ms INTEGER NOT NULL,
                    mono_ns INTEGER NOT NULL,
                    boot INTEGER NOT NULL,
                    context INTEGER NOT NULL,
                    id BLOB NOT NULL,
                    payload BLOB NOT NULL
                );
                CREATE INDEX logs_critical ON logs(seq) WHERE priority = 1;
                CREATE INDEX logs_in_flight ON logs(batch) WHERE batch IS NOT NULL;
                CREATE TABLE dead_letters (
                    seq INTEGER PRIMARY KEY,
                    log_seq INTEGER NOT NULL,
                    priority INTEGER NOT NULL,
                    wall_ms INTEGER NOT NULL,
                    status INTEGER NOT NULL,
                    at_ms INTEGER NOT NULL,
                    reason TEXT NOT NULL,
                    id BLOB NOT NULL,
                    payload BLOB NOT NULL
                );
                CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE event_names (name TEXT PRIMARY KEY) WITHOUT ROWID;
                CREATE TABLE contexts (id INTEGER PRIMARY KEY, json BLOB NOT NULL);
                """)
        },
        Migration(version: 2, name: "leases in their own table") { (db: Database) throws(OutboxError) in
            try db.exec("""
                CREATE TABLE in_flight (seq INTEGER PRIMARY KEY, batch INTEGER NOT NULL);
                CREATE INDEX in_flight_batch ON in_flight(batch);
                INSERT INTO in_flight (seq, batch) SELECT seq, batch FROM logs WHERE batch IS NOT NULL;
                UPDATE logs SET batch = NULL WHERE batch IS NOT NULL;
                DROP INDEX logs_in_flight;
                """)
        },
    ])

    static var version: Int { migrator.latestVersion }

    /// Leases whose rows were deleted some other way (evicted, expired, dead-lettered) are dropped with this.
    static let forgetDeletedLeases = "DELETE FROM in_flight WHERE seq NOT IN (SELECT seq FROM logs)"

    static let insertLog = """
        INSERT INTO logs (seq, priority, wall_ms, mono_ns, boot, context, id, payload)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Columns read into a `StoredLog`, in `LogStore.readLog` order.
    static let logColumns = "seq, priority, wall_ms, mono_ns, boot, context, id, payload"

    // The priority is a literal, not a parameter: only then can the planner prove that `logs_critical`
    // applies (a partial index is used when the WHERE clause implies the index's own).
    static func claimable(_ priority: Priority) -> String {
        """
        SELECT \(logColumns) FROM logs
        WHERE priority = \(priority.rawValue) AND seq >= ?3 AND next_attempt_ms <= ?1
          AND seq NOT IN (SELECT seq FROM in_flight)
        ORDER BY seq LIMIT ?2
        """
    }

    static func evictablePending(_ priority: Priority) -> String {
        """
        SELECT seq, length(payload) FROM logs
        WHERE priority = \(priority.rawValue) AND seq NOT IN (SELECT seq FROM in_flight) ORDER BY seq
        """
    }

    // The in-flight rows are few (at most a few batches): read through the lease table.
    static func evictableInFlight(_ priority: Priority) -> String {
        """
        SELECT logs.seq, length(logs.payload) FROM in_flight JOIN logs ON logs.seq = in_flight.seq
        WHERE logs.priority = \(priority.rawValue) ORDER BY logs.seq
        """
    }

    static func deletePendingThrough(_ priority: Priority) -> String {
        "DELETE FROM logs WHERE priority = \(priority.rawValue) AND seq <= ? AND seq NOT IN (SELECT seq FROM in_flight)"
    }
}
