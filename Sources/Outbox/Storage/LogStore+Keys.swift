import Logging

/// SPEC K1: which keys a store file needs, read from its `meta` before anything is written, so that a wrong or
/// missing key leaves the file untouched (never the S7 move-aside).
enum StoreKeyCheck {
    /// The current key's id (`StoreKey.idText`); absent in a plain store.
    static let keyIDKey = "store.key_id"
    /// The event names' HMAC key, sealed under the current key.
    static let nameKeyKey = "store.name_key"
    /// During a rotation (R8): the previous key sealed under the current one, or `plainMarker` while a plain store
    /// is being sealed. Deleted when the rotation ends.
    static let previousKeyKey = "store.previous_key"
    static let plainMarker = Array("plain".utf8)

    /// The keys that open the store, or nil for a plain store (whatever `key` is: sealing a plain store is the
    /// open's next step, `LogStore.seal`). Throws `storeKeyInvalid` for a sealed store without `key`, or with
    /// another key.
    static func keys(_ db: Database, key: StoreKey?, path: String) throws(OutboxError) -> StoreKeys? {
        guard try db.int64("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'") == 1 else { return nil }
        let meta = MetaTable(db: db)
        guard let storedID = try meta.value(keyIDKey) else { return nil }
        guard let key else {
            throw .storeKeyInvalid(path: path, reason: "the store is sealed (key id \(storedID)): give its key (storeKey, --store-key-file)")
        }
        guard key.idText == storedID else {
            throw .storeKeyInvalid(path: path, reason: "the key given (id \(key.idText)) is not the store's (key id \(storedID))")
        }
        let sealer = try StoreSealer(key)
        guard let sealedNameKey = try meta.bytes(nameKeyKey),
              let nameKey = sealedNameKey.withUnsafeBytes({ sealer.open($0, .meta(nameKeyKey)) }), nameKey.count == 32 else {
            throw .storeKeyInvalid(path: path, reason: "its event-name key does not open with this key (\(nameKeyKey) altered?)")
        }
        var previous: StoreKeys.Previous?
        if let stored = try meta.bytes(previousKeyKey) {
            if stored == plainMarker {
                previous = .plain
            } else {
                guard let bytes = stored.withUnsafeBytes({ sealer.open($0, .meta(previousKeyKey)) }),
                      let old = try? StoreKey(bytes: bytes) else {
                    throw .storeKeyInvalid(path: path, reason: "the previous key of its rotation does not open with this key")
                }
                previous = .sealed(try StoreSealer(old))
            }
        }
        return try StoreKeys(key: key, previous: previous, nameKey: nameKey)
    }
}

/// Sealing a store and rotating its key (SPEC K1, R8), on the store's thread. A rotation is crash-safe at every step:
/// its start (the new key's id, the old key sealed under the new one, the name key and the sealed meta values sealed
/// again) is one transaction; each step seals a few rows again in one more; a row tells by its key id which key
/// opens it, so a rotation resumed after a kill skips what was done.
extension LogStore {
    /// Meta values sealed in a sealed store: the user id (A8).
    static let sealedMetaKeys: Set<String> = [MetaKey.userID]

    /// Rows sealed again per step: small enough that a step takes a fraction of a millisecond on the loop.
    static let rotationStepRows = 256

    /// Whether a rotation has rows left (the engine steps it on its loop).
    var rotationPending: Bool { keys?.previous != nil }

    /// Seals a plain store under `key`, to the end (the open of a plain store with a key): every row, then a VACUUM
    /// so that no plaintext stays in free pages.
    func seal(with key: StoreKey) throws(OutboxError) {
        try beginRotation(to: key)
        while try !rotateStep(limit: 4096) {}
    }

    /// Starts sealing the store under `key` (R8): a plain store becomes sealed, a sealed one is sealed again. Values
    /// written from now on are sealed under `key`; `rotateStep` seals the stored ones again. A rotation still running
    /// is finished first.
    func beginRotation(to key: StoreKey) throws(OutboxError) {
        try guarded { () throws(OutboxError) in
            if let keys, keys.key == key { return }
            if rotationPending { while try !rotateStep(limit: 4096) {} }
            let old = keys
            let nameKey = if let old { old.nameKey } else { try StoreKey.random().bytes }
            let new = try StoreKeys(key: key, previous: old.map { .sealed($0.current) } ?? .plain, nameKey: nameKey)
            // Deleted rows are overwritten with zeros from now on. While a plain store is sealed, what is deleted or
            // rewritten is plaintext: whole freed pages are zeroed too (ON) until the rotation ends (FAST after).
            try db.exec("PRAGMA secure_delete = \(old == nil ? "ON" : "FAST")")
            try withRoom(bytes: 8 * pageSize) { () throws(OutboxError) in
                let meta = metaTable
                try meta.set(StoreKeyCheck.keyIDKey, key.idText)
                try meta.set(StoreKeyCheck.previousKeyKey, bytes: try old.map { old throws(OutboxError) in
                    try new.seal(old.key.bytes, .meta(StoreKeyCheck.previousKeyKey))
                } ?? StoreKeyCheck.plainMarker)
                try meta.set(StoreKeyCheck.nameKeyKey, bytes: try new.seal(nameKey, .meta(StoreKeyCheck.nameKeyKey)))
                for name in Self.sealedMetaKeys {
                    guard let stored = try meta.bytes(name) else { continue }
                    let plain = old.map { $0.open(stored, .meta(name)) } ?? stored
                    if let plain { try meta.set(name, bytes: try new.seal(plain, .meta(name))) }
                }
                if old == nil { try EventNamesTable(db: db, keys: nil).hashAll(with: new) }
            }
            keys = new
            rotation = RotationCursor()
            logger.info("sealing the store under a new key (SPEC K1)", metadata: [
                "outbox.store": "\(path)", "outbox.key_id": "\(key.idText)",
                "outbox.from": "\(old.map { "key \($0.key.idText)" } ?? "plain")",
            ])
        }
    }

