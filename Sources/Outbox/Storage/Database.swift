import CSQLite

/// One SQLite connection, used from one thread (the engine's loop thread).
///
/// ```swift
/// let db = try Database(path: "/var/lib/app/outbox.sqlite")
/// try db.transaction { () throws(OutboxError) in
///     let insert = try db.cachedStatement("INSERT INTO meta(key, value) VALUES (?, ?)")
///     try insert.bind([.text("k"), .text("v")])
///     try insert.run()
/// }
/// ```
///
/// Opened with `SQLITE_OPEN_NOMUTEX`: the connection is never shared between threads, so SQLite's
/// per-call mutex is pure cost on the hot path.
final class Database {
    /// Flags for `sqlite3_open_v2`.
    struct OpenFlags: OptionSet, Sendable {
        let rawValue: Int32
        static let readOnly = OpenFlags(rawValue: SQLITE_OPEN_READONLY)
        static let readWrite = OpenFlags(rawValue: SQLITE_OPEN_READWRITE)
        static let create = OpenFlags(rawValue: SQLITE_OPEN_CREATE)
        static let noMutex = OpenFlags(rawValue: SQLITE_OPEN_NOMUTEX)
        /// `path` is a `file:` URI (`?immutable=1`, `?mode=ro`).
        static let uri = OpenFlags(rawValue: SQLITE_OPEN_URI)
        static let `default`: OpenFlags = [.readWrite, .create, .noMutex]
    }

    enum TransactionKind: String {
        /// Takes the write lock at BEGIN, so a conflict surfaces there and not halfway through the body.
        case immediate = "BEGIN IMMEDIATE"
        case deferred = "BEGIN DEFERRED"
    }

    let path: String
    private(set) var handle: OpaquePointer?
    private var cache: [String: Statement] = [:]

    init(path: String, flags: OpenFlags = .default) throws(OutboxError) {
        self.path = path
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, flags.rawValue, nil)
        if rc != SQLITE_OK {
            let error = SQLite.error(db, code: db.map { sqlite3_extended_errcode($0) } ?? rc)
            sqlite3_close_v2(db)
            throw error
        }
        handle = db
        // Extended codes tell SQLITE_IOERR_SHORT_READ from SQLITE_IOERR_FSYNC, and are what we report.
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    var isOpen: Bool { handle != nil }

    /// Finalizes the cached statements and closes the connection. Idempotent.
    ///
    /// `sqlite3_close_v2` defers the real close until statements still held elsewhere are finalized, so a
    /// forgotten `Statement` cannot make close fail.
    func close() {
        guard let db = handle else { return }
        cache.removeAll()
        handle = nil
        // A statement held elsewhere keeps the connection alive past close_v2; the hook must not outlive
        // the checkpointer it points to.
        if walCheckpointer != nil { sqlite3_wal_hook(db, nil, nil) }
        sqlite3_close_v2(db)
        walCheckpointer = nil
    }

    private func openHandle() throws(OutboxError) -> OpaquePointer {
        guard let handle else { throw SQLite.misuseError("database \(path) is closed") }
        return handle
    }

    // MARK: Statements

    /// Prepares a statement that the caller owns (finalized when released).
    func prepare(_ sql: String, persistent: Bool = false) throws(OutboxError) -> Statement {
        let db = try openHandle()
        var stmt: OpaquePointer?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let rc = sqlite3_prepare_v3(db, sql, -1, flags, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            throw SQLite.error(db, code: rc == SQLITE_OK ? SQLITE_MISUSE : rc, sql: sql)
        }
        return Statement(handle: stmt, sql: sql, database: self)
    }

    /// A statement from the connection's cache, prepared once with `SQLITE_PREPARE_PERSISTENT` (it lives
    /// long, so SQLite keeps it out of its short-lived lookaside memory). Reset before it is returned.
    func cachedStatement(_ sql: String) throws(OutboxError) -> Statement {
        if let statement = cache[sql] {
            sqlite3_reset(statement.handle)
            return statement
        }
        let statement = try prepare(sql, persistent: true)
        statement.isCached = true
        cache[sql] = statement
        return statement
    }

    /// Called by a statement whose step failed: it is prepared afresh next time.
    func statementDidFail(_ statement: Statement) {
        guard statement.isCached, cache[statement.sql] === statement else { return }
        statement.isCached = false
        cache[statement.sql] = nil
    }

    /// How many statements the cache holds (for tests).
    var cachedStatementCount: Int { cache.count }

    /// The cached statements that SQLite has compiled again since they were prepared, with how often (for tests).
    var repreparedStatements: [String: Int] {
        cache.compactMapValues { $0.reprepareCount > 0 ? $0.reprepareCount : nil }
    }

    /// Bytes SQLite's page cache of this connection holds now (`SQLITE_DBSTATUS_CACHE_USED`; for tests).
    var pageCacheBytesUsed: Int {
        guard let handle else { return 0 }
        var current: Int32 = 0
        var highest: Int32 = 0
        guard sqlite3_db_status(handle, SQLITE_DBSTATUS_CACHE_USED, &current, &highest, 0) == SQLITE_OK else { return 0 }
        return Int(current)
    }

