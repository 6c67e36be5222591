import Logging

/// The dead-letter table (SPEC R2): logs the server refused, kept for inspection under a cap.
extension LogStore {
    /// Longest `reason` kept: a server may answer with a whole HTML page.
    static let maxReasonLength = 1000

    /// The cap that applies: R2's 1 MiB, but never more than a quarter of a small store, so refused logs
    /// cannot crowd out the logs still to send.
    var deadLetterCap: Int { min(limits.maxDeadLetterBytes, limits.maxStorageSize / 4) }

    /// Moves logs the server refused into the dead-letter table with the status and reason. Returns how many
    /// moved. The table is capped (`deadLetterCap`, payload bytes): the oldest letters are dropped first,
    /// counted and logged. A letter larger than the whole cap is dropped at once, also counted.
    @discardableResult
    func deadLetter(seqs: [Int64], status: Int, reason: String) throws(OutboxError) -> Int {
        guard !seqs.isEmpty else { return 0 }
        let reason = String(reason.prefix(Self.maxReasonLength))
        return try guarded { () throws(OutboxError) -> Int in
            var mode = DeadLetterMode.keep
            while true {
                do throws(OutboxError) {
                    return try moveToDeadLetters(seqs: seqs, status: status, reason: reason, mode: mode)
                } catch {
                    // At the cap a letter may not fit where its log was (page fragmentation): make room in the
                    // dead-letter table first, and as a last resort drop the new letters, loudly and counted.
                    guard error.isStorageFull, let next = mode.fallback else { throw error }
                    fullRetriesTotal += 1
                    mode = next
                }
            }
        }
    }

    private enum DeadLetterMode {
        case keep, dropOldLettersFirst, dropNewLetters

        var fallback: DeadLetterMode? {
            switch self {
            case .keep: return .dropOldLettersFirst
            case .dropOldLettersFirst: return .dropNewLetters
            case .dropNewLetters: return nil
            }
        }
    }

    private func moveToDeadLetters(seqs: [Int64], status: Int, reason: String,
                                   mode: DeadLetterMode) throws(OutboxError) -> Int {
        let atMs = clock.wallMs()
        let cap = deadLetterCap
        let (moved, dropped) = try db.transaction { () throws(OutboxError) -> (Int, Int) in
            var dropped = 0
            if mode != .keep {
                try db.execute("DELETE FROM dead_letters")
                dropped += db.changes
            }
            let select = try db.cachedStatement("SELECT priority, wall_ms, id, payload FROM logs WHERE seq = ?")
            let delete = try db.cachedStatement("DELETE FROM logs WHERE seq = ?")
            let insert = try db.cachedStatement("""
                INSERT INTO dead_letters (log_seq, priority, wall_ms, status, at_ms, reason, id, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
            var moved = 0
            for seq in seqs {
                try select.bind(seq, at: 1)
                guard try select.step() else {
                    select.reset()
                    continue
                }
                let priority = select.int64(at: 0)
                let wallMs = select.int64(at: 1)
                let id = select.blob(at: 2)
                let payload = select.blob(at: 3)
                select.reset()
                // The log goes first, so that its pages are free for the letter.
                try delete.bind(seq, at: 1)
                try delete.run()
                moved += 1
                if mode == .dropNewLetters || payload.count > cap {
                    dropped += 1
                    continue
                }
                try insert.bind(seq, at: 1)
                try insert.bind(priority, at: 2)
                try insert.bind(wallMs, at: 3)
                try insert.bind(status, at: 4)
                try insert.bind(atMs, at: 5)
                try insert.bind(reason, at: 6)
                try insert.bind(id, at: 7)
                try insert.bind(payload, at: 8)
                try insert.run()
            }
            dropped += try trimDeadLetters()
            return (moved, dropped)
        }
        logCount -= moved
        pending = nil
        deadLetteredTotal += moved
        deadLettersDroppedTotal += dropped
        if moved > 0 {
            logger.info("moved refused logs to the dead-letter table (SPEC R2)", metadata: [
                "outbox.dead_lettered": "\(moved)", "outbox.status": "\(status)",
            ])
        }
        if dropped > 0 {
            logger.info("dropped dead letters to keep the table under its cap (SPEC R2)", metadata: [
                "outbox.dropped": "\(dropped)", "outbox.cap_bytes": "\(cap)",
            ])
        }
        return moved
    }

    /// Deletes the oldest letters until the payload bytes fit the cap. Returns how many were dropped.
    private func trimDeadLetters() throws(OutboxError) -> Int {
        let cap = deadLetterCap
        let total = Int(try db.int64("SELECT coalesce(sum(length(payload)), 0) FROM dead_letters") ?? 0)
        guard total > cap else { return 0 }
        var excess = total - cap
        var lastDropped: Int64?
        let scan = try db.cachedStatement("SELECT seq, length(payload) FROM dead_letters ORDER BY seq")
        defer { scan.reset() }
        while excess > 0, try scan.step() {
            lastDropped = scan.int64(at: 0)
            excess -= scan.int(at: 1)
        }
        scan.reset()
        guard let lastDropped else { return 0 }
        try db.execute("DELETE FROM dead_letters WHERE seq <= ?", [.integer(lastDropped)])
        return db.changes
    }

    /// Dead letters, oldest first.
    func deadLetters(limit: Int = .max) throws(OutboxError) -> [DeadLetter] {
        try guarded { () throws(OutboxError) -> [DeadLetter] in
            let select = try db.cachedStatement(
                "SELECT id, status, reason, at_ms, payload FROM dead_letters ORDER BY seq LIMIT ?")
            defer { select.reset() }
            try select.bind(Int64(clamping: limit), at: 1)
            var letters: [DeadLetter] = []
            while try select.step() {
                letters.append(DeadLetter(id: Self.readID(select, column: 0), status: select.int(at: 1),
                                          reason: select.string(at: 2), atMs: select.int64(at: 3),
                                          payload: select.blob(at: 4)))
            }
            return letters
        }
    }
}
