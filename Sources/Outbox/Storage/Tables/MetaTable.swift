/// The `meta` table: the store's own keys (the commit mark's seq, batch-id reservations, the clean-close mark) and
/// the engine's (`MetaKey`: install id, enabled flag, user id, …). Part of the caller's transaction.
struct MetaTable {
    let db: Database

    /// The highest seq ever deleted from `logs` when it was the highest one there (`LogStore.keepSeqHigh`, in the
    /// deleting transaction): with `max(seq)`, the highest seq the file ever held, which delivery, eviction, expiry,
    /// dead-lettering and opt-out never lower (see `CommitMark`).
    static let seqHighKey = "store.seq_high"
    static let lastBatchKey = "store.last_batch"
    /// Present while some log may hold a retry time (R3) set by this or an earlier process: the next open clears
    /// them all (C9) and the key. Without it the open skips that scan of the whole table (0.3 s per million logs).
    static let retryTimesKey = "store.retry_times"

    func value(_ key: String) throws(OutboxError) -> String? {
        try db.string("SELECT value FROM meta WHERE key = ?", [.text(key)])
    }

    /// A value's bytes as stored: a sealed value (SPEC K1) is a blob in the text column.
    func bytes(_ key: String) throws(OutboxError) -> [UInt8]? {
        let select = try db.cachedStatement("SELECT value FROM meta WHERE key = ?")
        defer { select.reset() }
        try select.bind(key, at: 1)
        return try select.step() ? select.blob(at: 0) : nil
    }

    func set(_ key: String, bytes: [UInt8]) throws(OutboxError) {
        try db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                       [.text(key), .blob(bytes)])
    }

    /// Sets `key`, or deletes it for nil.
    func set(_ key: String, _ value: String?) throws(OutboxError) {
        if let value {
            try db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                           [.text(key), .text(value)])
        } else {
            try db.execute("DELETE FROM meta WHERE key = ?", [.text(key)])
        }
    }

    /// Raises `seqHighKey` to `seq` (never lowers it).
    func raiseSeqHigh(to seq: Int64) throws(OutboxError) {
        let raise = try db.cachedStatement("""
            INSERT INTO meta (key, value) VALUES (?1, ?2)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value
            WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)
            """)
        try raise.bind(Self.seqHighKey, at: 1)
        try raise.bind(String(seq), at: 2)
        try raise.run()
    }
}

/// The `event_names` table (SPEC T4): every distinct event name ever tracked, for the 200-name guard across restarts.
/// With `keys` (SPEC K1) a name is kept as its HMAC (`StoreKeys.nameHash`): the guard still counts and matches names,
/// and the file does not tell them.
struct EventNamesTable {
    let db: Database
    let keys: StoreKeys?

    func insert(_ names: [String]) throws(OutboxError) {
        let insert = try db.cachedStatement("INSERT OR IGNORE INTO event_names (name) VALUES (?)")
        for name in names {
            try insert.bind(keys.map { $0.nameHash(name) } ?? name, at: 1)
            try insert.run()
        }
    }

    /// Replaces every stored name by its hash (a plain store being sealed).
    func hashAll(with keys: StoreKeys) throws(OutboxError) {
        let names = try all()
        try db.execute("DELETE FROM event_names")
        try EventNamesTable(db: db, keys: keys).insert(Array(names))
    }

    func all() throws(OutboxError) -> Set<String> {
        let select = try db.cachedStatement("SELECT name FROM event_names")
        defer { select.reset() }
        var names = Set<String>()
        while try select.step() { names.insert(select.string(at: 0)) }
        return names
    }
}

/// The `contexts` table (SPEC A10): versions of the device context, which logs point to by id. With `keys` (SPEC K1)
/// the JSON is sealed; a version that does not open reads as absent (its logs go without a device context).
struct ContextsTable {
    let db: Database
    let keys: StoreKeys?

    func insert(json: [UInt8]) throws(OutboxError) -> Int64 {
        guard let keys else {
            try db.execute("INSERT INTO contexts (json) VALUES (?)", [.blob(json)])
            return db.lastInsertRowID
        }
        // The id is the sealed value's slot: chosen before the insert, as SQLite would.
        let id = (try db.int64("SELECT max(id) FROM contexts") ?? 0) + 1
        try db.execute("INSERT INTO contexts (id, json) VALUES (?, ?)", [.integer(id), .blob(try keys.seal(json, .context(id)))])
        return id
    }

    func json(id: Int64) throws(OutboxError) -> [UInt8]? {
        let select = try db.cachedStatement("SELECT json FROM contexts WHERE id = ?")
        defer { select.reset() }
        try select.bind(id, at: 1)
        return try select.step() ? read(select, id: id, column: 0) : nil
    }

    func latest() throws(OutboxError) -> (id: Int64, json: [UInt8])? {
        let select = try db.cachedStatement("SELECT id, json FROM contexts ORDER BY id DESC LIMIT 1")
        defer { select.reset() }
        guard try select.step() else { return nil }
        let id = select.int64(at: 0)
        guard let json = read(select, id: id, column: 1) else { return nil }
        return (id, json)
    }

    private func read(_ select: Statement, id: Int64, column: Int32) -> [UInt8]? {
        guard let keys else { return select.blob(at: column) }
        return select.withBlob(at: column) { keys.open($0, .context(id)) }
    }

    /// Deletes the versions no log points to, but the latest.
    func prune() throws(OutboxError) {
        try db.execute("""
            DELETE FROM contexts WHERE id <> (SELECT max(id) FROM contexts)
            AND id NOT IN (SELECT context FROM logs)
            """)
    }
}
