import CSQLite

/// Shared facts about SQLite result codes, and the one place that turns a failure into an `OutboxError`.
///
/// The wrapper is deliberately small, with GRDB's manners: `Database` (connection, statement cache, transactions),
/// `Statement` (bind, step, read) and `Migrator` (forward-only schema versions). Every failure carries
/// SQLite's *extended* result code and message, never a bound value.
enum SQLite {
    /// Primary result codes the storage layer reacts to; extended codes keep these in their low byte.
    static let full: Int32 = SQLITE_FULL
    static let corrupt: Int32 = SQLITE_CORRUPT
    static let notADatabase: Int32 = SQLITE_NOTADB
    static let busy: Int32 = SQLITE_BUSY
    static let misuse: Int32 = SQLITE_MISUSE

    /// The primary code of an extended one (`SQLITE_IOERR_SHORT_READ` → `SQLITE_IOERR`).
    @inline(__always)
    static func primary(_ code: Int32) -> Int32 { code & 0xFF }

    /// Builds the error for a failure that just happened on `handle`.
    ///
    /// `sqlite3_errmsg` describes the failure (e.g. "UNIQUE constraint failed: meta.key") and never echoes
    /// bound parameters; the SQL text we add holds only `?` placeholders and constants, so no user value leaks.
    static func error(_ handle: OpaquePointer?, code: Int32, sql: String? = nil) -> OutboxError {
        var message: String
        if let handle, let text = sqlite3_errmsg(handle) {
            message = String(cString: text)
        } else if let text = sqlite3_errstr(code) {
            message = String(cString: text)
        } else {
            message = "unknown error"
        }
        if let sql {
            message += " (while running: \(sql.prefix(200)))"
        }
        return .storage(code: code, message: message)
    }

    static func misuseError(_ message: String) -> OutboxError {
        .storage(code: SQLITE_MISUSE, message: message)
    }

    /// The library version this process runs against (not the header it was compiled with).
    static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}

extension OutboxError {
    /// SQLite's primary result code when this is a storage error.
    var sqlitePrimaryCode: Int32? {
        if case .storage(let code, _) = self { return SQLite.primary(code) }
        return nil
    }

    /// `SQLITE_FULL`: the hard size cap (`max_page_count`) or the disk was hit (SPEC S7: handled as eviction).
    var isStorageFull: Bool { sqlitePrimaryCode == SQLite.full }

    /// The file is not a usable database: SPEC S7 moves it aside.
    var isCorruption: Bool {
        let code = sqlitePrimaryCode
        return code == SQLite.corrupt || code == SQLite.notADatabase
    }
}
