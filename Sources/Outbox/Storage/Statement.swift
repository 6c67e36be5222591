import CSQLite

/// A prepared statement. Owned by one `Database`, used on its thread only.
///
/// Parameters are 1-based and columns 0-based, as in the C API. A failed `step()` resets the statement
/// and evicts it from the connection's cache (it will be prepared afresh next time), as GRDB does: a
/// statement whose step failed may hold state (an interrupted schema change, a half-read cursor) that
/// must not leak into the next use.
final class Statement {
    let handle: OpaquePointer
    let sql: String
    /// Unowned: the database's cache holds its statements, so a strong reference would be a cycle; and a
    /// statement never outlives its database (closing empties the cache).
    unowned let database: Database
    /// Whether the database's cache holds this statement (so a failure must evict it).
    var isCached = false

    init(handle: OpaquePointer, sql: String, database: Database) {
        self.handle = handle
        self.sql = sql
        self.database = database
    }

    deinit {
        // Finalizing after `sqlite3_close_v2` is allowed: the connection stays a zombie until the last
        // statement is gone.
        sqlite3_finalize(handle)
    }

    /// How many times SQLite has compiled this statement again since it was prepared (its schema changed, or a
    /// parameter the query plan depends on was bound anew). For tests: the hot paths must not do it.
    var reprepareCount: Int { Int(sqlite3_stmt_status(handle, SQLITE_STMTSTATUS_REPREPARE, 0)) }

    // MARK: Binding

    @inline(__always)
    private func check(_ rc: Int32) throws(OutboxError) {
        if rc != SQLITE_OK { throw SQLite.error(database.handle, code: rc, sql: sql) }
    }

    func bind(_ value: Int64, at index: Int32) throws(OutboxError) {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    func bind(_ value: Int, at index: Int32) throws(OutboxError) {
        try check(sqlite3_bind_int64(handle, index, Int64(value)))
    }

    func bind(_ value: Double, at index: Int32) throws(OutboxError) {
        try check(sqlite3_bind_double(handle, index, value))
    }

    func bind(_ value: String, at index: Int32) throws(OutboxError) {
        var value = value
        let rc = value.withUTF8 { utf8 -> Int32 in
            utf8.withMemoryRebound(to: CChar.self) { chars in
                // An empty buffer may have no address; bind an empty text rather than NULL.
                guard let base = chars.baseAddress else {
                    return sqlite3_bind_text(handle, index, "", 0, outbox_sqlite_transient())
                }
                return sqlite3_bind_text(handle, index, base, Int32(chars.count), outbox_sqlite_transient())
            }
        }
        try check(rc)
    }

    func bind(_ value: [UInt8], at index: Int32) throws(OutboxError) {
        let rc = value.withUnsafeBytes { bytes in bindBytes(bytes, at: index) }
        try check(rc)
    }

    /// Binds a blob copied out of `bytes` (SQLITE_TRANSIENT): the buffer need not outlive the call.
    func bind(bytes: UnsafeRawBufferPointer, at index: Int32) throws(OutboxError) {
        try check(bindBytes(bytes, at: index))
    }

    /// Binds the in-memory bytes of a trivial value (e.g. a tuple of big-endian integers) as a blob.
    func bind<T>(bytesOf value: T, at index: Int32) throws(OutboxError) {
        let rc = withUnsafeBytes(of: value) { bytes in bindBytes(bytes, at: index) }
        try check(rc)
    }

    @inline(__always)
    private func bindBytes(_ bytes: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        // A zero-length blob must still be a blob, not NULL: `sqlite3_bind_blob` with a nil pointer binds NULL.
        if bytes.isEmpty { return sqlite3_bind_zeroblob(handle, index, 0) }
        return sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), outbox_sqlite_transient())
    }

    func bindNull(at index: Int32) throws(OutboxError) {
        try check(sqlite3_bind_null(handle, index))
    }

    func bind(_ value: SQLValue, at index: Int32) throws(OutboxError) {
        switch value {
        case .integer(let v): try bind(v, at: index)
        case .real(let v): try bind(v, at: index)
        case .text(let v): try bind(v, at: index)
        case .blob(let v): try bind(v, at: index)
        case .null: try bindNull(at: index)
        }
    }

    /// Binds `values` to parameters 1…n.
    func bind(_ values: [SQLValue]) throws(OutboxError) {
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    // MARK: Stepping

    /// Advances the statement: `true` when a row is available, `false` when done.
    @discardableResult
    func step() throws(OutboxError) -> Bool {
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let error = SQLite.error(database.handle, code: rc, sql: sql)
        sqlite3_reset(handle)
        database.statementDidFail(self)
        throw error
    }

    /// Runs the statement to completion and resets it, ignoring any rows.
    func run() throws(OutboxError) {
        defer { sqlite3_reset(handle) }
        while try step() {}
    }

    /// Makes the statement ready to run again; bindings are kept.
    func reset() {
        sqlite3_reset(handle)
    }

    // MARK: Reading the current row

    @inline(__always)
    func int64(at column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    @inline(__always)
    func int(at column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }

    func double(at column: Int32) -> Double { sqlite3_column_double(handle, column) }

    func isNull(at column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func optionalInt64(at column: Int32) -> Int64? {
        isNull(at: column) ? nil : int64(at: column)
    }

    func string(at column: Int32) -> String {
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalString(at column: Int32) -> String? {
        isNull(at: column) ? nil : string(at: column)
    }

    func blob(at column: Int32) -> [UInt8] {
        // Ask for the pointer before the size: the documented order for a value that may need conversion.
        guard let pointer = sqlite3_column_blob(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Calls `body` with the blob's bytes without copying them; valid only inside `body`.
    func withBlob<T>(at column: Int32, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        guard let pointer = sqlite3_column_blob(handle, column) else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        let count = Int(sqlite3_column_bytes(handle, column))
        return body(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
