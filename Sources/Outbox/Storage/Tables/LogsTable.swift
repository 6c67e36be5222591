/// The `logs` table (SPEC S1, C4, C9): every statement that reads or writes it. A value over the store's connection,
/// made where it is used (`LogStore.logsTable`); it keeps no state, and runs in the caller's transaction. A new
/// statement on logs goes here; the counts it changes go to `StoreLedger`.
///
/// With `keys` (SPEC K1) the payload is sealed as it is written and opened as it is read: what goes in and out of
/// this type is always plaintext. The other columns (seq, priority, times, boot, context version, the log's random id)
/// stay plain: the claim, eviction and expiry filter on them.
struct LogsTable {
    let db: Database
    let keys: StoreKeys?

    static let insertSQL = """
        INSERT INTO logs (seq, priority, wall_ms, mono_ns, boot, context, id, payload)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Columns read into a `StoredLog`, in `readLog` order.
    static let columns = "seq, priority, wall_ms, mono_ns, boot, context, id, payload"

    /// Whether the log `logs.seq` (of `priority`) lies in one of that priority's lease stretches.
    private static func leased(_ priority: Priority) -> String {
        """
        EXISTS (SELECT 1 FROM leases WHERE leases.priority = \(priority.rawValue)
                AND logs.seq BETWEEN leases.first AND leases.last)
        """
    }

    // The priority is a literal, not a parameter: only then can the planner prove that `logs_critical` applies (a
    // partial index is used when the WHERE clause implies the index's own).

    /// The claim's scan: every log of a priority from a seq on, in seq order. Which of them are claimable (not leased,
    /// due) the claim decides row by row, since it must know where it stepped over one (`LeaseStretch`).
    /// `next_attempt_ms` follows the `columns`. Indexed by `Priority.rawValue`: built once, since the claim looks its
    /// statement up by this text for every batch.
    static let claimScan = Priority.allCases.sorted().map { priority in
        """
        SELECT \(columns), next_attempt_ms FROM logs
        WHERE priority = \(priority.rawValue) AND seq >= ?1
        ORDER BY seq
        """
    }

    /// The logs of one lease stretch of a priority, `?1` through `?2`: deleted when delivered, given a retry time
    /// (`?3`) when released. Indexed by `Priority.rawValue`. The priority is a literal here too, for another reason:
    /// with `priority = ?`, SQLite's planner matches the partial index `logs_critical` against the value bound at the
    /// time, so each new binding expired the statement and SQLite compiled it again at its next step
    /// (`SQLITE_STMTSTATUS_REPREPARE`) — a full compile once per delivered batch.
    static let deleteStretch = Priority.allCases.sorted().map {
        "DELETE FROM logs WHERE priority = \($0.rawValue) AND seq BETWEEN ?1 AND ?2"
    }

    static let releaseStretch = Priority.allCases.sorted().map {
        "UPDATE logs SET next_attempt_ms = ?3 WHERE priority = \($0.rawValue) AND seq BETWEEN ?1 AND ?2"
    }

    static func evictablePending(_ priority: Priority) -> String {
        """
        SELECT seq, length(payload) FROM logs
        WHERE priority = \(priority.rawValue) AND NOT \(leased(priority)) ORDER BY seq
        """
    }

    // The in-flight rows are few (at most a few batches): read through the leases.
    static func evictableInFlight(_ priority: Priority) -> String {
        """
        SELECT logs.seq, length(logs.payload) FROM leases
        JOIN logs ON logs.seq BETWEEN leases.first AND leases.last AND logs.priority = leases.priority
        WHERE leases.priority = \(priority.rawValue) ORDER BY logs.seq
        """
    }

    static func deletePendingThrough(_ priority: Priority) -> String {
        "DELETE FROM logs WHERE priority = \(priority.rawValue) AND seq <= ? AND NOT \(leased(priority))"
    }

    /// In-flight logs, and how many of them are critical.
    static let countInFlight = """
        SELECT count(*), coalesce(sum(logs.priority = 1), 0) FROM leases
        JOIN logs ON logs.seq BETWEEN leases.first AND leases.last AND logs.priority = leases.priority
        """

    /// `countInFlight` counting each log once, however many destinations' leases hold it (SPEC D18).
    static let countInFlightOnce = """
        SELECT count(*), coalesce(sum(logs.priority = 1), 0) FROM logs WHERE EXISTS (SELECT 1 FROM leases
        WHERE logs.seq BETWEEN leases.first AND leases.last AND logs.priority = leases.priority)
        """

    // MARK: Writing

    /// Inserts `logs[i]` for each `i` of `indices`, in that order, with seqs from `firstSeq` on; returns the seq after
    /// the last. In a sealed store the payloads are sealed a run at a time (`StoreSealer.sealAhead`) before the run is
    /// inserted — but for those a caller sealed under the current key already (`NewLog.sealedUnder`), which go in as
    /// they are. One sealed under another key (kept for a retry while a rotation began) is opened and sealed again.
    func insert(_ logs: [NewLog], at indices: [Int], firstSeq: Int64) throws(OutboxError) -> Int64 {
        let statement = try db.cachedStatement(Self.insertSQL)
        let currentKeyID = keys?.current.keyID
        var seq = firstSeq
        var start = 0
        var toSeal: [Int] = []
        while start < indices.count {
            let run = indices[start..<min(indices.count, start + StoreSealer.aheadLimit)]
            var sealed: StoreSealer.SealedRun?
            if let keys {
                toSeal.removeAll(keepingCapacity: true)
                for index in run where logs[index].sealedUnder == nil { toSeal.append(index) }
                if !toSeal.isEmpty { sealed = try keys.current.sealAhead(logs, at: toSeal[...]) }
            }
            var sealedOffset = 0
            for index in run {
                try bindColumns(of: logs[index], seq: seq, to: statement)
                let sealedUnder = logs[index].sealedUnder
                if sealedUnder == nil, let sealed {
                    try statement.bind(bytes: sealed[sealedOffset], at: 8)
                    sealedOffset += 1
                } else if sealedUnder == nil || sealedUnder == currentKeyID {
                    try statement.bind(logs[index].payload, at: 8)
                } else {
                    try statement.bind(try resealed(logs[index]), at: 8)
                }
                try statement.step()
                statement.reset()
                seq += 1
            }
            start = run.endIndex
        }
        return seq
    }

    /// A caller's sealed payload under the current key, when it was sealed under another that the store still holds.
    private func resealed(_ log: NewLog) throws(OutboxError) -> [UInt8] {
        guard let keys, let plain = keys.open(log.payload, .log(log.id)) else {
            throw .storage(code: 1, message: "a log sealed under a key this store does not hold cannot be stored")
        }
        return try keys.seal(plain, .log(log.id))
    }

    /// Binds every column of `log` but its payload (8).
    private func bindColumns(of log: NewLog, seq: Int64, to insert: Statement) throws(OutboxError) {
        try insert.bind(seq, at: 1)
        try insert.bind(Int64(log.priority.rawValue), at: 2)
        try insert.bind(log.wallMs, at: 3)
        try insert.bind(log.monoNs, at: 4)
        try insert.bind(log.boot, at: 5)
        try insert.bind(log.context, at: 6)
        // Canonical UUID byte order, so the blob reads the same from any tool.
        try insert.bind(bytesOf: (log.id.high.bigEndian, log.id.low.bigEndian), at: 7)
    }

    /// Deletes logs by seq; returns how many were there.
    func delete(seqs: some Sequence<Int64>) throws(OutboxError) -> Int {
        let delete = try db.cachedStatement("DELETE FROM logs WHERE seq = ?")
        var deleted = 0
        for seq in seqs {
            try delete.bind(seq, at: 1)
            try delete.run()
            deleted += db.changes
        }
        return deleted
    }

    /// Gives logs a retry time by seq; returns how many were there.
    func setNextAttempt(_ nextAttemptMs: Int64, seqs: [Int64]) throws(OutboxError) -> Int {
        let update = try db.cachedStatement("UPDATE logs SET next_attempt_ms = ? WHERE seq = ?")
        var changed = 0
        for seq in seqs {
            try update.bind(nextAttemptMs, at: 1)
            try update.bind(seq, at: 2)
            try update.run()
            changed += db.changes
        }
        return changed
    }

    /// Deletes the rows of lease stretches (a delivered batch); returns how many.
    func delete(stretches: [LeaseStretch]) throws(OutboxError) -> Int {
        try run(Self.deleteStretch, over: stretches)
    }

    /// Gives the rows of lease stretches a retry time (a released batch); returns how many.
    func release(stretches: [LeaseStretch], nextAttemptMs: Int64) throws(OutboxError) -> Int {
        try run(Self.releaseStretch, over: stretches) { (update: Statement) throws(OutboxError) in
            try update.bind(nextAttemptMs, at: 3)
        }
    }

    /// Runs, for each stretch, the statement `sql[priority]` with the stretch's first and last seqs as `?1` and `?2`
    /// (and whatever `bind` adds). Returns the rows changed.
    private func run(_ sql: [String], over stretches: [LeaseStretch],
                     bind: (Statement) throws(OutboxError) -> Void = { _ in }) throws(OutboxError) -> Int {
        var changed = 0
        for stretch in stretches {
            let statement = try db.cachedStatement(sql[stretch.priority.rawValue])
            try bind(statement)
            try statement.bind(stretch.first, at: 1)
            try statement.bind(stretch.last, at: 2)
            try statement.run()
            changed += db.changes
        }
        return changed
    }

    /// SPEC S4: deletes the logs of this boot older than `monoCutoff` on CLOCK_BOOTTIME, and those of earlier boots
    /// older than `wallCutoff`. No index on either column (it would cost every insert): the store runs this only when
    /// its bounds say something may have expired.
    func deleteExpired(boot: Int64, monoCutoff: Int64, wallCutoff: Int64) throws(OutboxError) -> Int {
        try db.execute("DELETE FROM logs WHERE CASE WHEN boot = ?1 THEN mono_ns < ?2 ELSE wall_ms < ?3 END",
                       [.integer(boot), .integer(monoCutoff), .integer(wallCutoff)])
        return db.changes
    }

    /// Deletes the pending logs of a priority up to `seq` (eviction's first step); returns how many.
    func deletePending(_ priority: Priority, through seq: Int64) throws(OutboxError) -> Int {
        try db.execute(Self.deletePendingThrough(priority), [.integer(seq)])
        return db.changes
    }

    func deleteAll() throws(OutboxError) -> Int {
        try db.execute("DELETE FROM logs")
        return db.changes
    }

    /// C9, S6 at open: every row claimable at once (retry times were the last process's).
    func clearRetryTimes() throws(OutboxError) {
        try db.execute("UPDATE logs SET next_attempt_ms = 0 WHERE next_attempt_ms <> 0")
    }

    // MARK: Reading

    /// The claim's walk over one priority from `floor`: appends to `logs` the rows not covered by `leased` and due by
    /// `nowMs`, until `limit`, and returns the stretches of consecutive rows taken, under `batchID`. A sealed row that
    /// does not open (SPEC K1: altered on disk) is not taken: its seq goes to `unreadable`, for the caller to delete.
    func claim(_ priority: Priority, from floor: Int64, leased: [LeaseStretch], limit: Int, nowMs: Int64,
               batchID: Int64, into logs: inout [StoredLog], unreadable: inout [Int64]) throws(OutboxError) -> [LeaseStretch] {
        let scan = try db.cachedStatement(Self.claimScan[priority.rawValue])
        defer { scan.reset() }
        try scan.bind(floor, at: 1)
        var leased = LeaseCursor(leased)
        var stretches: [LeaseStretch] = []
        var open: LeaseStretch?
        while logs.count < limit, try scan.step() {
            let seq = scan.int64(at: 0)
            // A log that cannot be taken ends the stretch: the next one taken starts another.
            if leased.covers(seq) || scan.int64(at: 8) > nowMs {
                if let stretch = open { stretches.append(stretch) }
                open = nil
                continue
            }
            guard let log = readLog(scan) else {
                unreadable.append(seq)
                if let stretch = open { stretches.append(stretch) }
                open = nil
                continue
            }
            logs.append(log)
            if open == nil {
                open = LeaseStretch(batch: batchID, priority: priority, first: seq, last: seq)
            } else {
                open?.last = seq
            }
        }
        if let stretch = open { stretches.append(stretch) }
        return stretches
    }

    /// The rows of one priority eviction may take, in eviction order (pending before in flight), until `bytes` and
    /// `count` are covered (or all).
    func evictable(_ priority: Priority, bytes: Int, count: Int, pageSize: Int) throws(OutboxError) -> [EvictionPlanner.Row] {
        var rows: [EvictionPlanner.Row] = []
        var coveredBytes = 0
        for inFlight in [false, true] {
            guard coveredBytes < bytes || rows.count < count else { break }
            let scan = try db.cachedStatement(inFlight ? Self.evictableInFlight(priority) : Self.evictablePending(priority))
            defer { scan.reset() }
            while coveredBytes < bytes || rows.count < count, try scan.step() {
                let size = DiskBudget.estimatedRowBytes(payload: scan.int(at: 1), pageSize: pageSize)
                rows.append(EvictionPlanner.Row(seq: scan.int64(at: 0), bytes: size, inFlight: inFlight))
                coveredBytes += size
            }
        }
        return rows
    }

    /// What a dead-lettering moves: the log's priority, capture time, id and payload (nil when the row is gone). A
    /// sealed payload that does not open moves as it is: the letter then reads as unreadable too.
    func letterFields(seq: Int64) throws(OutboxError) -> (priority: Int64, wallMs: Int64, id: UUIDBytes, payload: [UInt8])? {
        let select = try db.cachedStatement("SELECT priority, wall_ms, id, payload FROM logs WHERE seq = ?")
        defer { select.reset() }
        try select.bind(seq, at: 1)
        guard try select.step() else { return nil }
        let id = Self.readID(select, column: 2)
        let payload = keys.flatMap { keys in select.withBlob(at: 3) { keys.open($0, .log(id)) } } ?? select.blob(at: 3)
        return (select.int64(at: 0), select.int64(at: 1), id, payload)
    }

    /// Row count, highest seq, and the age bounds (SPEC S4) of the logs: what the ledger starts from at open.
    func openingCounts(boot: Int64) throws(OutboxError) -> (count: Int, highestSeq: Int64, bound: ExpiryBound) {
        let scan = try db.prepare("""
            SELECT count(*), max(seq), min(CASE WHEN boot != ?1 THEN wall_ms END), min(CASE WHEN boot = ?1 THEN mono_ns END)
            FROM logs
            """)
        try scan.bind(boot, at: 1)
        guard try scan.step() else { return (0, 0, ExpiryBound()) }
        return (scan.int(at: 0), scan.optionalInt64(at: 1) ?? 0,
                ExpiryBound(otherBootWallMs: scan.optionalInt64(at: 2), thisBootMonoNs: scan.optionalInt64(at: 3)))
    }

    func expiryBound(boot: Int64) throws(OutboxError) -> ExpiryBound {
        ExpiryBound(otherBootWallMs: try db.int64("SELECT min(wall_ms) FROM logs WHERE boot != ?", [.integer(boot)]),
                    thisBootMonoNs: try db.int64("SELECT min(mono_ns) FROM logs WHERE boot = ?", [.integer(boot)]))
    }

    func highestSeq() throws(OutboxError) -> Int64 { try db.int64("SELECT max(seq) FROM logs") ?? 0 }

    /// Every row (`count(*)` reads every page: inspection, not the engine, which keeps the count in its ledger).
    func count() throws(OutboxError) -> Int { Int(try db.int64("SELECT count(*) FROM logs") ?? 0) }

    /// The oldest wall-clock capture time stored (inspection: reads every page).
    func oldestWallMs() throws(OutboxError) -> Int64? { try db.int64("SELECT min(wall_ms) FROM logs") }

    /// Splits `total` stored logs into pending normal, pending critical and in flight: the critical logs are counted
    /// through their index, the in-flight ones by `inFlightSQL` (count, critical count; an older schema's differs).
    func splitByState(total: Int, inFlightSQL: String = countInFlight)
        throws(OutboxError) -> (pendingNormal: Int, pendingCritical: Int, inFlight: Int) {
        let critical = Int(try db.int64("SELECT count(*) FROM logs WHERE priority = 1") ?? 0)
        let inFlight = try db.cachedStatement(inFlightSQL)
        defer { inFlight.reset() }
        var inFlightTotal = 0
        var inFlightCritical = 0
        if try inFlight.step() {
            inFlightTotal = inFlight.int(at: 0)
            inFlightCritical = inFlight.int(at: 1)
        }
        return (total - critical - (inFlightTotal - inFlightCritical), critical - inFlightCritical, inFlightTotal)
    }

    /// Every stored log in ascending `seq` (tests and inspection; loads everything). A sealed row that does not open
    /// is left out.
    func all() throws(OutboxError) -> [StoredLog] {
        let select = try db.cachedStatement("SELECT \(Self.columns) FROM logs ORDER BY seq")
        defer { select.reset() }
        var logs: [StoredLog] = []
        while try select.step() {
            if let log = readLog(select) { logs.append(log) }
        }
        return logs
    }

    // MARK: Row decoding

    /// The row as a `StoredLog`; nil when its sealed payload does not open.
    func readLog(_ row: Statement) -> StoredLog? {
        let id = Self.readID(row, column: 6)
        let payload: [UInt8]
        if let keys {
            guard let opened = row.withBlob(at: 7, { keys.open($0, .log(id)) }) else { return nil }
            payload = opened
        } else {
            payload = row.blob(at: 7)
        }
        return StoredLog(seq: row.int64(at: 0),
                         id: id,
                         priority: Priority(rawValue: row.int(at: 1)) ?? .normal,
                         wallMs: row.int64(at: 2),
                         monoNs: row.int64(at: 3),
                         boot: row.int64(at: 4),
                         context: row.int64(at: 5),
                         payload: payload)
    }

    /// The 16 bytes are the UUID in its canonical (big-endian) order; a shorter blob reads as zero-padded rather than
    /// trapping.
    static func readID(_ row: Statement, column: Int32) -> UUIDBytes {
        row.withBlob(at: column) { bytes -> UUIDBytes in
            var words: (UInt64, UInt64) = (0, 0)
            withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(16))) }
            return UUIDBytes(high: UInt64(bigEndian: words.0), low: UInt64(bigEndian: words.1))
        }
    }
}
