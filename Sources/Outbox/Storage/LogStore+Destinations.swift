import Logging

/// Several destinations from one store (SPEC D15–D18). A log is stored once; each destination claims, settles and
/// dead-letters it on its own, and the log leaves the store once every destination settled it. A store of one
/// destination named `default` keeps none of this: its tables stay empty, `destinationBook` nil, and its delivered
/// logs go at once, as before.
extension LogStore {
    var destinationsTable: DestinationsTable { DestinationsTable(db: db) }

    /// What `useDestinations` found: each destination's id, and for each removed one how many logs it still held.
    struct DestinationsInUse: Equatable {
        var ids: [String: Int64]
        var removed: [String: Int]
    }

    /// Makes the store serve `names`, in order (SPEC D18): a name the store has not seen starts with the logs stored
    /// from now on; a name it has and `names` lacks is removed with its progress and dead letters, and the logs only
    /// it held leave. A store that never had a list is one destination named `default`. One destination named
    /// `default` returns the store to the single-destination path.
    @discardableResult
    func useDestinations(_ names: [String]) throws(OutboxError) -> DestinationsInUse {
        try guarded { () throws(OutboxError) -> DestinationsInUse in
            let table = destinationsTable
            var rows = try table.all()
            if rows.isEmpty && names == [NamedDestination.defaultName] {
                destinationBook = nil
                return DestinationsInUse(ids: [NamedDestination.defaultName: 0], removed: [:])
            }
            var settled: [Int64: SeqStretches] = [:]
            var removed: [String: Int] = [:]
            try withRoom(bytes: 4096) { () throws(OutboxError) in
                removed = [:]
                rows = try table.all()
                settled = try table.settled()
                // A store that never stored a log has no `default` to carry over: making one only to remove it would
                // warn of its removal at every new store's first open with a list (each fleet device's).
                if rows.isEmpty && ledger.nextSeq > 1 {
                    // The store's one destination so far: `default`, with what meta kept of it.
                    let row = DestinationsTable.Row(id: 0, name: NamedDestination.defaultName, wire: try metaTable.value(.destination),
                                                    disabledReason: try metaTable.value(.disabledReason),
                                                    serverRejected: Int(try metaTable.value(.serverRejected) ?? "") ?? 0)
                    try table.insert(row)
                    rows = [row]
                }
                for row in rows where !names.contains(row.name) {
                    removed[row.name] = try heldCount(settled[row.id] ?? SeqStretches())
                    try table.remove(id: row.id)
                    settled[row.id] = nil
                }
                rows.removeAll { !names.contains($0.name) }
                for name in names where !rows.contains(where: { $0.name == name }) {
                    let id = name == NamedDestination.defaultName && !rows.contains { $0.id == 0 } ? 0 : (rows.map(\.id).max() ?? 0) + 1
                    let row = DestinationsTable.Row(id: id, name: name, wire: nil, disabledReason: nil, serverRejected: 0)
                    try table.insert(row)
                    rows.append(row)
                    // A new destination receives the logs stored from now on: everything stored is settled for it.
                    let top = ledger.nextSeq - 1
                    if top > 0 {
                        let stretches = Priority.allCases.map { LeaseStretch(batch: 0, priority: $0, first: 1, last: top) }
                        try table.recordSettled(stretches, dest: id)
                        for stretch in stretches { settled[id, default: SeqStretches()].insert(1...top, stretch.priority) }
                    }
                }
            }
            for (name, held) in removed.sorted(by: { $0.key < $1.key }) {
                logger.warning("destination removed: its progress and dead letters are dropped (SPEC D18)",
                               metadata: ["outbox.destination": "\(name)", "outbox.logs_held": "\(held)"])
            }
            var book = DestinationBook(names.compactMap { name in
                rows.first { $0.name == name }.map { row in
                    // A kept destination keeps what it had in memory (its leases, where its claims start).
                    if let kept = destinationBook?[row.id], kept.name == row.name { return kept }
                    var progress = DestinationProgress(id: row.id, name: row.name)
                    progress.settled = settled[row.id] ?? SeqStretches()
                    return progress
                }
            })
            if let previous = destinationBook { book.continueBatchIDs(after: previous.lastBatchID) }
            destinationBook = book
            // Logs that every remaining destination settled (a removed one held them) leave now.
            if let first = book.destinations.first {
                let all = Priority.allCases.flatMap { priority in
                    first.settled.ranges(priority).map { LeaseStretch(batch: 0, priority: priority, first: $0.lowerBound, last: $0.upperBound) }
                }
                let gone = book.settledByAllOthers(than: first.id, all)
                if !gone.isEmpty {
                    let deleted = try withRoom(bytes: 4096) { () throws(OutboxError) -> Int in
                        let deleted = try logsTable.delete(stretches: gone)
                        try destinationsTable.pruneSettled(inside: gone)
                        try keepSeqHigh(deletingThrough: gone.map(\.last).max())
                        return deleted
                    }
                    record(.completedSeqs(cut: [], deleted: deleted, expired: false))
                }
            }
            if names == [NamedDestination.defaultName] {
                // Back to one destination: what it settled is gone by now; its dead letters stay as the store's.
                try withRoom(bytes: 4096) { () throws(OutboxError) in
                    if let row = rows.first {
                        try metaTable.set(.serverRejected, String(row.serverRejected))
                        if let reason = row.disabledReason { try metaTable.set(.disabledReason, reason) }
                        try db.execute("UPDATE dead_letters SET dest = 0")
                    }
                    try destinationsTable.removeAll()
                }
                destinationBook = nil
            }
            return DestinationsInUse(ids: Dictionary(uniqueKeysWithValues: rows.map { ($0.name, $0.id) }), removed: removed)
        }
    }

