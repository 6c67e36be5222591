import Logging

/// Appending with group commit, and the size and count caps (SPEC T5, S2, S3, S5, S7 disk full).
///
/// How the cap is kept: `max_page_count` is the hard limit — SQLite refuses to grow the file past it with
/// SQLITE_FULL, which rolls the transaction back. Ahead of it, each append does one soft check: the bytes in
/// use (`(page_count − freelist_count) × page_size`, two pragma reads) plus an estimate of the new rows must
/// stay under a budget a little below the cap; when they would not, the oldest rows of the lowest priority
/// are evicted in the same transaction. The estimate can be wrong (a partly emptied page frees nothing), so
/// SQLITE_FULL is caught: the transaction is retried with more room asked for. Nothing committed is touched
/// by a failed attempt, since it rolls back whole.
extension LogStore {
    /// Bytes a row takes beyond its payload: record header, the small columns, the 16-byte id, the cell's
    /// size and rowid varints and its 2-byte pointer.
    static let rowOverheadBytes = 64
    static let maxAppendAttempts = 6

    /// The hard cap in bytes (`max_page_count × page_size`).
    var capacityBytes: Int { maxPages * pageSize }
    /// Room kept below the hard cap for what the estimate does not see: interior b-tree pages, pages left
    /// partly full, and rows that grow when claimed or released.
    var reserveBytes: Int { 2 * pageSize + capacityBytes / 64 }
    /// What the soft check keeps the used bytes under.
    var budgetBytes: Int { capacityBytes - reserveBytes }
    /// A log whose row is estimated larger than this can never fit, even in an empty store: `logTooLarge`,
    /// and nothing is evicted for it (App Center learnt this: CHANGELOG 1.12.0).
    var maxSingleLogBytes: Int { budgetBytes - baseBytes }

    /// The bytes a row with `payload` bytes takes in a table b-tree, including overflow pages when the row
    /// does not fit on one page (SQLite keeps between minLocal and maxLocal bytes on the leaf).
    ///
    /// Rows appended in order fill leaf pages until the next one does not fit, so a page wastes about half a
    /// row on average: r²/2U per row of r bytes on pages of U bytes (12 % for 1 KB rows on 4 KiB pages).
    /// Without that term, appends of large rows near the cap hit SQLITE_FULL and had to be retried.
    static func estimatedRowBytes(payload: Int, pageSize: Int) -> Int {
        let record = payload + rowOverheadBytes
        let maxLocal = pageSize - 35
        if record <= maxLocal { return record + record * record / (2 * pageSize) }
        let minLocal = (pageSize - 12) * 32 / 255 - 23
        let perOverflowPage = pageSize - 4
        var local = minLocal + (record - minLocal) % perOverflowPage
        if local > maxLocal { local = minLocal }
        let overflowPages = (record - local + perOverflowPage - 1) / perOverflowPage
        return local + overflowPages * pageSize
    }

    struct Candidate {
        /// Index in the caller's array.
        var index: Int
        var bytes: Int
        var priority: Priority
    }

    struct EvictionEvent {
        var priority: Priority
        var count: Int
        var inFlight: Int
        var bytes: Int
        var reason: String
    }

    struct RoomPlan {
        /// Positions in the candidate array rejected with `storageFull`.
        var rejected = Set<Int>()
        var evictions: [EvictionEvent] = []
    }

    struct EvictableRow {
        var seq: Int64
        var bytes: Int
        var inFlight: Bool
    }

    private struct AppendOutcome {
        var plan: RoomPlan
        var stored: Int
        var nextSeq: Int64
        var bound: ExpiryBound
    }

    /// Stores `logs` in one transaction (group commit, T5) with one reused insert statement, together with
    /// `newEventNames` (T4). Makes room by S2/S3/S5 first. Rejections (`logTooLarge`, `storageFull`) are
    /// reported per input index; accepted logs get ascending `seq` in input order.
    ///
    /// Throws only when SQLite fails for another reason than the cap, or the cap still cannot be met after
    /// several attempts (a disk that is really full): then nothing of this call is stored and nothing stored
    /// before is lost.
    @discardableResult
    func append(_ logs: [NewLog], newEventNames: [String] = []) throws(OutboxError) -> AppendResult {
        guard !logs.isEmpty || !newEventNames.isEmpty else { return AppendResult() }
        if diskCapped || !diskReserveHeld { liftDiskCapIfRoom() }
        return try guarded { () throws(OutboxError) -> AppendResult in
            // SPEC S7: on a disk short of room, a transaction's WAL frames and then as many new pages at its
            // checkpoint must fit in what is left; small transactions keep that within the reserve.
            if db.walCheckpointer?.tight == true, logs.count > 1 {
                return try appendInParts(logs, newEventNames: newEventNames, parts: chunks(of: logs, bytes: diskReserveBytes / 4))
            }
            do throws(OutboxError) {
                return try appendOnce(logs, newEventNames: newEventNames)
            } catch {
                guard error.isStorageFull, logs.count > 1 else { throw error }
                let middle = logs.count / 2
                return try appendInParts(logs, newEventNames: newEventNames, parts: [0 ..< middle, middle ..< logs.count])
            }
        }
    }

