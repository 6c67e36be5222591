/// The `dead_letters` table (SPEC R2, X6): logs a server refused, with the status and reason, kept under a byte cap.
/// Read on the store's connection or a read-only one (`outbox dead-letters` beside a running engine).
///
/// With `keys` (SPEC K1) the payload and the reason are sealed; this type's callers see plaintext. A letter whose
/// sealed values do not open reads with an empty payload and a reason that says so.
struct DeadLettersTable {
    let db: Database
    let keys: StoreKeys?

    static let unreadableReason = "unreadable: this letter's sealed values did not open (altered on disk, or another key)"

    static let columns = "seq, log_seq, priority, wall_ms, status, at_ms, reason, id, payload"

    /// Every letter (inspection).
    func count() throws(OutboxError) -> Int { Int(try db.int64("SELECT count(*) FROM dead_letters") ?? 0) }

    /// The reused insert statement for `insert(with:…)`.
    func inserter() throws(OutboxError) -> Statement {
        try db.cachedStatement("""
            INSERT INTO dead_letters (log_seq, priority, wall_ms, status, at_ms, reason, id, payload)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """)
    }

    func insert(with insert: Statement, logSeq: Int64, priority: Int64, wallMs: Int64, status: Int, atMs: Int64,
                reason: String, id: UUIDBytes, payload: [UInt8]) throws(OutboxError) {
        try insert.bind(logSeq, at: 1)
        try insert.bind(priority, at: 2)
        try insert.bind(wallMs, at: 3)
        try insert.bind(status, at: 4)
        try insert.bind(atMs, at: 5)
        if let keys {
            try insert.bind(try keys.seal(Array(reason.utf8), .reason(id)), at: 6)
            try insert.bind(try keys.seal(payload, .log(id)), at: 8)
        } else {
            try insert.bind(reason, at: 6)
            try insert.bind(payload, at: 8)
        }
        try insert.bind(bytesOf: (id.high.bigEndian, id.low.bigEndian), at: 7)
        try insert.run()
    }

    /// Puts a row back as it was (a requeue that found no room for it; rare, so not a cached statement).
    func restore(_ row: DeadLetterRow) throws(OutboxError) {
        let id = withUnsafeBytes(of: (row.id.high.bigEndian, row.id.low.bigEndian)) { Array($0) }
        let reason: SQLValue = try keys.map { keys throws(OutboxError) in .blob(try keys.seal(Array(row.reason.utf8), .reason(row.id))) }
            ?? .text(row.reason)
        let payload = try keys.map { keys throws(OutboxError) in try keys.seal(row.payload, .log(row.id)) } ?? row.payload
        try db.execute("INSERT INTO dead_letters (\(Self.columns), dest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            .integer(row.seq), .integer(row.logSeq), .integer(Int64(row.priority.rawValue)), .integer(row.wallMs),
            .integer(Int64(row.status)), .integer(row.atMs), reason, .blob(id), .blob(payload), .integer(row.dest),
        ])
    }

    /// The reason and payload of a letter as stored, opened when sealed.
    private func opened(_ select: Statement, id: UUIDBytes, reason: Int32,
                        payload: Int32) -> (reason: String, payload: [UInt8], unreadable: Bool) {
        guard let keys else { return (select.string(at: reason), select.blob(at: payload), false) }
        guard let text = select.withBlob(at: reason, { keys.open($0, .reason(id)) }),
              let body = select.withBlob(at: payload, { keys.open($0, .log(id)) }) else {
            return (Self.unreadableReason, [], true)
        }
        return (String(decoding: text, as: UTF8.self), body, false)
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
            let id = LogsTable.readID(select, column: 0)
            let (reason, payload, _) = opened(select, id: id, reason: 2, payload: 4)
            letters.append(DeadLetter(id: id, status: select.int(at: 1), reason: reason, atMs: select.int64(at: 3),
                                      payload: payload))
        }
        return letters
    }

    /// Dead letters with what a requeue or a listing needs, oldest first; `ids` limits them to those logs (an id that
    /// is not there is skipped).
    func rows(ids: [UUIDBytes]?) throws(OutboxError) -> [DeadLetterRow] {
        var rows: [DeadLetterRow] = []
        // A file read without migrating (`inspect`) may predate the destinations' column (SPEC D17).
        let withDest = try db.userVersion >= 5
        let columns = withDest ? Self.columns + ", dest" : Self.columns
        func readAll(_ select: Statement) throws(OutboxError) {
            while try select.step() {
                let id = LogsTable.readID(select, column: 7)
                let (reason, payload, unreadable) = opened(select, id: id, reason: 6, payload: 8)
                rows.append(DeadLetterRow(
                    seq: select.int64(at: 0), logSeq: select.int64(at: 1), id: id,
                    priority: Priority(rawValue: select.int(at: 2)) ?? .normal, wallMs: select.int64(at: 3),
                    status: select.int(at: 4), reason: reason, atMs: select.int64(at: 5), payload: payload,
                    dest: withDest ? select.int64(at: 9) : 0, unreadable: unreadable))
            }
        }
        guard let ids else {
            let select = try db.cachedStatement("SELECT \(columns) FROM dead_letters ORDER BY seq")
            defer { select.reset() }
            try readAll(select)
            return rows
        }
        // The table is small (capped at 1 MiB of payload) and has no index on `id`: one scan per asked id beats an
        // index that every dead-lettering would have to maintain.
        let select = try db.cachedStatement("SELECT \(columns) FROM dead_letters WHERE id = ? ORDER BY seq")
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
