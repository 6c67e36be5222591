import Logging

/// SPEC K1: which keys a store file needs, read from its `meta` before anything is written, so that a wrong or
/// missing key leaves the file untouched (never the S7 move-aside).
enum StoreKeyCheck {
    /// `MetaKey.previousKey`'s value while a plain store is being sealed.
    static let plainMarker = Array("plain".utf8)

    /// The keys that open the store, or nil for a plain store (whatever `key` is: sealing a plain store is the
    /// open's next step, `LogStore.seal`). Throws `storeKeyInvalid` for a sealed store without `key`, or with
    /// another key.
    static func keys(_ db: Database, key: StoreKey?, path: String) throws(OutboxError) -> StoreKeys? {
        guard try MetaTable.exists(db) else { return nil }
        let meta = MetaTable(db: db)
        guard let storedID = try meta.value(.keyID) else { return nil }
        guard let key else {
            throw .storeKeyInvalid(path: path, reason: "the store is sealed (key id \(storedID)): give its key (storeKey, --store-key-file)")
        }
        guard key.idText == storedID else {
            throw .storeKeyInvalid(path: path, reason: "the key given (id \(key.idText)) is not the store's (key id \(storedID))")
        }
        let sealer = try StoreSealer(key)
        guard let sealedNameKey = try meta.bytes(.nameKey),
              let nameKey = sealedNameKey.withUnsafeBytes({ sealer.open($0, .meta(.nameKey)) }), nameKey.count == 32 else {
            throw .storeKeyInvalid(path: path, reason: "its event-name key does not open with this key (\(MetaKey.nameKey.rawValue) altered?)")
        }
        var previous: StoreKeys.Previous?
        if let stored = try meta.bytes(.previousKey) {
            if stored == plainMarker {
                previous = .plain
            } else {
                guard let bytes = stored.withUnsafeBytes({ sealer.open($0, .meta(.previousKey)) }),
                      let old = try? StoreKey(bytes: bytes) else {
                    throw .storeKeyInvalid(path: path, reason: "the previous key of its rotation does not open with this key")
                }
                previous = .sealed(try StoreSealer(old))
            }
        }
        return try StoreKeys(key: key, previous: previous, nameKey: nameKey)
    }
}

/// A key rotation's work on one connection (SPEC K1, R8): its start in `meta`, then the sealed tables (`SealedColumns`)
/// sealed again a step at a time, then its end. It holds the connection and where it is; the store runs each of its
/// transactions with room made (`LogStore.withRoom`) and replaces it with the connection (S7 recovery starts afresh:
/// a row tells by its key id which key opens it, so nothing is sealed twice).
struct KeyRotation {
    let db: Database
    /// The sealed tables, in the order a rotation goes through them.
    private var tableIndex = 0
    /// The last row key sealed again in the table at `tableIndex`.
    private var after: Int64 = 0
    /// Values that did not open under the store's keys, left as they are.
    private(set) var unreadable = 0

    init(db: Database) { self.db = db }

    static func tables(_ db: Database, keys: StoreKeys?) -> [any SealedColumns] {
        [LogsTable(db: db, keys: keys), DeadLettersTable(db: db, keys: keys), ContextsTable(db: db, keys: keys)]
    }

    /// The rotation's start, in the caller's transaction: `new`'s key id, the previous key (`old`, or the plain
    /// marker) and the name key sealed under it, the sealed meta values sealed again, and, for a plain store, the event
    /// names replaced by their hashes.
    func begin(from old: StoreKeys?, to new: StoreKeys) throws(OutboxError) {
        let meta = MetaTable(db: db)
        try meta.set(.keyID, new.key.idText)
        try meta.set(.previousKey, bytes: try old.map { old throws(OutboxError) in
            try new.seal(old.key.bytes, .meta(.previousKey))
        } ?? StoreKeyCheck.plainMarker)
        try meta.set(.nameKey, bytes: try new.seal(new.nameKey, .meta(.nameKey)))
        for name in MetaKey.allCases where name.isSealed {
            guard let stored = try meta.bytes(name) else { continue }
            let plain = old.map { $0.open(stored, .meta(name)) } ?? stored
            if let plain { try meta.set(name, bytes: try new.seal(plain, .meta(name))) }
        }
        if old == nil { try EventNamesTable(db: db, keys: nil).hashAll(with: new) }
    }