    /// Logs stored that `settled` does not cover: what a destination with those settled stretches still held.
    private func heldCount(_ settled: SeqStretches) throws(OutboxError) -> Int {
        var covered = 0
        for priority in Priority.allCases {
            for range in settled.ranges(priority) { covered += try destinationsTable.count(priority, in: range) }
        }
        return max(0, ledger.logCount - covered)
    }

    // MARK: One destination's queue

    /// The logs `id` has still to claim, by priority: the stored ones minus those it settled or holds in flight.
    func waiting(destination id: Int64) throws(OutboxError) -> Waiting {
        guard let progress = destinationBook?[id] else { return Waiting() }
        if let pending = progress.pending { return pending }
        return try guarded { () throws(OutboxError) -> Waiting in
            let critical = Int(try db.int64("SELECT count(*) FROM logs WHERE priority = 1") ?? 0)
            var waiting = Waiting(normal: ledger.logCount - critical, critical: critical)
            for priority in Priority.allCases {
                var taken = 0
                for stretch in progress.skipped(priority) {
                    taken += try destinationsTable.count(priority, in: stretch.first...stretch.last)
                }
                if priority == .critical { waiting.critical -= taken } else { waiting.normal -= taken }
            }
            waiting.normal = max(0, waiting.normal)
            waiting.critical = max(0, waiting.critical)
            destinationBook?.update(id) { $0.pending = waiting }
            return waiting
        }
    }

