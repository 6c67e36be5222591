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
/// Leases (C9) are stretches of seqs, `leases(batch, priority, first, last)`, since version 3 (see `LeaseStretch`):
/// one row per batch and priority, where version 2's `in_flight(seq, batch)` took one row per log, and version 1
/// UPDATEd each claimed log (SQLite rewrites a whole record on UPDATE): each step removed the costliest write of
/// delivery at the time. `logs.batch` is unused since version 2.
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
        Migration(version: 3, name: "leases as stretches of seqs") { (db: Database) throws(OutboxError) in
            // Each version-2 lease becomes a stretch of one seq: the same leases, read the new way.
            try db.exec("""
                CREATE TABLE leases (
                    batch INTEGER NOT NULL,
                    priority INTEGER NOT NULL,
                    first INTEGER NOT NULL,
                    last INTEGER NOT NULL,
                    PRIMARY KEY (batch, priority, first)
                ) WITHOUT ROWID;
                INSERT INTO leases (batch, priority, first, last)
                    SELECT in_flight.batch, logs.priority, in_flight.seq, in_flight.seq
                    FROM in_flight JOIN logs ON logs.seq = in_flight.seq;
                DROP TABLE in_flight;
                """)
        },
        Migration(version: 4, name: "retry times flagged in meta") { (db: Database) throws(OutboxError) in
            // From this version on, the open clears retry times (C9) only when `LogStore.retryTimesKey` says a
            // release set some. An older store may hold them without the flag: flagged here, its first open
            // clears them.
            try db.execute("INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                           [.text(LogStore.retryTimesKey)])
        },
    ])

    static var version: Int { migrator.latestVersion }

    static let insertLog = """
        INSERT INTO logs (seq, priority, wall_ms, mono_ns, boot, context, id, payload)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Columns read into a `StoredLog`, in `LogStore.readLog` order.
    static let logColumns = "seq, priority, wall_ms, mono_ns, boot, context, id, payload"

    /// Whether the log `logs.seq` (of `priority`) lies in one of that priority's lease stretches.
    private static func leased(_ priority: Priority) -> String {
        """
        EXISTS (SELECT 1 FROM leases WHERE leases.priority = \(priority.rawValue)
                AND logs.seq BETWEEN leases.first AND leases.last)
        """
    }

    // The priority is a literal, not a parameter: only then can the planner prove that `logs_critical`
    // applies (a partial index is used when the WHERE clause implies the index's own).

    /// The claim's scan: every log of a priority from a seq on, in seq order. Which of them are claimable (not
    /// leased, due) the claim decides row by row, since it must know where it stepped over one (`LeaseStretch`).
    /// `next_attempt_ms` follows the `logColumns`.
    /// Indexed by `Priority.rawValue`: built once, since the claim looks its statement up by this text for every batch.
    static let claimScan = Priority.allCases.sorted().map { priority in
        """
        SELECT \(logColumns), next_attempt_ms FROM logs
        WHERE priority = \(priority.rawValue) AND seq >= ?1
        ORDER BY seq
        """
    }

    /// The logs of one lease stretch of a priority, `?1` through `?2`: deleted when delivered, given a retry time
    /// (`?3`) when released. Indexed by `Priority.rawValue`. The priority is a literal here too, for another
    /// reason: with `priority = ?`, SQLite's planner matches the partial index `logs_critical` against the value
    /// bound at the time, so each new binding of that parameter expired the statement and SQLite compiled it again
    /// at its next step (`SQLITE_STMTSTATUS_REPREPARE`) — a full compile once per delivered batch.
    static let deleteStretch = Priority.allCases.sorted().map {
        "DELETE FROM logs WHERE priority = \($0.rawValue) AND seq BETWEEN ?1 AND ?2"
    }

    static let releaseStretch = Priority.allCases.sorted().map {
        "UPDATE logs SET next_attempt_ms = ?3 WHERE priority = \($0.rawValue) AND seq BETWEEN ?1 AND ?2"
    }

    static func evictablePending(_ priority: Priority) -> String {
        """
        SELECT seq, length(payload) FROM logs
        WHERE priority = \(priority.rawValue) AND NOT \(leased(priority)) ORDER BY seq
        """
    }

    // The in-flight rows are few (at most a few batches): read through the leases.
    static func evictableInFlight(_ priority: Priority) -> String {
        """
        SELECT logs.seq, length(logs.payload) FROM leases
        JOIN logs ON logs.seq BETWEEN leases.first AND leases.last AND logs.priority = leases.priority
        WHERE leases.priority = \(priority.rawValue) ORDER BY logs.seq
        """
    }

    static func deletePendingThrough(_ priority: Priority) -> String {
        "DELETE FROM logs WHERE priority = \(priority.rawValue) AND seq <= ? AND NOT \(leased(priority))"
    }

    /// In-flight logs, and how many of them are critical.
    static let countInFlight = """
        SELECT count(*), coalesce(sum(logs.priority = 1), 0) FROM leases
        JOIN logs ON logs.seq BETWEEN leases.first AND leases.last AND logs.priority = leases.priority
        """
}