    // MARK: Executing

    /// Runs one or more SQL statements without parameters (schema, pragmas).
    func exec(_ sql: String) throws(OutboxError) {
        let db = try openHandle()
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &errorMessage)
        if let errorMessage { sqlite3_free(errorMessage) }
        if rc != SQLITE_OK {
            throw SQLite.error(db, code: sqlite3_extended_errcode(db), sql: sql)
        }
    }

    /// Runs a cached statement with `arguments`, ignoring rows.
    func execute(_ sql: String, _ arguments: [SQLValue] = []) throws(OutboxError) {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        try statement.run()
    }

    /// The first column of the first row as an integer, or nil when there is no row or it is NULL.
    func int64(_ sql: String, _ arguments: [SQLValue] = []) throws(OutboxError) -> Int64? {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        guard try statement.step() else { return nil }
        return statement.optionalInt64(at: 0)
    }

    /// The first column of the first row as text, or nil when there is no row or it is NULL.
    func string(_ sql: String, _ arguments: [SQLValue] = []) throws(OutboxError) -> String? {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        guard try statement.step() else { return nil }
        return statement.optionalString(at: 0)
    }

    /// Reads an integer pragma (`page_count`, `freelist_count`, `user_version`, …). Through the pragma's table-valued
    /// function: SQLite compiles `PRAGMA page_count` and `PRAGMA page_size` again at every run (they can also set
    /// a value), and each append reads `page_count`.
    func pragma(_ name: String) throws(OutboxError) -> Int64 {
        try int64("SELECT * FROM pragma_\(name)()") ?? 0
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    var changes: Int { handle.map { Int(sqlite3_changes64($0)) } ?? 0 }

    var lastInsertRowID: Int64 { handle.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// Whether a transaction is open (SQLite's own view: an SQLITE_FULL may already have rolled it back).
    var isInTransaction: Bool { handle.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    // MARK: Transactions

    /// Transactions `transaction` has committed on this connection (for tests).
    private(set) var committedTransactions = 0

    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws and rethrows the
    /// first error (a failing ROLLBACK never hides the error that caused it). Not reentrant.
    func transaction<T>(_ kind: TransactionKind = .immediate,
                        _ body: () throws(OutboxError) -> T) throws(OutboxError) -> T {
        if isInTransaction {
            throw SQLite.misuseError("nested transaction on \(path)")
        }
        // BEGIN and COMMIT come from the statement cache: `exec` compiles its SQL at every call, and delivery
        // runs two transactions per request.
        TestingPhase.enter(.commit); defer { TestingPhase.leave(.commit) }
        try cachedStatement(kind.rawValue).run()
        let value: T
        do {
            value = try body()
        } catch {
            rollbackQuietly()
            throw error
        }
        do {
            try cachedStatement("COMMIT").run()
        } catch {
            rollbackQuietly()
            throw error
        }
        committedTransactions += 1
        return value
    }

    private func rollbackQuietly() {
        // SQLITE_FULL, SQLITE_IOERR and friends may already have rolled the transaction back; a second
        // ROLLBACK would only fail with "no transaction is active".
        guard let db = handle, sqlite3_get_autocommit(db) == 0 else { return }
        sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
    }

    // MARK: Maintenance

    var userVersion: Int {
        get throws(OutboxError) { Int(try pragma("user_version")) }
    }

    /// `PRAGMA wal_checkpoint(mode)`: returns whether it was blocked by a reader (busy), the WAL size in
    /// frames and the frames copied back.
    @discardableResult
    func checkpoint(_ mode: CheckpointMode) throws(OutboxError) -> (busy: Bool, walFrames: Int, checkpointed: Int) {
        let statement = try prepare("PRAGMA wal_checkpoint(\(mode.rawValue))")
        guard try statement.step() else { return (false, 0, 0) }
        return (statement.int(at: 0) != 0, statement.int(at: 1), statement.int(at: 2))
    }

    /// The WAL hook in charge of checkpoints (nil: SQLite's own, `PRAGMA wal_autocheckpoint`).
    private(set) var walCheckpointer: WALCheckpointer?

    /// Hands the connection's checkpoints to `checkpointer` (`sqlite3_wal_hook`, which replaces SQLite's
    /// automatic checkpoint). The database keeps it for as long as the connection is open.
    func setWALCheckpointer(_ checkpointer: WALCheckpointer) {
        guard let db = handle else { return }
        walCheckpointer = checkpointer
        sqlite3_wal_hook(db, { context, db, _, frames in
            guard let context, let db else { return SQLITE_OK }
            Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(db, frames: frames)
            return SQLITE_OK
        }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    /// The WAL file's path, as SQLite names it.
    var walPath: String {
        guard let db = handle, let name = sqlite3_db_filename(db, "main"), let wal = sqlite3_filename_wal(name) else {
            return path + "-wal"
        }
        return String(cString: wal)
    }

    enum CheckpointMode: String {
        case passive = "PASSIVE"
        case truncate = "TRUNCATE"
    }
}
