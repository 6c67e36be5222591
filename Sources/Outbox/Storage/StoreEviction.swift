import Logging

/// Eviction carried out (SPEC S2, S3, S5): `EvictionPlanner`'s plan applied to the logs table, in the caller's
/// transaction. It needs of the store only the tables, the room (`DiskBudget`) and the ledger's figures, so the
/// store's writes and the opening's cap (`StoreOpening`) run the same code without sharing the store. What it evicted
/// is counted once the transaction has committed (`commit`).
struct StoreEviction {
    let logs: LogsTable
    let disk: DiskBudget
    /// The ledger as it is before the transaction: its row count (S5) and next seq (`MetaTable.keepSeqHigh`).
    let ledger: StoreLedger
    let maxLogCount: Int?

    init(db: Database, keys: StoreKeys?, disk: DiskBudget, ledger: StoreLedger, maxLogCount: Int?) {
        logs = LogsTable(db: db, keys: keys)
        self.disk = disk
        self.ledger = ledger
        self.maxLogCount = maxLogCount
    }

    struct Event {
        var priority: Priority
        var count: Int
        var inFlight: Int
        var bytes: Int
        var reason: String
    }

    struct RoomPlan {
        /// Positions in the candidate array rejected with `storageFull`.
        var rejected = Set<Int>()
        var evictions: [Event] = []
    }

    /// Evicts, inside the caller's transaction, what `EvictionPlanner` says must go for `candidates` plus
    /// `mandatoryBytes` to fit the budget and the count cap; returns the candidates to refuse and what was evicted
    /// (counted once the transaction commits: `commit`). `extraBytes` asks for more room after an SQLITE_FULL.
    /// `overflowMayEvictCritical` lets critical logs go for an overflow that predates the call.
    func makeRoom(for candidates: [EvictionPlanner.Candidate], mandatoryBytes: Int, extraBytes: Int,
                  overflowMayEvictCritical: Bool) throws(OutboxError) -> RoomPlan {
        let pages = try logs.db.pragma("page_count")
        let free = try logs.db.pragma("freelist_count")
        let pageSize = disk.pageSize
        let need = EvictionPlanner.Need(usedBytes: Int(pages - free) * pageSize, extraBytes: mandatoryBytes + extraBytes,
                                        budgetBytes: disk.budgetBytes, pageSize: pageSize, logCount: ledger.logCount,
                                        maxLogCount: maxLogCount, overflowMayEvictCritical: overflowMayEvictCritical)
        let table = logs
        let plan = try EvictionPlanner.plan(for: candidates, need) { (priority, bytes, count) throws(OutboxError) in
            try table.evictable(priority, bytes: bytes, count: count, pageSize: pageSize)
        }
        var room = RoomPlan(rejected: plan.rejected)
        for eviction in plan.evictions {
            room.evictions.append(try evict(eviction.rows, priority: eviction.priority, reason: plan.reason))
        }
        return room
    }

    private func evict(_ rows: [EvictionPlanner.Row], priority: Priority, reason: String) throws(OutboxError) -> Event {
        var event = Event(priority: priority, count: 0, inFlight: 0, bytes: 0, reason: reason)
        // Pending rows come first and are a prefix, in seq order, of the rows matching the scan's filter: one range
        // delete with the same filter removes exactly them.
        if let lastPending = rows.last(where: { !$0.inFlight }) {
            event.count += try logs.deletePending(priority, through: lastPending.seq)
        }
        let inFlight = rows.filter(\.inFlight)
        if !inFlight.isEmpty {
            let deleted = try logs.delete(seqs: inFlight.lazy.map(\.seq))
            event.count += deleted
            event.inFlight += deleted
        }
        try MetaTable(db: logs.db).keepSeqHigh(nextSeq: ledger.nextSeq, deletingThrough: rows.lazy.map(\.seq).max())
        event.bytes = rows.reduce(0) { $0 + $1.bytes }
        return event
    }

    /// Counts (`record`, the ledger's `.evicted`) and logs committed evictions (S2: "each eviction is counted and
    /// logged"). Returns how many.
    @discardableResult
    static func commit(_ events: [Event], reason: String?, logger: Logger,
                       record: (StoreLedger.Change) -> Void) -> Int {
        var total = 0
        for event in events where event.count > 0 {
            total += event.count
            logger.info("evicted the oldest logs to stay within the store's limits (SPEC S2/S5)", metadata: [
                "outbox.evicted": "\(event.count)",
                "outbox.priority": "\(event.priority == .critical ? "critical" : "normal")",
                "outbox.in_flight": "\(event.inFlight)",
                "outbox.bytes": "\(event.bytes)",
                "outbox.reason": "\(reason ?? event.reason)",
            ])
        }
        record(.evicted(count: total))
        return total
    }
}