    /// `claimBatch` for destination `id`: critical logs first, then normal ones, each in seq order (C4), skipping
    /// what it settled or holds; before it, the delivered batch `completing` is settled for it.
    func claim(destination id: Int64, limit: Int, completing: Int64?) throws(OutboxError) -> ClaimedBatch? {
        guard limit > 0 else {
            if let completing { _ = try complete(destination: id, batchID: completing) }
            return nil
        }
        guard destinationBook?[id] != nil else { return nil }
        return try guarded { () throws(OutboxError) -> ClaimedBatch? in
            _ = try expireOnce(nowMs: clock.wallMs())
            guard let book = destinationBook, let progress = book[id], let batchID = destinationBook?.nextBatchID() else { return nil }
            // The delivered batch is settled in the claim's transaction, one commit per request as with one destination.
            let delivered = completing.map { progress.leases.stretches(of: $0) } ?? []
            let gone = delivered.isEmpty ? [] : book.settledByAllOthers(than: id, delivered)
            var completed = 0
            var unreadable: [Int64] = []
            let claimed = try withRoom(bytes: 64 * min(limit, 1000)) { () throws(OutboxError) -> (ClaimedBatch, [LeaseStretch])? in
                unreadable.removeAll()
                completed = 0
                if let completing { completed = try writeSettled(destination: id, delivered, batchID: completing, cut: [], gone: gone) }
                var logs: [StoredLog] = []
                logs.reserveCapacity(min(limit, 512))
                var stretches: [LeaseStretch] = []
                for priority in [Priority.critical, .normal] where logs.count < limit {
                    stretches += try logsTable.claim(priority, from: progress.claimStart(priority), leased: progress.skipped(priority),
                                                     limit: limit, nowMs: Int64.max, batchID: batchID, into: &logs, unreadable: &unreadable)
                }
                if !unreadable.isEmpty {
                    _ = try logsTable.delete(seqs: unreadable)
                    try keepSeqHigh(deletingThrough: unreadable.max())
                }
                guard !logs.isEmpty else { return nil }
                try leasesTable.record(stretches, dest: id)
                return (ClaimedBatch(batchID: batchID, logs: logs), stretches)
            }
            if let completing { applySettled(destination: id, delivered, batchID: completing, cut: [], deleted: completed) }
            if !unreadable.isEmpty { record(.unreadable(count: unreadable.count)) }
            guard let (batch, stretches) = claimed else { return nil }
            let critical = batch.logs.reduce(0) { $0 + ($1.priority == .critical ? 1 : 0) }
            destinationBook?.update(id) { progress in
                progress.leases.add(stretches)
                progress.pending?.critical -= critical
                progress.pending?.normal -= batch.logs.count - critical
                for priority in Priority.allCases {
                    if let last = batch.logs.last(where: { $0.priority == priority }) {
                        progress.claimFloor[priority.rawValue] = max(progress.claimFloor[priority.rawValue], last.seq + 1)
                    }
                }
            }
            return batch
        }
    }

    /// Settles a delivered batch for destination `id`. Returns the logs that left the store with it (those every
    /// other destination had settled already).
    @discardableResult
    func complete(destination id: Int64, batchID: Int64) throws(OutboxError) -> Int {
        guard let progress = destinationBook?[id] else { return 0 }
        return try settle(destination: id, progress.leases.stretches(of: batchID), batchID: batchID)
    }

    /// Settles delivered logs by seq for destination `id` (the parts of a split batch).
    @discardableResult
    func complete(destination id: Int64, seqs: [Int64]) throws(OutboxError) -> Int {
        try settle(destination: id, try stretches(of: seqs), batchID: nil)
    }

    /// One stretch per seq, with the log's priority; seqs no longer stored are left out.
    private func stretches(of seqs: [Int64]) throws(OutboxError) -> [LeaseStretch] {
        try guarded { () throws(OutboxError) -> [LeaseStretch] in
            var result: [LeaseStretch] = []
            for seq in seqs {
                guard let raw = try db.int64("SELECT priority FROM logs WHERE seq = ?", [.integer(seq)]) else { continue }
                result.append(LeaseStretch(batch: 0, priority: Priority(rawValue: Int(raw)) ?? .normal, first: seq, last: seq))
            }
            return result
        }
    }

    /// Marks `stretches` settled for `id` (and ends its lease of `batchID`, or cuts the seqs out of its leases), and
    /// deletes what every destination has now settled, in one transaction.
    private func settle(destination id: Int64, _ stretches: [LeaseStretch], batchID: Int64?,
                        before: (() throws(OutboxError) -> Void)? = nil) throws(OutboxError) -> Int {
        guard let book = destinationBook, let progress = book[id] else { return 0 }
        return try guarded { () throws(OutboxError) -> Int in
            let gone = book.settledByAllOthers(than: id, stretches)
            let cut = batchID == nil ? progress.leases.cutting(stretches.map(\.first)) : []
            let deleted = try withRoom(bytes: 64 * stretches.count + 64) { () throws(OutboxError) -> Int in
                try before?()
                return try writeSettled(destination: id, stretches, batchID: batchID, cut: cut, gone: gone)
            }
            applySettled(destination: id, stretches, batchID: batchID, cut: cut, deleted: deleted)
            return deleted
        }
    }

