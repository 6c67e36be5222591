/// The store's schema and its migrations; the statements on each table are the table types' (`Tables/`).
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
            // From this version on, the open clears retry times (C9) only when `MetaKey.retryTimes` says a
            // release set some. An older store may hold them without the flag: flagged here, its first open
            // clears them.
            // Its own statement, not `MetaTable.set`'s: that one is cached, and a statement prepared before the
            // schema is complete is compiled again at its next use.
            try db.execute("INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                           [.text(MetaKey.retryTimes.rawValue)])
        },
        Migration(version: 5, name: "several destinations") { (db: Database) throws(OutboxError) in
            // SPEC D15–D18. A store of one destination keeps these tables empty and its progress as before (a
            // delivered log is deleted at once); with several, each destination's settled logs are stretches of seqs
            // per priority, as leases are, so that a store pays per delivered batch, not per log. `dest` 0 is the
            // destination named `default`: the dead letters and leases of a store written with one destination are
            // its.
            try db.exec("""
                CREATE TABLE destinations (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    wire TEXT,
                    disabled_reason TEXT,
                    server_rejected INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE settled (
                    dest INTEGER NOT NULL,
                    priority INTEGER NOT NULL,
                    first INTEGER NOT NULL,
                    last INTEGER NOT NULL,
                    PRIMARY KEY (dest, priority, first)
                ) WITHOUT ROWID;
                ALTER TABLE leases ADD COLUMN dest INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE dead_letters ADD COLUMN dest INTEGER NOT NULL DEFAULT 0;
                """)
        },
    ])

    static var version: Int { migrator.latestVersion }
}