    /// Consecutive ranges of `logs` whose payloads add up to about `bytes` each.
    private func chunks(of logs: [NewLog], bytes: Int) -> [Range<Int>] {
        var parts: [Range<Int>] = []
        var start = 0
        var size = 0
        for index in logs.indices {
            size += logs[index].payload.count + Self.rowOverheadBytes
            if size >= bytes {
                parts.append(start ..< index + 1)
                start = index + 1
                size = 0
            }
        }
        if start < logs.count { parts.append(start ..< logs.count) }
        return parts
    }

    /// SPEC S2, S7: a group commit that does not fit even after eviction (on a full disk, the WAL has only the room
    /// the reserve gave back) is stored in parts, and a part that fails in halves, recursively. A log that fits in no way is rejected with
    /// `storageFull`, and so are the ones after it in this call: the disk has no room now, and trying each of
    /// them would only repeat the failure. Nothing is thrown for lack of room: every log is stored or rejected.
    /// `parts`: consecutive ranges of `logs`, stored in order, each in its own transaction.
    private func appendInParts(_ logs: [NewLog], newEventNames: [String], parts initial: [Range<Int>]) throws(OutboxError) -> AppendResult {
        var result = AppendResult()
        var names = newEventNames
        var parts = Array(initial.reversed())
        var stuck = false
        while let part = parts.popLast() {
            guard !part.isEmpty else { continue }
            if stuck {
                for index in part { result.rejected[index] = .storageFull }
                continue
            }
            do throws(OutboxError) {
                let stored = try appendOnce(Array(logs[part]), newEventNames: names)
                names = []
                result.stored += stored.stored
                result.evicted += stored.evicted
                for (index, reason) in stored.rejected { result.rejected[part.lowerBound + index] = reason }
            } catch {
                guard error.isStorageFull else { throw error }
                if part.count == 1 {
                    stuck = true
                    result.rejected[part.lowerBound] = .storageFull
                } else {
                    let middle = part.lowerBound + part.count / 2
                    parts.append(middle ..< part.upperBound)
                    parts.append(part.lowerBound ..< middle)
                }
            }
        }
        if result.rejected.count > 0 {
            logger.warning("the disk has no room for these logs even after eviction; rejected (SPEC S3, S7)", metadata: [
                "outbox.rejected": "\(result.rejected.count)",
            ])
        }
        return result
    }

    private func appendOnce(_ logs: [NewLog], newEventNames: [String]) throws(OutboxError) -> AppendResult {
        var result = AppendResult()
        var candidates: [Candidate] = []
        candidates.reserveCapacity(logs.count)
        let largest = maxSingleLogBytes
        var totalBytes = 0
        for index in logs.indices {
            let size = logs[index].payload.count
            let bytes = Self.estimatedRowBytes(payload: size, pageSize: pageSize)
            if bytes > largest {
                result.rejected[index] = .logTooLarge(bytes: size, limit: limits.maxStorageSize)
            } else {
                candidates.append(Candidate(index: index, bytes: bytes, priority: logs[index].priority))
                totalBytes += bytes
            }
        }
        if candidates.isEmpty && newEventNames.isEmpty { return result }
        let nameBytes = newEventNames.reduce(0) { $0 + $1.utf8.count + 16 }

        var extra = 0
        var margin = 8 * pageSize + totalBytes / 8
        var attempt = 1
        while true {
            do throws(OutboxError) {
                let outcome = try db.transaction { () throws(OutboxError) -> AppendOutcome in
                    if !newEventNames.isEmpty { try insertEventNames(newEventNames) }
                    let plan = try makeRoom(for: candidates, mandatoryBytes: nameBytes, extraBytes: extra,
                                            overflowMayEvictCritical: false)
                    return try insertRows(logs, candidates, skipping: plan)
                }
                nextSeq = outcome.nextSeq
                // After the commit, never before: a mark ahead of its commit would be a false loss (CommitMark).
                if outcome.stored > 0 { commitMark?.write(nextSeq - 1) }
                logCount += outcome.stored
                if outcome.plan.evictions.isEmpty, pending != nil {
                    for (position, candidate) in candidates.enumerated() where !outcome.plan.rejected.contains(position) {
                        if candidate.priority == .critical { pending?.critical += 1 } else { pending?.normal += 1 }
                    }
                } else {
                    pending = nil
                }
                expiryBound.lower(to: outcome.bound)
                result.evicted = commitEvictions(outcome.plan.evictions)
                for position in outcome.plan.rejected {
                    result.rejected[candidates[position].index] = .storageFull
                }
                result.stored = outcome.stored
                return result
            } catch {
                guard error.isStorageFull, attempt < Self.maxAppendAttempts else { throw error }
                attempt += 1
                fullRetriesTotal += 1
                // SPEC S7: a full disk lowers the cap, so that the retry below evicts down to what the disk holds.
                if !relieveFullDisk() {
                    // A checkpointed WAL is rewritten from its start instead of grown.
                    _ = try? db.checkpoint(.passive)
                }
                // The file could not grow as far as the budget said: this time the batch must fit in what the
                // store already uses, less a margin that doubles with every failure.
                let used = try Self.usedBytes(db)
                extra = max(0, budgetBytes - used) + margin
                margin *= 2
                logger.debug("append hit the storage cap; retrying with more room", metadata: [
                    "outbox.attempt": "\(attempt)", "outbox.extra_bytes": "\(extra)",
                ])
            }
        }
    }