    /// Where a rotation is: the table (`RotationCursor.tables`) and the last row sealed again in it.
    struct RotationCursor {
        static let tables: [(name: String, key: String)] = [("logs", "seq"), ("dead_letters", "seq"), ("contexts", "id")]
        var table = 0
        var after: Int64 = 0
        var unreadable = 0
    }

    /// Seals up to `limit` more rows under the current key, in one transaction. Returns true when the rotation has
    /// ended (or none was running): the previous key is then deleted from `meta`, and a store that was plain is
    /// rebuilt (VACUUM) so that its free pages hold no plaintext.
    @discardableResult
    func rotateStep(limit: Int = LogStore.rotationStepRows) throws(OutboxError) -> Bool {
        try guarded { () throws(OutboxError) -> Bool in
            guard let keys, let previous = keys.previous else { return true }
            while rotation.table < RotationCursor.tables.count {
                let (rows, last, unreadable) = try withRoom(bytes: limit * (StoreSealer.overhead + 16)) {
                    () throws(OutboxError) -> (Int, Int64, Int) in try resealRows(keys, limit: limit)
                }
                rotation.unreadable += unreadable
                if rows == limit {
                    rotation.after = last
                    return false
                }
                rotation.table += 1
                rotation.after = 0
            }
            try withRoom(bytes: 4 * pageSize) { () throws(OutboxError) in
                try metaTable.set(StoreKeyCheck.previousKeyKey, nil)
            }
            keys.rotationEnded()
            try db.exec("PRAGMA secure_delete = FAST")
            if rotation.unreadable > 0 {
                logger.error("rows that did not open under the store's keys were left as they are (SPEC K1): they cannot be sent", metadata: [
                    "outbox.store": "\(path)", "outbox.unreadable": "\(rotation.unreadable)",
                ])
            }
            if case .plain = previous {
                // As after an opt-out: the rebuild only scrubs free pages; its failure (a full disk) is reported.
                do throws(OutboxError) {
                    try db.exec("VACUUM")
                    try db.checkpoint(.truncate)
                } catch {
                    logger.warning("could not rebuild the store after sealing it; plaintext may remain in free pages until reused",
                                   metadata: ["outbox.error": "\(error)"])
                }
            }
            logger.info("the store is sealed under its key (SPEC K1)", metadata: [
                "outbox.store": "\(path)", "outbox.key_id": "\(keys.key.idText)",
            ])
            return true
        }
    }

    /// One step over the cursor's table, in the caller's transaction: returns the rows read, the last key read and
    /// how many did not open.
    private func resealRows(_ keys: StoreKeys, limit: Int) throws(OutboxError) -> (Int, Int64, Int) {
        let table = RotationCursor.tables[rotation.table]
        let columns: [(name: String, slot: (UUIDBytes, Int64) -> SealSlot)]
        let idColumn: String
        switch table.name {
        case "logs":
            idColumn = "id"
            columns = [("payload", { id, _ in .log(id) })]
        case "dead_letters":
            idColumn = "id"
            columns = [("payload", { id, _ in .log(id) }), ("reason", { id, _ in .reason(id) })]
        default:
            idColumn = "NULL"
            columns = [("json", { _, row in .context(row) })]
        }
        let select = try db.cachedStatement("""
            SELECT \(table.key), \(idColumn), \(columns.map(\.name).joined(separator: ", ")) FROM \(table.name)
            WHERE \(table.key) > ?1 ORDER BY \(table.key) LIMIT ?2
            """)
        defer { select.reset() }
        try select.bind(rotation.after, at: 1)
        try select.bind(Int64(limit), at: 2)
        var rows = 0
        var last = rotation.after
        var unreadable = 0
        var updates: [(row: Int64, column: String, value: [UInt8])] = []
        while try select.step() {
            rows += 1
            last = select.int64(at: 0)
            let id = table.name == "contexts" ? UUIDBytes(high: 0, low: 0) : LogsTable.readID(select, column: 1)
            for (offset, column) in columns.enumerated() {
                let index = Int32(2 + offset)
                let slot = column.slot(id, last)
                let (current, plain) = select.withBlob(at: index) { stored -> (Bool, [UInt8]?) in
                    keys.isCurrent(stored) ? (true, nil) : (false, keys.open(stored, slot))
                }
                if current { continue }
                guard let plain else {
                    unreadable += 1
                    continue
                }
                updates.append((last, column.name, try keys.seal(plain, slot)))
            }
        }
        select.reset()
        for update in updates {
            let write = try db.cachedStatement("UPDATE \(table.name) SET \(update.column) = ?1 WHERE \(table.key) = ?2")
            try write.bind(update.value, at: 1)
            try write.bind(update.row, at: 2)
            try write.run()
        }
        return (rows, last, unreadable)
    }
}
