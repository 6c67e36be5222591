/// Small durable state beside the logs: meta values (T6 enabled flag, A8 ids…), event names (T4), device
/// contexts (A10). The statements are the tables' (MetaTable.swift); this is the store's guarded, roomy API.
extension LogStore {
    /// A meta value; in a sealed store (SPEC K1) the values of sealed keys (`MetaKey.isSealed`) are opened (nil when
    /// one does not).
    func meta(_ key: MetaKey) throws(OutboxError) -> String? {
        try guarded { () throws(OutboxError) -> String? in
            guard let keys, key.isSealed else { return try metaTable.value(key) }
            return try metaTable.bytes(key).flatMap { keys.open($0, .meta(key)) }.map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// Sets (or with nil, removes) a meta value, durably; sealed in a sealed store for sealed keys (`MetaKey.isSealed`).
    func setMeta(_ key: MetaKey, _ value: String?) throws(OutboxError) {
        try guarded { () throws(OutboxError) in
            try withRoom(bytes: key.rawValue.utf8.count + (value?.utf8.count ?? 0) + 64) { () throws(OutboxError) in
                if let keys, let value, key.isSealed {
                    try metaTable.set(key, bytes: try keys.seal(Array(value.utf8), .meta(key)))
                } else {
                    try metaTable.set(key, value)
                }
            }
        }
    }

    /// Keeps `MetaKey.seqHigh` (SPEC S7: what the commit mark is compared with) in a transaction that deletes logs, once,
    /// with the highest seq it deletes or may delete; nil when it deletes none. Only a delete that takes the highest
    /// row can lower `max(seq)`, and that row is `nextSeq - 1` (set once each append has committed) unless an
    /// earlier delete took it and recorded it already: a delete below it costs one comparison, and one that takes
    /// it records it in the same transaction, so the database and its record cannot disagree after a crash. Run per
    /// transaction, not per deleted row as the connection-local trigger that did this before was.
    func keepSeqHigh(deletingThrough highest: Int64?) throws(OutboxError) {
        try metaTable.keepSeqHigh(nextSeq: ledger.nextSeq, deletingThrough: highest)
    }

    /// Every event name ever stored (SPEC T4).
    func eventNames() throws(OutboxError) -> Set<String> {
        try guarded { () throws(OutboxError) -> Set<String> in try eventNamesTable.all() }
    }

    /// Stores a device context version unless it equals the latest one; returns its id (SPEC A10).
    func saveContext(json: [UInt8]) throws(OutboxError) -> Int64 {
        try guarded { () throws(OutboxError) -> Int64 in
            if let latest = try contextsTable.latest(), latest.json == json { return latest.id }
            return try withRoom(bytes: json.count + 64) { () throws(OutboxError) -> Int64 in
                try contextsTable.insert(json: json)
            }
        }
    }

    func context(id: Int64) throws(OutboxError) -> [UInt8]? {
        try guarded { () throws(OutboxError) -> [UInt8]? in try contextsTable.json(id: id) }
    }

    func latestContext() throws(OutboxError) -> (id: Int64, json: [UInt8])? {
        try guarded { () throws(OutboxError) in try contextsTable.latest() }
    }
}