    private func insertEventNames(_ names: [String]) throws(OutboxError) {
        let insert = try db.cachedStatement("INSERT OR IGNORE INTO event_names (name) VALUES (?)")
        for name in names {
            try insert.bind(name, at: 1)
            try insert.run()
        }
    }

    private func insertRows(_ logs: [NewLog], _ candidates: [Candidate],
                            skipping plan: RoomPlan) throws(OutboxError) -> AppendOutcome {
        let insert = try db.cachedStatement(LogSchema.insertLog)
        var seq = nextSeq
        var bound = ExpiryBound()
        var stored = 0
        let anyRejected = !plan.rejected.isEmpty
        for position in candidates.indices {
            if anyRejected && plan.rejected.contains(position) { continue }
            let log = logs[candidates[position].index]
            try insert.bind(seq, at: 1)
            try insert.bind(Int64(log.priority.rawValue), at: 2)
            try insert.bind(log.wallMs, at: 3)
            try insert.bind(log.monoNs, at: 4)
            try insert.bind(log.boot, at: 5)
            try insert.bind(log.context, at: 6)
            // Canonical UUID byte order, so the blob reads the same from any tool.
            try insert.bind(bytesOf: (log.id.high.bigEndian, log.id.low.bigEndian), at: 7)
            try insert.bind(log.payload, at: 8)
            try insert.step()
            insert.reset()
            seq += 1
            stored += 1
            bound.include(wallMs: log.wallMs, monoNs: log.monoNs, sameBoot: log.boot == boot)
        }
        return AppendOutcome(plan: plan, stored: stored, nextSeq: seq, bound: bound)
    }

    /// Evicts (inside the caller's transaction) so that `candidates` plus `mandatoryBytes` fit the budget and
    /// the count cap, in SPEC order:
    /// 1. stored normal logs, oldest first (pending before in flight);
    /// 2. the batch's own normal logs, earliest first, are rejected (`storageFull`): the rest is critical;
    /// 3. stored critical logs, oldest first — only for the batch's critical logs (S3);
    /// 4. the batch's earliest critical logs are rejected when even that is not enough.
    /// This is what inserting the logs one by one would leave, without the churn. `extraBytes` asks for more
    /// room after an SQLITE_FULL. `overflowMayEvictCritical` lets step 3 run for an overflow that predates
    /// the call (the cap was lowered).
    func makeRoom(for candidates: [Candidate], mandatoryBytes: Int, extraBytes: Int,
                  overflowMayEvictCritical: Bool) throws(OutboxError) -> RoomPlan {
        var plan = RoomPlan()
        let pages = try db.pragma("page_count")
        let free = try db.pragma("freelist_count")
        let used = Int(pages - free) * pageSize
        var needBytes = mandatoryBytes + extraBytes
        for candidate in candidates { needBytes += candidate.bytes }
        var byteDeficit = used + needBytes - budgetBytes
        var countDeficit = limits.maxLogCount.map { logCount + candidates.count - $0 } ?? 0
        guard byteDeficit > 0 || countDeficit > 0 else { return plan }
        let reason = byteDeficit > 0 ? (countDeficit > 0 ? "storage and count caps" : "storage cap") : "count cap"

        // 1. Stored normal logs. Evicting old rows frees whole pages only where they empty out, so a little more
        // than the estimate is taken here (not from critical logs, nor by rejecting): it keeps SQLITE_FULL
        // retries rare (LogStoreLimitTests fill a small cap with large rows).
        let slack = byteDeficit > 0 ? needBytes / 16 + pageSize : 0
        let normalRows = try collectEvictable(.normal, bytes: byteDeficit + slack, count: countDeficit)
        if !normalRows.isEmpty {
            let event = try evict(normalRows[...], priority: .normal, reason: reason)
            plan.evictions.append(event)
            byteDeficit -= event.bytes
            countDeficit -= event.count
        }

        // 2. The batch's normal logs, earliest first.
        for position in candidates.indices where candidates[position].priority == .normal {
            guard byteDeficit > 0 || countDeficit > 0 else { break }
            plan.rejected.insert(position)
            byteDeficit -= candidates[position].bytes
            countDeficit -= 1
        }
        guard byteDeficit > 0 || countDeficit > 0 else { return plan }

        // 3 and 4. Critical logs make room only for critical logs (S3), never for normal ones.
        let criticalPositions = candidates.indices.filter { candidates[$0].priority == .critical }
        guard !criticalPositions.isEmpty || overflowMayEvictCritical else { return plan }
        let criticalRows = try collectEvictable(.critical, bytes: byteDeficit, count: countDeficit)
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
        if take > 0 {
            plan.evictions.append(try evict(criticalRows[..<take], priority: .critical, reason: reason))
        }
        return plan
    }

