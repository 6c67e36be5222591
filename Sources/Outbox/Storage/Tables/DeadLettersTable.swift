/// The `dead_letters` table (SPEC R2, X6): logs a server refused, with the status and reason, kept under a byte cap.
/// Read on the store's connection or a read-only one (`outbox dead-letters` beside a running engine).
struct DeadLettersTable {
    let db: Database

    static let columns = "seq, log_seq, priority, wall_ms, status, at_ms, reason, id, payload"

    /// The reused insert statement for `insert(with:…)`.
    func inserter() throws(OutboxError) -> Statement {
        try db.cachedStatement("""
            INSERT INTO dead_letters (log_seq, priority, wall_ms, status, at_ms, reason, id, payload)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """)
    }

    func insert(with insert: Statement, logSeq: Int64, priority: Int64, wallMs: Int64, status: Int, atMs: Int64,
                reason: String, id: [UInt8], payload: [UInt8]) throws(OutboxError) {
        try insert.bind(logSeq, at: 1)
        try insert.bind(priority, at: 2)
        try insert.bind(wallMs, at: 3)
        try insert.bind(status, at: 4)
        try insert.bind(atMs, at: 5)
        try insert.bind(reason, at: 6)
        try insert.bind(id, at: 7)
        try insert.bind(payload, at: 8)
        try insert.run()
    }

    /// Puts a row back as it was (a requeue that found no room for it; rare, so not a cached statement).
    func restore(_ row: DeadLetterRow) throws(OutboxError) {
        let id = withUnsafeBytes(of: (row.id.high.bigEndian, row.id.low.bigEndian)) { Array($0) }
        try db.execute("INSERT INTO dead_letters (\(Self.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            .integer(row.seq), .integer(row.logSeq), .integer(Int64(row.priority.rawValue)), .integer(row.wallMs),
            .integer(Int64(row.status)), .integer(row.atMs), .text(row.reason), .blob(id), .blob(row.payload),
        ])
    }

    func delete(seq: Int64) throws(OutboxError) {
        let delete = try db.cachedStatement("DELETE FROM dead_letters WHERE seq = ?")
        try delete.bind(seq, at: 1)
        try delete.run()
    }

    /// Deletes the letters of these log ids (all for nil); returns how many.
    func purge(ids: [UUIDBytes]?) throws(OutboxError) -> Int {
        guard let ids else { return try deleteAll() }
        let delete = try db.cachedStatement("DELETE FROM dead_letters WHERE id = ?")
        var purged = 0
        for id in Set(ids) {
            try delete.bind(bytesOf: (id.high.bigEndian, id.low.bigEndian), at: 1)
            try delete.run()
            purged += db.changes
        }
        return purged
    }

    func deleteAll() throws(OutboxError) -> Int {
        try db.execute("DELETE FROM dead_letters")
        return db.changes
    }

    /// Drops the oldest letters until their payloads add up to at most `cap` bytes; returns how many.
    func trim(toBytes cap: Int) throws(OutboxError) -> Int {
        let total = Int(try db.int64("SELECT coalesce(sum(length(payload)), 0) FROM dead_letters") ?? 0)
        guard total > cap else { return 0 }
        var excess = total - cap
        var lastDropped: Int64?
        let scan = try db.cachedStatement("SELECT seq, length(payload) FROM dead_letters ORDER BY seq")
        defer { scan.reset() }
        while excess > 0, try scan.step() {
            lastDropped = scan.int64(at: 0)
            excess -= scan.int(at: 1)
        }
        scan.reset()
        guard let lastDropped else { return 0 }
        try db.execute("DELETE FROM dead_letters WHERE seq <= ?", [.integer(lastDropped)])
        return db.changes
    }

    /// Dead letters, oldest first.
    func list(limit: Int) throws(OutboxError) -> [DeadLetter] {
        let select = try db.cachedStatement("SELECT id, status, reason, at_ms, payload FROM dead_letters ORDER BY seq LIMIT ?")
        defer { select.reset() }
        try select.bind(Int64(clamping: limit), at: 1)
        var letters: [DeadLetter] = []
        while try select.step() {
            letters.append(DeadLetter(id: LogsTable.readID(select, column: 0), status: select.int(at: 1),
                                      reason: select.string(at: 2), atMs: select.int64(at: 3), payload: select.blob(at: 4)))
        }
        return letters
    }

    /// Dead letters with what a requeue or a listing needs, oldest first; `ids` limits them to those logs (an id that
    /// is not there is skipped).
    func rows(ids: [UUIDBytes]?) throws(OutboxError) -> [DeadLetterRow] {
        var rows: [DeadLetterRow] = []
        func readAll(_ select: Statement) throws(OutboxError) {
            while try select.step() {
                rows.append(DeadLetterRow(
                    seq: select.int64(at: 0), logSeq: select.int64(at: 1), id: LogsTable.readID(select, column: 7),
                    priority: Priority(rawValue: select.int(at: 2)) ?? .normal, wallMs: select.int64(at: 3),
                    status: select.int(at: 4), reason: select.string(at: 6), atMs: select.int64(at: 5),
                    payload: select.blob(at: 8)))
            }
        }
        guard let ids else {
            let select = try db.cachedStatement("SELECT \(Self.columns) FROM dead_letters ORDER BY seq")
            defer { select.reset() }
            try readAll(select)
            return rows
        }
        // The table is small (capped at 1 MiB of payload) and has no index on `id`: one scan per asked id beats an
        // index that every dead-lettering would have to maintain.
        let select = try db.cachedStatement("SELECT \(Self.columns) FROM dead_letters WHERE id = ? ORDER BY seq")
        defer { select.reset() }
        for id in Set(ids) {
            try select.bind(bytesOf: (id.high.bigEndian, id.low.bigEndian), at: 1)
            try readAll(select)
            select.reset()
        }
        rows.sort { $0.seq < $1.seq }
        return rows
    }
}
