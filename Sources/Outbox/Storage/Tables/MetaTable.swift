/// Every key of the `meta` table, the only place one is spelled: the store's own (the commit mark's seq, batch-id
/// reservations, the clean-close mark, the keys of a sealed store) and the engine's (install id, enabled flag, user
/// id, …). The raw values are what the file holds: a renamed case keeps its raw value, or stores written before lose
/// the value.
enum MetaKey: String, CaseIterable, Sendable {
    // The engine's.
    case installID = "install_id"
    case enabled = "enabled"
    /// SPEC A8; sealed in a sealed store (`isSealed`).
    case userID = "user_id"
    case firstStart = "first_start_done"
    /// Why delivery is disabled (SPEC R5), persisted so that `outbox status` can show it.
    case disabledReason = "disabled_reason"
    /// The destination of the last request (SPEC D1), for `outbox status`.
    case destination = "destination"
    /// Logs a server accepted the request of but refused inside it (SPEC D5), a total kept across runs.
    case serverRejected = "server_rejected"

    // The store's.
    /// The highest seq ever deleted from `logs` when it was the highest one there (`LogStore.keepSeqHigh`, in the
    /// deleting transaction): with `max(seq)`, the highest seq the file ever held, which delivery, eviction, expiry,
    /// dead-lettering and opt-out never lower (see `CommitMark`).
    case seqHigh = "store.seq_high"
    /// The batch ids reserved so far (`LogStore.batchIDBlock`).
    case lastBatch = "store.last_batch"
    /// Present while some log may hold a retry time (R3) set by this or an earlier process: the next open clears
    /// them all (C9) and the key. Without it the open skips that scan of the whole table (0.3 s per million logs).
    case retryTimes = "store.retry_times"
    /// Written by a clean `close()` with the file's page count, removed by the next open's first transaction.
    /// While it is there and the file is as that close left it, the open skips `quick_check`.
    case closedCleanly = "store.closed_cleanly"
    /// SPEC K1: the current key's id (`StoreKey.idText`); absent in a plain store.
    case keyID = "store.key_id"
    /// SPEC K1: the event names' HMAC key, sealed under the current key.
    case nameKey = "store.name_key"
    /// SPEC K1, R8: during a rotation, the previous key sealed under the current one, or `StoreKeyCheck.plainMarker`
    /// while a plain store is being sealed. Deleted when the rotation ends.
    case previousKey = "store.previous_key"

    /// SPEC K1: a value sealed in a sealed store (the engine's values that identify the user).
    var isSealed: Bool { self == .userID }
}

/// The `meta` table: `MetaKey`'s values. Part of the caller's transaction.
struct MetaTable {
    let db: Database

    /// Whether the file has the table (a new or foreign file has none before the migration).
    static func exists(_ db: Database) throws(OutboxError) -> Bool {
        try db.int64("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'") == 1
    }

    func value(_ key: MetaKey) throws(OutboxError) -> String? {
        try db.string("SELECT value FROM meta WHERE key = ?", [.text(key.rawValue)])
    }

    /// Every value of a known key (reading a store without taking it over, `StoreInspector`).
    func all() throws(OutboxError) -> [MetaKey: String] {
        let select = try db.prepare("SELECT key, value FROM meta")
        var values: [MetaKey: String] = [:]
        while try select.step() {
            if let key = MetaKey(rawValue: select.string(at: 0)) { values[key] = select.string(at: 1) }
        }
        return values
    }

    /// A value's bytes as stored: a sealed value (SPEC K1) is a blob in the text column.
    func bytes(_ key: MetaKey) throws(OutboxError) -> [UInt8]? {
        let select = try db.cachedStatement("SELECT value FROM meta WHERE key = ?")
        defer { select.reset() }
        try select.bind(key.rawValue, at: 1)
        return try select.step() ? select.blob(at: 0) : nil
    }

    func set(_ key: MetaKey, bytes: [UInt8]) throws(OutboxError) {
        try db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                       [.text(key.rawValue), .blob(bytes)])
    }

    /// Sets `key`, or deletes it for nil.
    func set(_ key: MetaKey, _ value: String?) throws(OutboxError) {
        if let value {
            try db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                           [.text(key.rawValue), .text(value)])
        } else {
            try db.execute("DELETE FROM meta WHERE key = ?", [.text(key.rawValue)])
        }
    }

    /// `MetaKey.seqHigh` kept in a transaction that deletes logs through `highest` (nil: none), with the ledger's
    /// `nextSeq` (`LogStore.keepSeqHigh` says why this is enough).
    func keepSeqHigh(nextSeq: Int64, deletingThrough highest: Int64?) throws(OutboxError) {
        let top = nextSeq - 1
        guard let highest, highest >= top, top > 0 else { return }
        try raiseSeqHigh(to: top)
    }

    /// Raises `MetaKey.seqHigh` to `seq` (never lowers it).
    func raiseSeqHigh(to seq: Int64) throws(OutboxError) {
        let raise = try db.cachedStatement("""
            INSERT INTO meta (key, value) VALUES (?1, ?2)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value
            WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)
            """)
        try raise.bind(MetaKey.seqHigh.rawValue, at: 1)
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
