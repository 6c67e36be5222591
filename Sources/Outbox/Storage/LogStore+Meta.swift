/// Small durable state beside the logs: meta values (T6 enabled flag, A8 ids…), event names (T4), device
/// contexts (A10).
extension LogStore {
    static let lastBatchKey = "store.last_batch"
    /// Present while some log may hold a retry time (R3) set by this or an earlier process: the next open clears
    /// them all (C9) and the key. Without it the open skips that scan of the whole table (0.3 s per million logs).
    static let retryTimesKey = "store.retry_times"

    func meta(_ key: String) throws(OutboxError) -> String? {
        try guarded { () throws(OutboxError) -> String? in
            try db.string("SELECT value FROM meta WHERE key = ?", [.text(key)])
        }
    }

    /// Sets (or with nil, removes) a meta value, durably.
    func setMeta(_ key: String, _ value: String?) throws(OutboxError) {
        try guarded { () throws(OutboxError) in
            try withRoom(bytes: key.utf8.count + (value?.utf8.count ?? 0) + 64) { () throws(OutboxError) in
                try writeMeta(key, value)
            }
        }
    }

    func writeMeta(_ key: String, _ value: String?) throws(OutboxError) {
        if let value {
            try db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                           [.text(key), .text(value)])
        } else {
            try db.execute("DELETE FROM meta WHERE key = ?", [.text(key)])
        }
    }

    /// Keeps `seqHighKey` (SPEC S7: what the commit mark is compared with) in a transaction that deletes logs, once,
    /// with the highest seq it deletes or may delete; nil when it deletes none. Only a delete that takes the highest
    /// row can lower `max(seq)`, and that row is `nextSeq - 1` (set once each append has committed) unless an
    /// earlier delete took it and recorded it already: a delete below it costs one comparison, and one that takes
    /// it records it in the same transaction, so the database and its record cannot disagree after a crash. Run per
    /// transaction, not per deleted row as the connection-local trigger that did this before was.
    func keepSeqHigh(deletingThrough highest: Int64?) throws(OutboxError) {
        let top = nextSeq - 1
        guard let highest, highest >= top, top > 0 else { return }
        let raise = try db.cachedStatement(Self.raiseSeqHigh)
        try raise.bind(Self.seqHighKey, at: 1)
        try raise.bind(String(top), at: 2)
        try raise.run()
    }

    /// `keepSeqHigh` after a delete whose rows are not listed (expiry's filter): whether the highest row is gone
    /// is one seek.
    func keepSeqHighAfterDelete() throws(OutboxError) {
        let top = nextSeq - 1
        guard top > 0, (try db.int64("SELECT max(seq) FROM logs") ?? 0) < top else { return }
        try keepSeqHigh(deletingThrough: top)
    }

    /// Raises a meta value stored as an integer, never lowers it; writes no page when it would not change.
    static let raiseSeqHigh = """
        INSERT INTO meta (key, value) VALUES (?1, ?2)
        ON CONFLICT (key) DO UPDATE SET value = excluded.value
        WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)
        """

    func eventNames() throws(OutboxError) -> Set<String> {
        try guarded { () throws(OutboxError) -> Set<String> in
            let select = try db.cachedStatement("SELECT name FROM event_names")
            defer { select.reset() }
            var names = Set<String>()
            while try select.step() { names.insert(select.string(at: 0)) }
            return names
        }
    }

    /// Stores a device-context version (A10) and returns its id; the latest version is reused when its JSON
    /// is identical.
    func saveContext(json: [UInt8]) throws(OutboxError) -> Int64 {
        try guarded { () throws(OutboxError) -> Int64 in
            if let latest = try latestContextOnce(), latest.json == json { return latest.id }
            return try withRoom(bytes: json.count + 64) { () throws(OutboxError) -> Int64 in
                try db.execute("INSERT INTO contexts (json) VALUES (?)", [.blob(json)])
                return db.lastInsertRowID
            }
        }
    }

    func context(id: Int64) throws(OutboxError) -> [UInt8]? {
        try guarded { () throws(OutboxError) -> [UInt8]? in
            let select = try db.cachedStatement("SELECT json FROM contexts WHERE id = ?")
            defer { select.reset() }
            try select.bind(id, at: 1)
            return try select.step() ? select.blob(at: 0) : nil
        }
    }

    func latestContext() throws(OutboxError) -> (id: Int64, json: [UInt8])? {
        try guarded { () throws(OutboxError) in try latestContextOnce() }
    }

    private func latestContextOnce() throws(OutboxError) -> (id: Int64, json: [UInt8])? {
        let select = try db.cachedStatement("SELECT id, json FROM contexts ORDER BY id DESC LIMIT 1")
        defer { select.reset() }
        return try select.step() ? (select.int64(at: 0), select.blob(at: 1)) : nil
    }
}