    /// The rows to evict of one priority, in eviction order, until `bytes` and `count` are covered (or all).
    private func collectEvictable(_ priority: Priority, bytes: Int, count: Int) throws(OutboxError) -> [EvictableRow] {
        var rows: [EvictableRow] = []
        var coveredBytes = 0
        for inFlight in [false, true] {
            guard coveredBytes < bytes || rows.count < count else { break }
            let scan = try db.cachedStatement(inFlight ? LogSchema.evictableInFlight(priority)
                                                       : LogSchema.evictablePending(priority))
            defer { scan.reset() }
            while coveredBytes < bytes || rows.count < count, try scan.step() {
                let size = Self.estimatedRowBytes(payload: scan.int(at: 1), pageSize: pageSize)
                rows.append(EvictableRow(seq: scan.int64(at: 0), bytes: size, inFlight: inFlight))
                coveredBytes += size
            }
        }
        return rows
    }

    private func evict(_ rows: ArraySlice<EvictableRow>, priority: Priority,
                       reason: String) throws(OutboxError) -> EvictionEvent {
        var event = EvictionEvent(priority: priority, count: 0, inFlight: 0, bytes: 0, reason: reason)
        // Pending rows come first and are a prefix, in seq order, of the rows matching the scan's filter: one
        // range delete with the same filter removes exactly them.
        if let lastPending = rows.last(where: { !$0.inFlight }) {
            try db.execute(LogSchema.deletePendingThrough(priority), [.integer(lastPending.seq)])
            event.count += db.changes
        }
        let inFlight = rows.filter(\.inFlight)
        if !inFlight.isEmpty {
            let delete = try db.cachedStatement("DELETE FROM logs WHERE seq = ?")
            for row in inFlight {
                try delete.bind(row.seq, at: 1)
                try delete.run()
                event.count += db.changes
                event.inFlight += db.changes
            }
        }
        try keepSeqHigh(deletingThrough: rows.lazy.map(\.seq).max())
        event.bytes = rows.reduce(0) { $0 + $1.bytes }
        return event
    }

    /// Counts and logs committed evictions (S2: "each eviction is counted and logged"). Returns how many.
    @discardableResult
    func commitEvictions(_ events: [EvictionEvent], reason: String? = nil) -> Int {
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
        logCount -= total
        evictedTotal += total
        if total > 0 { pending = nil }
        return total
    }

    /// Runs `body` in a transaction; if it hits the hard cap, runs it again after evicting by S2 order so that
    /// `bytes` fit without the file growing, asking for more room at each failure. For small writes that must
    /// not fail because logs filled the store: meta, device contexts, and claim marks — a store too full to
    /// mark a batch in flight could never send anything again, so this may evict even a critical log.
    func withRoom<T>(bytes: Int, _ body: () throws(OutboxError) -> T) throws(OutboxError) -> T {
        var margin = bytes + reserveBytes
        var attempt = 1
        var relieved = false
        while true {
            var events: [EvictionEvent] = []
            do throws(OutboxError) {
                let value = try db.transaction { () throws(OutboxError) -> T in
                    if attempt > 1 {
                        let used = try Self.usedBytes(db)
                        events = try makeRoom(for: [], mandatoryBytes: 0, extraBytes: max(0, budgetBytes - used) + margin,
                                              overflowMayEvictCritical: true).evictions
                    }
                    return try body()
                }
                commitEvictions(events)
                return value
            } catch {
                guard error.isStorageFull, attempt < Self.maxAppendAttempts else { throw error }
                fullRetriesTotal += 1
                // SPEC S7: a full disk first gets its room back (reserve, WAL) and the same write is tried again
                // without evicting: what failed was the WAL's growth, which eviction cannot help.
                if !relieved && relieveFullDisk() {
                    relieved = true
                    continue
                }
                attempt += 1
                margin *= 2
            }
        }
    }
}
