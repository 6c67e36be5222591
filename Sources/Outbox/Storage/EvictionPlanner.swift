/// SPEC S2, S3, S5's eviction order as a pure plan, tested without SQLite: given what an append (or a claim, or a
/// requeue) needs and the rows that could go, which rows to evict and which of the new logs to refuse. The store
/// reads the numbers and the rows (`LogsTable.evictable`) and carries the plan out in the same transaction.
enum EvictionPlanner {
    /// A log an append wants to store.
    struct Candidate: Sendable, Equatable {
        /// Index in the caller's array.
        let index: Int
        /// Its estimated row size (`DiskBudget.estimatedRowBytes`).
        let bytes: Int
        let priority: Priority
    }

    /// What must fit.
    struct Need: Sendable, Equatable {
        /// What the database holds now, free pages excluded.
        var usedBytes: Int
        /// Bytes that must fit besides the candidates (event names), and more asked for after an SQLITE_FULL.
        var extraBytes = 0
        /// `DiskBudget.budgetBytes`.
        var budgetBytes: Int
        var pageSize: Int
        var logCount: Int
        var maxLogCount: Int?
        /// Lets stored critical logs go for an overflow that predates the call (the cap was lowered, a claim at a
        /// full cap), not only for the candidates' critical logs.
        var overflowMayEvictCritical = false
    }

    /// A stored log that eviction may take.
    struct Row: Sendable, Equatable {
        let seq: Int64
        let bytes: Int
        let inFlight: Bool
    }

    struct Plan: Sendable, Equatable {
        /// Positions in the candidate array refused with `storageFull`.
        var rejected = Set<Int>()
        /// Rows to delete, by priority, in eviction order: normal before critical, pending before in flight.
        var evictions: [Eviction] = []
        var reason = ""
    }

    struct Eviction: Sendable, Equatable {
        var priority: Priority
        var rows: [Row]
    }

    /// The rows of one priority that could go, in eviction order, until `bytes` and `count` are covered (or all).
    typealias Evictable = (_ priority: Priority, _ bytes: Int, _ count: Int) throws(OutboxError) -> [Row]

    /// Evicts so that `candidates` plus `need.extraBytes` fit the budget and the count cap, in SPEC order:
    /// 1. stored normal logs, oldest first (pending before in flight);
    /// 2. the candidates' normal logs, earliest first, are refused: the rest is critical;
    /// 3. stored critical logs, oldest first — only for the candidates' critical logs (S3);
    /// 4. the candidates' earliest critical logs are refused when even that is not enough.
    /// This is what inserting the logs one by one would leave, without the churn.
    static func plan(for candidates: [Candidate], _ need: Need, evictable: Evictable) throws(OutboxError) -> Plan {
        var plan = Plan()
        var needBytes = need.extraBytes
        for candidate in candidates { needBytes += candidate.bytes }
        var byteDeficit = need.usedBytes + needBytes - need.budgetBytes
        var countDeficit = need.maxLogCount.map { need.logCount + candidates.count - $0 } ?? 0
        guard byteDeficit > 0 || countDeficit > 0 else { return plan }
        plan.reason = byteDeficit > 0 ? (countDeficit > 0 ? "storage and count caps" : "storage cap") : "count cap"

        // 1. Stored normal logs. Evicting old rows frees whole pages only where they empty out, so a little more than
        // the estimate is taken here (not from critical logs, nor by refusing): it keeps SQLITE_FULL retries rare.
        let slack = byteDeficit > 0 ? needBytes / 16 + need.pageSize : 0
        let normalRows = try evictable(.normal, byteDeficit + slack, countDeficit)
        if !normalRows.isEmpty {
            plan.evictions.append(Eviction(priority: .normal, rows: normalRows))
            byteDeficit -= normalRows.reduce(0) { $0 + $1.bytes }
            countDeficit -= normalRows.count
        }

        // 2. The candidates' normal logs, earliest first.
        for position in candidates.indices where candidates[position].priority == .normal {
            guard byteDeficit > 0 || countDeficit > 0 else { break }
            plan.rejected.insert(position)
            byteDeficit -= candidates[position].bytes
            countDeficit -= 1
        }
        guard byteDeficit > 0 || countDeficit > 0 else { return plan }

        // 3 and 4. Critical logs make room only for critical logs (S3), never for normal ones.
        let criticalPositions = candidates.indices.filter { candidates[$0].priority == .critical }
        guard !criticalPositions.isEmpty || need.overflowMayEvictCritical else { return plan }
        let criticalRows = try evictable(.critical, byteDeficit, countDeficit)
        let evictableBytes = criticalRows.reduce(0) { $0 + $1.bytes }
        for position in criticalPositions {
            guard byteDeficit > evictableBytes || countDeficit > criticalRows.count else { break }
            plan.rejected.insert(position)
            byteDeficit -= candidates[position].bytes
            countDeficit -= 1
        }
        var take = 0
        var freedBytes = 0
        while take < criticalRows.count && (freedBytes < byteDeficit || take < countDeficit) {
            freedBytes += criticalRows[take].bytes
            take += 1
        }
        if take > 0 { plan.evictions.append(Eviction(priority: .critical, rows: Array(criticalRows[..<take]))) }
        return plan
    }
}
