/// The `leases` table (SPEC C9): which seqs each batch in flight holds, as stretches. Mirrored in memory by
/// `StoreLedger.leases`, which the store changes only once the transaction that wrote these rows has committed.
struct LeasesTable {
    let db: Database

    /// Inserts lease stretches (part of the caller's transaction); `dest`: the destination holding them when the
    /// store serves several (SPEC D16), 0 for `default` and a store of one (the column's default).
    func record(_ stretches: [LeaseStretch], dest: Int64 = 0) throws(OutboxError) {
        let mark = try db.cachedStatement("INSERT INTO leases (batch, priority, first, last, dest) VALUES (?, ?, ?, ?, ?)")
        for stretch in stretches {
            try mark.bind(stretch.batch, at: 1)
            try mark.bind(stretch.priority.rawValue, at: 2)
            try mark.bind(stretch.first, at: 3)
            try mark.bind(stretch.last, at: 4)
            try mark.bind(dest, at: 5)
            try mark.run()
        }
    }

    func drop(batch: Int64) throws(OutboxError) {
        let drop = try db.cachedStatement("DELETE FROM leases WHERE batch = ?")
        try drop.bind(batch, at: 1)
        try drop.run()
    }

    /// Writes the stretches `Leases.cutting` left to each batch in place of its old ones.
    func rewrite(_ cut: [(batch: Int64, stretches: [LeaseStretch])], dest: Int64 = 0) throws(OutboxError) {
        for (batch, stretches) in cut {
            try drop(batch: batch)
            try record(stretches, dest: dest)
        }
    }

    /// C9, S6: at open, whatever was in flight when the last process stopped is sent again.
    func deleteAll() throws(OutboxError) {
        try db.execute("DELETE FROM leases")
    }
}
