/// SPEC K1, R8: a table whose columns a sealed store seals, as a key rotation reads and rewrites it: the table says
/// which columns and under which slot (`SealSlot`), and this seals them again a few rows at a time, in key order, so
/// that a rotation resumed after a kill goes on where it was (a row tells by its key id which key opens it).
protocol SealedColumns {
    var db: Database { get }
    /// The table's name, its integer key (the rotation's cursor) and the column holding the log's id (nil: none).
    static var sealedTable: (name: String, rowKey: String, idColumn: String?) { get }
    /// Each sealed column and the slot of its value, from the row's log id and key.
    static var sealedColumns: [(name: String, slot: (UUIDBytes, Int64) -> SealSlot)] { get }
}

/// One step of a rotation over a table: the rows read, the last key read, and the values that did not open.
struct ResealStep: Equatable {
    var rows = 0
    var last: Int64
    var unreadable = 0
}

extension SealedColumns {
    /// Seals again, under `keys`' current key, the values of up to `limit` rows after `after`, in the caller's
    /// transaction. A value already under the current key is left as it is; one that does not open is left and counted.
    func reseal(_ keys: StoreKeys, after: Int64, limit: Int) throws(OutboxError) -> ResealStep {
        let table = Self.sealedTable, columns = Self.sealedColumns
        let select = try db.cachedStatement("""
            SELECT \(table.rowKey), \(table.idColumn ?? "NULL"), \(columns.map(\.name).joined(separator: ", ")) FROM \(table.name)
            WHERE \(table.rowKey) > ?1 ORDER BY \(table.rowKey) LIMIT ?2
            """)
        defer { select.reset() }
        try select.bind(after, at: 1)
        try select.bind(Int64(limit), at: 2)
        var step = ResealStep(last: after)
        var updates: [(row: Int64, column: String, value: [UInt8])] = []
        while try select.step() {
            step.rows += 1
            step.last = select.int64(at: 0)
            let id = table.idColumn == nil ? UUIDBytes(high: 0, low: 0) : LogsTable.readID(select, column: 1)
            for (offset, column) in columns.enumerated() {
                let slot = column.slot(id, step.last)
                let (current, plain) = select.withBlob(at: Int32(2 + offset)) { stored -> (Bool, [UInt8]?) in
                    keys.isCurrent(stored) ? (true, nil) : (false, keys.open(stored, slot))
                }
                if current { continue }
                guard let plain else {
                    step.unreadable += 1
                    continue
                }
                updates.append((step.last, column.name, try keys.seal(plain, slot)))
            }
        }
        select.reset()
        for update in updates {
            let write = try db.cachedStatement("UPDATE \(table.name) SET \(update.column) = ?1 WHERE \(table.rowKey) = ?2")
            try write.bind(update.value, at: 1)
            try write.bind(update.row, at: 2)
            try write.run()
        }
        return step
    }
}

extension LogsTable: SealedColumns {
    static var sealedTable: (name: String, rowKey: String, idColumn: String?) { ("logs", "seq", "id") }
    static var sealedColumns: [(name: String, slot: (UUIDBytes, Int64) -> SealSlot)] { [("payload", { id, _ in .log(id) })] }
}

extension DeadLettersTable: SealedColumns {
    static var sealedTable: (name: String, rowKey: String, idColumn: String?) { ("dead_letters", "seq", "id") }
    static var sealedColumns: [(name: String, slot: (UUIDBytes, Int64) -> SealSlot)] { [
        ("payload", { id, _ in .log(id) }), ("reason", { id, _ in .reason(id) }),
    ] }
}

extension ContextsTable: SealedColumns {
    static var sealedTable: (name: String, rowKey: String, idColumn: String?) { ("contexts", "id", nil) }
    static var sealedColumns: [(name: String, slot: (UUIDBytes, Int64) -> SealSlot)] { [("json", { _, row in .context(row) })] }
}
