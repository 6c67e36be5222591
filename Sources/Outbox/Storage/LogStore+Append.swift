import Logging

/// Appending with group commit, and the size and count caps (SPEC T5, S2, S3, S5, S7 disk full).
///
/// How the cap is kept: `max_page_count` is the hard limit — SQLite refuses to grow the file past it with
/// SQLITE_FULL, which rolls the transaction back. Ahead of it, each append does one soft check: the bytes in
/// use (`(page_count − freelist_count) × page_size`, two pragma reads) plus an estimate of the new rows must
/// stay under a budget a little below the cap; when they would not, the oldest rows of the lowest priority
/// are evicted in the same transaction. The estimate can be wrong (a partly emptied page frees nothing), so
/// SQLITE_FULL is caught: the transaction is retried with more room asked for, as its `FullRetryPlan` says. Nothing
/// committed is touched by a failed attempt, since it rolls back whole.
extension LogStore {
    typealias Candidate = EvictionPlanner.Candidate

    typealias EvictionEvent = StoreEviction.Event
    typealias RoomPlan = StoreEviction.RoomPlan

    private struct AppendOutcome {
        var plan: RoomPlan
        var stored = Waiting()
        var nextSeq: Int64
        var bound = ExpiryBound()
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
        // Before the disk is read and the reserve file touched, not only in `guarded`.
        owner.check()
        if disk.diskCapped || !disk.reserveHeld { liftDiskCapIfRoom() }
        return try guarded { () throws(OutboxError) -> AppendResult in
            // SPEC S7: on a disk short of room, a transaction's WAL frames and then as many new pages at its
            // checkpoint must fit in what is left; small transactions keep that within the reserve.
            if db.walCheckpointer?.tight == true, logs.count > 1 {
                return try appendInParts(logs, newEventNames: newEventNames, parts: chunks(of: logs, bytes: disk.diskReserveBytes / 4))
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
            size += logs[index].payload.count + DiskBudget.rowOverheadBytes
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
        let largest = disk.maxSingleLogBytes
        var totalBytes = 0
        for index in logs.indices {
            let size = logs[index].payload.count
            let bytes = disk.estimatedRowBytes(payload: size)
            if bytes > largest {
                result.rejected[index] = .logTooLarge(bytes: size, limit: limits.maxStorageSize)
            } else {
                candidates.append(Candidate(index: index, bytes: bytes, priority: logs[index].priority))
                totalBytes += bytes
            }
        }
        if candidates.isEmpty && newEventNames.isEmpty { return result }
        let nameBytes = newEventNames.reduce(0) { $0 + $1.utf8.count + 16 }

        return try retryingOnFull(.appending(pageSize: pageSize, batchBytes: totalBytes)) { (retry) throws(OutboxError) -> AppendResult in
            var result = result
            // After SQLITE_FULL the file could not grow as far as the budget said: this time the batch must fit in
            // what the store already uses, less a margin that doubles with every failure (FullRetryPlan).
            let extra = retry.asksForRoom ? retry.extraBytes(usedBytes: try Self.usedBytes(db), budgetBytes: disk.budgetBytes) : 0
            if retry.asksForRoom {
                logger.debug("append hit the storage cap; retrying with more room", metadata: [
                    "outbox.attempt": "\(retry.attempt)", "outbox.extra_bytes": "\(extra)",
                ])
            }
            let outcome = try db.transaction { () throws(OutboxError) -> AppendOutcome in
                if !newEventNames.isEmpty { try eventNamesTable.insert(newEventNames) }
                let plan = try makeRoom(for: candidates, mandatoryBytes: nameBytes, extraBytes: extra,
                                        overflowMayEvictCritical: false)
                return try insertRows(logs, candidates, skipping: plan)
            }
            record(.appended(stored: outcome.stored, nextSeq: outcome.nextSeq, bound: outcome.bound))
            // After the commit, never before: a mark ahead of its commit would be a false loss (CommitMark).
            if outcome.stored.total > 0 { commitMark?.write(outcome.nextSeq - 1) }
            result.evicted = commitEvictions(outcome.plan.evictions)
            for position in outcome.plan.rejected {
                result.rejected[candidates[position].index] = .storageFull
            }
            result.stored = outcome.stored.total
            return result
        }
    }

    private func insertRows(_ logs: [NewLog], _ candidates: [Candidate],
                            skipping plan: RoomPlan) throws(OutboxError) -> AppendOutcome {
        var outcome = AppendOutcome(plan: plan, nextSeq: ledger.nextSeq)
        let anyRejected = !plan.rejected.isEmpty
        let accepted = candidates.indices.compactMap { position in
            anyRejected && plan.rejected.contains(position) ? nil : candidates[position].index
        }
        outcome.nextSeq = try logsTable.insert(logs, at: accepted, firstSeq: outcome.nextSeq)
        for index in accepted {
            let log = logs[index]
            if log.priority == .critical { outcome.stored.critical += 1 } else { outcome.stored.normal += 1 }
            outcome.bound.include(wallMs: log.wallMs, monoNs: log.monoNs, sameBoot: log.boot == boot)
        }
        return outcome
    }

    /// The store's eviction (StoreEviction.swift) over the connection and the figures of the moment.
    var eviction: StoreEviction {
        StoreEviction(db: db, keys: keys, disk: disk, ledger: ledger, maxLogCount: limits.maxLogCount)
    }

    /// `StoreEviction.makeRoom`, in the caller's transaction.
    func makeRoom(for candidates: [Candidate], mandatoryBytes: Int, extraBytes: Int,
                  overflowMayEvictCritical: Bool) throws(OutboxError) -> RoomPlan {
        try eviction.makeRoom(for: candidates, mandatoryBytes: mandatoryBytes, extraBytes: extraBytes,
                              overflowMayEvictCritical: overflowMayEvictCritical)
    }

    /// Counts and logs committed evictions (`StoreEviction.commit`). Returns how many.
    @discardableResult
    func commitEvictions(_ events: [EvictionEvent], reason: String? = nil) -> Int {
        StoreEviction.commit(events, reason: reason, logger: logger, record: record)
    }

    /// Runs `body` in a transaction; if it hits the hard cap, runs it again after evicting by S2 order so that
    /// `bytes` fit without the file growing, asking for more room at each failure. For small writes that must
    /// not fail because logs filled the store: meta, device contexts, and claim marks — a store too full to
    /// mark a batch in flight could never send anything again, so this may evict even a critical log.
    func withRoom<T>(bytes: Int, _ body: () throws(OutboxError) -> T) throws(OutboxError) -> T {
        try retryingOnFull(.smallWrite(bytes: bytes, slackBytes: disk.slackBytes)) { (retry) throws(OutboxError) -> T in
            var events: [EvictionEvent] = []
            let value = try db.transaction { () throws(OutboxError) -> T in
                if retry.asksForRoom {
                    let used = try Self.usedBytes(db)
                    events = try makeRoom(for: [], mandatoryBytes: 0, extraBytes: retry.extraBytes(usedBytes: used, budgetBytes: disk.budgetBytes),
                                          overflowMayEvictCritical: true).evictions
                }
                return try body()
            }
            commitEvictions(events)
            return value
        }
    }
}
