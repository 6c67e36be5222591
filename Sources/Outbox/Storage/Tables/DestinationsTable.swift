/// The `destinations` and `settled` rows of an engine with several destinations (SPEC D15–D18); their leases are
/// `LeasesTable`'s rows with a `dest`. Mirrored in memory by `LogStore.destinationBook`, which the store changes only
/// once the transaction that wrote these rows has committed.
struct DestinationsTable {
    let db: Database

    struct Row: Equatable {
        var id: Int64
        var name: String
        var wire: String?
        var disabledReason: String?
        var serverRejected: Int
    }

    func all() throws(OutboxError) -> [Row] {
        let select = try db.cachedStatement("SELECT id, name, wire, disabled_reason, server_rejected FROM destinations ORDER BY id")
        defer { select.reset() }
        var rows: [Row] = []
        while try select.step() {
            rows.append(Row(id: select.int64(at: 0), name: select.string(at: 1), wire: select.optionalString(at: 2),
                            disabledReason: select.optionalString(at: 3), serverRejected: select.int(at: 4)))
        }
        return rows
    }

    func insert(_ row: Row) throws(OutboxError) {
        try db.execute("INSERT INTO destinations (id, name, wire, disabled_reason, server_rejected) VALUES (?, ?, ?, ?, ?)", [
            .integer(row.id), .text(row.name), row.wire.map(SQLValue.text) ?? .null,
            row.disabledReason.map(SQLValue.text) ?? .null, .integer(Int64(row.serverRejected)),
        ])
    }

    /// Deletes a destination with everything it holds: its row, its settled stretches, leases and dead letters.
    func remove(id: Int64) throws(OutboxError) {
        try db.execute("DELETE FROM destinations WHERE id = ?", [.integer(id)])
        try db.execute("DELETE FROM settled WHERE dest = ?", [.integer(id)])
        try db.execute("DELETE FROM leases WHERE dest = ?", [.integer(id)])
        try db.execute("DELETE FROM dead_letters WHERE dest = ?", [.integer(id)])
    }

    /// Empties the tables of several destinations (the store goes back to one).
    func removeAll() throws(OutboxError) {
        try db.execute("DELETE FROM destinations")
        try db.execute("DELETE FROM settled")
        try db.execute("DELETE FROM leases")
    }

    func setWire(_ wire: String, id: Int64) throws(OutboxError) {
        try db.execute("UPDATE destinations SET wire = ? WHERE id = ? AND wire IS NOT ?", [.text(wire), .integer(id), .text(wire)])
    }

    func setDisabledReason(_ reason: String?, id: Int64) throws(OutboxError) {
        try db.execute("UPDATE destinations SET disabled_reason = ? WHERE id = ?", [reason.map(SQLValue.text) ?? .null, .integer(id)])
    }

    func addServerRejected(_ count: Int, id: Int64) throws(OutboxError) {
        try db.execute("UPDATE destinations SET server_rejected = server_rejected + ? WHERE id = ?", [.integer(Int64(count)), .integer(id)])
    }

    // MARK: settled

    /// Every destination's settled stretches.
    func settled() throws(OutboxError) -> [Int64: SeqStretches] {
        let select = try db.cachedStatement("SELECT dest, priority, first, last FROM settled")
        defer { select.reset() }
        var result: [Int64: SeqStretches] = [:]
        while try select.step() {
            let priority = Priority(rawValue: select.int(at: 1)) ?? .normal
            result[select.int64(at: 0), default: SeqStretches()].insert(select.int64(at: 2)...select.int64(at: 3), priority)
        }
        return result
    }

    func recordSettled(_ stretches: [LeaseStretch], dest: Int64) throws(OutboxError) {
        let insert = try db.cachedStatement("""
            INSERT INTO settled (dest, priority, first, last) VALUES (?, ?, ?, ?)
            ON CONFLICT (dest, priority, first) DO UPDATE SET last = max(last, excluded.last)
            """)
        for stretch in stretches {
            try insert.bind(dest, at: 1)
            try insert.bind(stretch.priority.rawValue, at: 2)
            try insert.bind(stretch.first, at: 3)
            try insert.bind(stretch.last, at: 4)
            try insert.run()
        }
    }

    /// Drops every destination's settled rows that meet `stretches` and no longer cover any stored log: their logs
    /// left the store, and seqs are never reused.
    func pruneSettled(inside stretches: [LeaseStretch]) throws(OutboxError) {
        for stretch in stretches {
            let prune = try db.cachedStatement(Self.pruneSettled[stretch.priority.rawValue])
            try prune.bind(stretch.first, at: 1)
            try prune.bind(stretch.last, at: 2)
            try prune.run()
        }
    }

    /// The priority is a literal in these statements, as in `LogsTable.deleteStretch`: a bound `priority = ?` is matched
    /// against the partial index `logs_critical` at its binding, so SQLite compiled the statement again at every step.
    private static let pruneSettled = Priority.allCases.sorted().map {
        """
        DELETE FROM settled WHERE priority = \($0.rawValue) AND first <= ?2 AND last >= ?1
        AND NOT EXISTS (SELECT 1 FROM logs WHERE logs.priority = \($0.rawValue) AND logs.seq BETWEEN settled.first AND settled.last)
        """
    }

    private static let countStretch = Priority.allCases.sorted().map {
        "SELECT count(*) FROM logs WHERE priority = \($0.rawValue) AND seq BETWEEN ? AND ?"
    }

    /// Logs of `priority` stored with seqs in `range`.
    func count(_ priority: Priority, in range: ClosedRange<Int64>) throws(OutboxError) -> Int {
        Int(try db.int64(Self.countStretch[priority.rawValue], [.integer(range.lowerBound), .integer(range.upperBound)]) ?? 0)
    }
}