    /// Whether every sealed table was gone through.
    var tablesDone: Bool { tableIndex >= Self.tables(db, keys: nil).count }

    /// Up to `limit` rows of the current table sealed again, in the caller's transaction (`advance` moves on once it
    /// has committed).
    func step(_ keys: StoreKeys, limit: Int) throws(OutboxError) -> ResealStep {
        try Self.tables(db, keys: keys)[tableIndex].reseal(keys, after: after, limit: limit)
    }

    /// After a step committed: on to its last row, or to the next table when it read fewer rows than it could.
    mutating func advance(_ step: ResealStep, limit: Int) {
        unreadable += step.unreadable
        if step.rows == limit {
            after = step.last
        } else {
            tableIndex += 1
            after = 0
        }
    }

    /// The rotation's end, in the caller's transaction: the previous key deleted.
    func end() throws(OutboxError) {
        try MetaTable(db: db).set(.previousKey, nil)
    }
}

/// Sealing a store and rotating its key (SPEC K1, R8), on the store's thread: `KeyRotation` does the work, this runs its
/// transactions with room made. A rotation is crash-safe at every step: its start (the new key's id, the old key
/// sealed under the new one, the name key and the sealed meta values sealed again) is one transaction; each step seals
/// a few rows again in one more; a row tells by its key id which key opens it, so a rotation resumed after a kill
/// skips what was done.
extension LogStore {
    /// Rows sealed again per step: small enough that a step takes a fraction of a millisecond on the loop.
    static let rotationStepRows = 256

    /// Whether a rotation has rows left (the engine steps it on its loop).
    var rotationPending: Bool { keys?.previous != nil }

    /// SPEC K1: a plain store opened with a key is sealed now, to the end (a fresh one has only its meta to seal).
    func sealIfKeyed() throws(OutboxError) {
        // A plain store whose sealing a kill cut short still holds plaintext: freed pages are zeroed until it ends.
        if case .plain? = keys?.previous { try db.exec("PRAGMA secure_delete = ON") }
        guard let key = limits.key, keys == nil else { return }
        try seal(with: key)
    }

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
            let started = KeyRotation(db: db)
            try withRoom(bytes: 8 * pageSize) { () throws(OutboxError) in try started.begin(from: old, to: new) }
            keys = new
            rotation = started
            logger.info("sealing the store under a new key (SPEC K1)", metadata: [
                "outbox.store": "\(path)", "outbox.key_id": "\(key.idText)",
                "outbox.from": "\(old.map { "key \($0.key.idText)" } ?? "plain")",
            ])
        }
    }

    /// Seals up to `limit` more rows under the current key, in one transaction. Returns true when the rotation has
    /// ended (or none was running): the previous key is then deleted from `meta`, and a store that was plain is
    /// rebuilt (VACUUM) so that its free pages hold no plaintext.
    @discardableResult
    func rotateStep(limit: Int = LogStore.rotationStepRows) throws(OutboxError) -> Bool {
        try guarded { () throws(OutboxError) -> Bool in
            guard let keys, let previous = keys.previous else { return true }
            // A rotation begun by an earlier session (or before a recovery) goes on over this connection.
            var rotation = self.rotation ?? KeyRotation(db: db)
            defer { self.rotation = rotation }
            while !rotation.tablesDone {
                let step = try withRoom(bytes: limit * (StoreSealer.overhead + 16)) { () throws(OutboxError) -> ResealStep in
                    try rotation.step(keys, limit: limit)
                }
                rotation.advance(step, limit: limit)
                if step.rows == limit { return false }
            }
            try withRoom(bytes: 4 * pageSize) { () throws(OutboxError) in try rotation.end() }
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
}
