import CSQLite
import Testing
@testable import Outbox

/// The SQLite wrapper's manners, GRDB's: transactions, statement cache, errors, migrations.
struct SQLiteWrapperTests {
    // SPEC S1: the schema has a version and migrates forward, one transaction per step.
    @Test func migratorAppliesEachStepOnceAndInOrder() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("m.sqlite"))
        let migrator = Migrator([
            Migration(version: 2, name: "add column") { (db: Database) throws(OutboxError) in
                try db.exec("ALTER TABLE t ADD COLUMN b TEXT")
            },
            Migration(version: 1, name: "create") { (db: Database) throws(OutboxError) in
                try db.exec("CREATE TABLE t (a INTEGER)")
            },
        ])
        let first = try migrator.migrate(db)
        #expect(first.from == 0 && first.to == 2)
        #expect(try db.userVersion == 2)
        let again = try migrator.migrate(db)
        #expect(again.from == 2 && again.to == 2)
        try db.execute("INSERT INTO t (a, b) VALUES (?, ?)", [.integer(1), .text("x")])
    }

    // SPEC S1: a failing step leaves the database at the last whole version.
    @Test func failingMigrationRollsBackToThePreviousVersion() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("m.sqlite"))
        let migrator = Migrator([
            Migration(version: 1, name: "create") { (db: Database) throws(OutboxError) in
                try db.exec("CREATE TABLE t (a INTEGER)")
            },
            Migration(version: 2, name: "broken") { (db: Database) throws(OutboxError) in
                try db.exec("CREATE TABLE u (a INTEGER)")
                try db.exec("THIS IS NOT SQL")
            },
        ])
        #expect(throws: OutboxError.self) { try migrator.migrate(db) }
        #expect(try db.userVersion == 1)
        #expect(try db.int64("SELECT count(*) FROM sqlite_schema WHERE name = 'u'") == 0)
    }

    // SPEC S1: a database written by a newer version is refused by name, not guessed at.
    @Test func newerDatabaseIsRefused() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("m.sqlite"))
        try db.exec("PRAGMA user_version = 7")
        let migrator = Migrator([Migration(version: 1, name: "create") { (_: Database) throws(OutboxError) in }])
        #expect(throws: OutboxError.storeTooNew(version: 7, supported: 1)) { try migrator.migrate(db) }
    }

    // SPEC T5: a transaction commits whole or not at all (group commit relies on it).
    @Test func transactionRollsBackAndRethrowsTheFirstError() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("t.sqlite"))
        try db.exec("CREATE TABLE t (a INTEGER UNIQUE)")
        #expect(throws: OutboxError.shutDown) {
            try db.transaction { () throws(OutboxError) in
                try db.execute("INSERT INTO t (a) VALUES (1)")
                throw OutboxError.shutDown
            }
        }
        #expect(try db.int64("SELECT count(*) FROM t") == 0)
        #expect(!db.isInTransaction)
        let value = try db.transaction { () throws(OutboxError) -> Int in
            try db.execute("INSERT INTO t (a) VALUES (2)")
            return 42
        }
        #expect(value == 42)
        #expect(try db.int64("SELECT count(*) FROM t") == 1)
    }

    // SPEC T5: a nested transaction is refused rather than silently merged into the outer one.
    @Test func nestedTransactionIsAMisuseNotADeadlock() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("t.sqlite"))
        #expect(throws: OutboxError.self) {
            try db.transaction { () throws(OutboxError) in
                try db.transaction { () throws(OutboxError) in }
            }
        }
        #expect(!db.isInTransaction)
    }

    // SPEC S7: a statement that failed (e.g. SQLITE_FULL) is prepared afresh, never reused in a bad state.
    @Test func failedStatementIsEvictedFromTheCache() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("c.sqlite"))
        try db.exec("CREATE TABLE t (a INTEGER PRIMARY KEY)")
        let sql = "INSERT INTO t (a) VALUES (?)"
        let insert = try db.cachedStatement(sql)
        #expect(try db.cachedStatement(sql) === insert)
        try insert.bind(1, at: 1)
        try insert.run()
        let cachedBefore = db.cachedStatementCount
        try insert.bind(1, at: 1)
        #expect(throws: OutboxError.self) { try insert.run() }
        #expect(db.cachedStatementCount == cachedBefore - 1)
        let fresh = try db.cachedStatement(sql)
        #expect(fresh !== insert)
        try fresh.bind(2, at: 1)
        try fresh.run()
    }

    // SPEC S7 (errors never carry bound values): the extended code and SQLite's message, nothing else.
    @Test func errorsCarryTheExtendedCodeButNoBoundValue() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("e.sqlite"))
        try db.exec("CREATE TABLE secrets (v TEXT UNIQUE)")
        try db.execute("INSERT INTO secrets (v) VALUES (?)", [.text("hunter2-secret")])
        do {
            try db.execute("INSERT INTO secrets (v) VALUES (?)", [.text("hunter2-secret")])
            Issue.record("the duplicate insert should fail")
        } catch {
            guard case .storage(let code, let message) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(code == SQLITE_CONSTRAINT | (8 << 8))  // SQLITE_CONSTRAINT_UNIQUE, a macro Swift cannot import
            #expect(message.contains("UNIQUE"))
            #expect(!message.contains("hunter2"))
            #expect(!error.description.contains("hunter2"))
        }
    }

    // SPEC S1: what is stored reads back identically (empty text and blobs stay non-NULL).
    @Test func valuesRoundTripThroughBindAndRead() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let db = try Database(path: dir.file("v.sqlite"))
        try db.exec("CREATE TABLE v (i INTEGER, d REAL, s TEXT, b BLOB, n)")
        try db.execute("INSERT INTO v VALUES (?, ?, ?, ?, ?)",
                       [.integer(.min), .real(2.5), .text("héllo"), .blob([0, 1, 255]), .null])
        try db.execute("INSERT INTO v VALUES (?, ?, ?, ?, ?)", [.integer(0), .real(0), .text(""), .blob([]), .null])
        let select = try db.prepare("SELECT i, d, s, b, n FROM v ORDER BY rowid")
        #expect(try select.step())
        #expect(select.int64(at: 0) == .min)
        #expect(select.double(at: 1) == 2.5)
        #expect(select.string(at: 2) == "héllo")
        #expect(select.blob(at: 3) == [0, 1, 255])
        #expect(select.isNull(at: 4))
        #expect(try select.step())
        #expect(select.string(at: 2) == "")
        #expect(!select.isNull(at: 3))
        #expect(select.blob(at: 3) == [])
        #expect(try !select.step())
        #expect(db.changes == 1)
    }
}