    /// A settlement's writes, in the caller's transaction: the lease ended (or cut), the stretches settled for `id`,
    /// and the logs every destination has now settled (`gone`) deleted with the settled rows they leave empty.
    private func writeSettled(destination id: Int64, _ stretches: [LeaseStretch], batchID: Int64?,
                              cut: [(batch: Int64, stretches: [LeaseStretch])], gone: [LeaseStretch]) throws(OutboxError) -> Int {
        let table = destinationsTable
        if let batchID { try leasesTable.drop(batch: batchID) } else { try leasesTable.rewrite(cut, dest: id) }
        try table.recordSettled(stretches, dest: id)
        guard !gone.isEmpty else { return 0 }
        let deleted = try logsTable.delete(stretches: gone)
        try table.pruneSettled(inside: gone)
        try keepSeqHigh(deletingThrough: gone.map(\.last).max())
        return deleted
    }

    /// A settlement's memory, once its transaction committed.
    private func applySettled(destination id: Int64, _ stretches: [LeaseStretch], batchID: Int64?,
                              cut: [(batch: Int64, stretches: [LeaseStretch])], deleted: Int) {
        destinationBook?.update(id) { progress in
            if let batchID { progress.leases.remove(batch: batchID) } else { cut.forEach { progress.leases.replace(batch: $0.batch, with: $0.stretches) } }
            for stretch in stretches { progress.settled.insert(stretch.first...stretch.last, stretch.priority) }
        }
        record(.completedSeqs(cut: [], deleted: deleted, expired: false))
    }

    /// Gives destination `id`'s batch back to its pending logs (R3's retry is the machine's: no retry time is stored,
    /// since the row is shared).
    @discardableResult
    func release(destination id: Int64, batchID: Int64) throws(OutboxError) -> Int {
        guard let progress = destinationBook?[id] else { return 0 }
        return try guarded { () throws(OutboxError) -> Int in
            let held = progress.leases.stretches(of: batchID)
            try withRoom(bytes: 4096) { () throws(OutboxError) in try leasesTable.drop(batch: batchID) }
            destinationBook?.update(id) { progress in
                progress.leases.remove(batch: batchID)
                progress.claimFloor = [0, 0]
                progress.pending = nil
            }
            return held.reduce(0) { $0 + Int($1.last - $1.first + 1) }
        }
    }

    @discardableResult
    func release(destination id: Int64, seqs: [Int64]) throws(OutboxError) -> Int {
        guard !seqs.isEmpty, let progress = destinationBook?[id] else { return 0 }
        return try guarded { () throws(OutboxError) -> Int in
            let cut = progress.leases.cutting(seqs)
            try withRoom(bytes: 64 * cut.count + 4096) { () throws(OutboxError) in try leasesTable.rewrite(cut, dest: id) }
            destinationBook?.update(id) { progress in
                cut.forEach { progress.leases.replace(batch: $0.batch, with: $0.stretches) }
                progress.claimFloor = [0, 0]
                progress.pending = nil
            }
            return seqs.count
        }
    }

    /// R2 for destination `id`: copies the refused logs into its dead letters and settles them for it; a log every
    /// other destination settled leaves the store with it.
    @discardableResult
    func deadLetter(destination id: Int64, seqs: [Int64], status: Int, reason: String) throws(OutboxError) -> Int {
        guard !seqs.isEmpty, destinationBook?[id] != nil else { return 0 }
        let reason = String(reason.prefix(Self.maxReasonLength))
        let stretches = try stretches(of: seqs)
        var moved = 0, dropped = 0
        let atMs = clock.wallMs(), cap = deadLetterCap
        _ = try settle(destination: id, stretches, batchID: nil) { () throws(OutboxError) in
            moved = 0
            dropped = 0
            let letters = self.deadLettersTable
            let insert = try letters.inserter()
            for stretch in stretches {
                guard let log = try self.logsTable.letterFields(seq: stretch.first) else { continue }
                moved += 1
                if log.payload.count > cap {
                    dropped += 1
                    continue
                }
                try letters.insert(with: insert, logSeq: stretch.first, priority: log.priority, wallMs: log.wallMs, status: status,
                                   atMs: atMs, reason: reason, id: log.id, payload: log.payload)
                try self.db.execute("UPDATE dead_letters SET dest = ? WHERE seq = last_insert_rowid()", [.integer(id)])
            }
            dropped += try letters.trim(toBytes: cap)
        }
        record(.deadLettered(moved: 0, dropped: dropped))
        record(.deadLetteredFor(moved: moved))
        if moved > 0 {
            logger.info("moved refused logs to the dead-letter table (SPEC R2)", metadata: [
                "outbox.dead_lettered": "\(moved)", "outbox.status": "\(status)",
                "outbox.destination": "\(destinationBook?[id]?.name ?? "")",
            ])
        }
        return moved
    }

    /// T6 for every destination: the logs, leases and settled stretches go.
    func deleteAllLogsForEveryDestination() throws(OutboxError) -> Int {
        let deleted = try deleteAllLogs()
        guard destinationBook != nil else { return deleted }
        try guarded { () throws(OutboxError) in
            try db.transaction { () throws(OutboxError) in try db.execute("DELETE FROM settled") }
        }
        destinationBook?.reset()
        return deleted
    }

    func setDisabledReason(destination id: Int64, _ reason: String?) throws(OutboxError) {
        try guarded { () throws(OutboxError) in
            try db.transaction { () throws(OutboxError) in try destinationsTable.setDisabledReason(reason, id: id) }
        }
    }

    func recordWire(destination id: Int64, _ wire: String) throws(OutboxError) {
        try guarded { () throws(OutboxError) in
            try db.transaction { () throws(OutboxError) in try destinationsTable.setWire(wire, id: id) }
        }
    }

    func addServerRejected(destination id: Int64, _ count: Int) throws(OutboxError) {
        guard count > 0 else { return }
        try guarded { () throws(OutboxError) in
            try db.transaction { () throws(OutboxError) in try destinationsTable.addServerRejected(count, id: id) }
        }
    }
}

/// Delivery's queue for one of several destinations: the store seen through that destination's progress.
final class DestinationQueue: BatchQueue {
    let store: LogStore
    let id: Int64
    let name: String

    init(store: LogStore, id: Int64, name: String) {
        self.store = store
        self.id = id
        self.name = name
    }

    func waiting() throws(OutboxError) -> Waiting { try store.waiting(destination: id) }
    func claimBatch(limit: Int, completing: Int64?) throws(OutboxError) -> ClaimedBatch? {
        try store.claim(destination: id, limit: limit, completing: completing)
    }
    func complete(batchID: Int64) throws(OutboxError) -> Int { try store.complete(destination: id, batchID: batchID) }
    func complete(seqs: [Int64]) throws(OutboxError) -> Int { try store.complete(destination: id, seqs: seqs) }
    func release(batchID: Int64, nextAttemptMs: Int64) throws(OutboxError) -> Int { try store.release(destination: id, batchID: batchID) }
    func release(seqs: [Int64], nextAttemptMs: Int64) throws(OutboxError) -> Int { try store.release(destination: id, seqs: seqs) }
    func deadLetter(seqs: [Int64], status: Int, reason: String) throws(OutboxError) -> Int {
        try store.deadLetter(destination: id, seqs: seqs, status: status, reason: reason)
    }
    /// S4 holds for every destination: a log too old for one is too old for all.
    func expire(seqs: [Int64]) throws(OutboxError) -> Int { try store.expire(seqs: seqs) }
    func deleteAllLogs() throws(OutboxError) -> Int { try store.deleteAllLogsForEveryDestination() }
    func context(id: Int64) throws(OutboxError) -> [UInt8]? { try store.context(id: id) }
    func setDisabledReason(_ reason: String?) throws(OutboxError) { try store.setDisabledReason(destination: id, reason) }
    func recordDestination(_ name: String) throws(OutboxError) { try store.recordWire(destination: id, name) }
    func addServerRejected(_ count: Int) throws(OutboxError) { try store.addServerRejected(destination: id, count) }
}
