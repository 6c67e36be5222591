/// Every count the store keeps in memory of what its file holds — rows, pending logs by priority, leases, the next
/// seq and batch id, the expiry bounds, the session's totals — in one value that changes only by `apply`, with what
/// a transaction did once it has committed. A transaction that rolls back leaves the ledger as it was, since nothing
/// applied it; a new cached count is a field here and a line in `apply`, nowhere else.
///
/// The fields are readable by everyone and writable by no one outside this type.
struct StoreLedger: Sendable, Equatable {
    /// Rows in `logs`, so that S5 needs no COUNT(*) per append.
    private(set) var logCount = 0
    /// Logs no batch holds, by priority: what delivery decides on (`BatchQueue.waiting`). nil after a change of unknown
    /// shape (eviction, expiry, a release, a dead letter, a requeue): counted again at the next read (`.recounted`).
    private(set) var pending: Waiting?
    /// Per priority (by raw value), a seq below which no row of that priority is pending: the claim starts its scan
    /// there instead of walking past the rows in flight at the head of the table. Raised by a claim that took every
    /// pending row below it, lowered by a release.
    private(set) var claimFloor: [Int64] = [0, 0]
    /// Next `seq` to assign. Kept here rather than with AUTOINCREMENT, which reads and writes `sqlite_sequence` on
    /// every insert. Within one session a seq is never reused (so an engine holding seqs of an evicted in-flight batch
    /// cannot touch newer rows); across sessions it restarts above the largest stored seq, which keeps C4's order.
    private(set) var nextSeq: Int64 = 1
    private(set) var lastBatchID: Int64 = 0
    /// The highest batch id stored in meta (`MetaKey.lastBatch`). Ids are reserved a block at a time, so that a
    /// claim writes the meta row once per `LogStore.batchIDBlock` claims. A restart continues above the reservation.
    private(set) var reservedBatchID: Int64 = 0
    /// Whether `MetaKey.retryTimes` is stored: written with the first retry time of a session, cleared at open.
    private(set) var retryTimesFlagged = false
    /// Lower bounds of the stored logs' ages (SPEC S4): `expire` skips its scan when nothing can be old enough.
    private(set) var expiryBound = ExpiryBound()
    /// The batches in flight (C9), as recorded in the `leases` table.
    private(set) var leases = Leases()
    private(set) var totals = Totals()

    /// What the store did since it was opened (`status`, the CLI, the tests).
    struct Totals: Sendable, Equatable {
        /// Logs evicted by S2/S5.
        var evicted = 0
        /// Logs deleted by S4 (by the expiry scan, or held by delivery and found too old to send).
        var expired = 0
        /// Logs moved to the dead-letter table (R2).
        var deadLettered = 0
        /// Dead letters dropped, oldest first, to keep the table under its cap.
        var deadLettersDropped = 0
        /// SPEC K1: sealed logs that did not open, deleted.
        var unreadable = 0
        /// SPEC S7: logs whose commits the file lost while the engine was stopped (a WAL cut short), found at open by
        /// the commit mark (`CommitMark`) and reported once.
        var lostAtOpen = 0
        /// SPEC S7: times a write found the disk, not the store's cap, full. Diagnostic.
        var diskFull = 0
        /// Writes that hit SQLITE_FULL — the hard cap or a full disk — and were tried again (`FullRetryPlan`): a
        /// measure of how good the soft size estimate is. Diagnostic.
        var fullRetries = 0
    }

    /// What one committed transaction did (or, for `.opened` and `.recounted`, what a read found).
    enum Change: Sendable {
        /// The file was opened — at start, or afresh after a corrupt one was moved aside: counts read from it. Numbering
        /// continues above what this ledger gave out already, so that a late call with an old seq or batch id cannot
        /// touch a row of the fresh file.
        case opened(logCount: Int, highestSeq: Int64, batchReservation: Int64, bound: ExpiryBound)
        /// `pending` counted from the file.
        case recounted(Waiting)
        /// Logs inserted with seqs up to `nextSeq - 1`; `stored` by priority.
        case appended(stored: Waiting, nextSeq: Int64, bound: ExpiryBound)
        /// A batch leased: its stretches, the batch ids reserved with it, the logs it took by priority; `floors`, per
        /// priority, the seq below which no pending row is left (when the claim took every due row below it).
        case claimed(batchID: Int64, stretches: [LeaseStretch], reservedThrough: Int64?, taken: Waiting, floors: [Int64?])
        /// A delivered batch's rows deleted with its leases.
        case completed(batchID: Int64, deleted: Int)
        /// Some logs deleted by seq (a delivered part; `expired`: held logs found too old to send, S4); what the
        /// batches holding them keep is `cut`.
        case completedSeqs(cut: [(batch: Int64, stretches: [LeaseStretch])], deleted: Int, expired: Bool)
        /// A batch's rows back to pending; `retryTime`: with a retry time stored (`MetaKey.retryTimes` written).
        case released(batchID: Int64, retryTime: Bool)
        case releasedSeqs(cut: [(batch: Int64, stretches: [LeaseStretch])], retryTime: Bool)
        /// The S4 scan deleted `count` logs and read the bounds again.
        case expired(count: Int, bound: ExpiryBound)
        /// S2/S5 evicted `count` logs.
        case evicted(count: Int)
        /// R2: logs moved to the dead letters, and letters dropped for the table's cap.
        case deadLettered(moved: Int, dropped: Int)
        /// R2 for one of several destinations: logs copied to its dead letters (the log stays while another destination
        /// has not settled it; it leaves, counted by `.completedSeqs`, once every one has).
        case deadLetteredFor(moved: Int)
        /// R2: dead letters back in the queue as pending logs, seqs up to `nextSeq - 1`, the oldest captured at
        /// `oldestWallMs` (they carry no boot id: they age on the wall clock, S4).
        case requeued(count: Int, nextSeq: Int64, oldestWallMs: Int64?)
        /// T6: every log and lease deleted.
        case deletedAll
        /// SPEC K1: sealed logs that did not open, deleted (by a claim, which took none of them).
        case unreadable(count: Int)
        /// SPEC S7: the commit mark found `count` logs lost while the engine was stopped.
        case lostAtOpen(count: Int)
        /// SPEC S7: a write found the disk full (and the disk was relieved).
        case diskFull
        /// A write that failed with SQLITE_FULL is tried again. Nothing committed: the failed attempt rolled back.
        case retriedFull
    }

    mutating func apply(_ change: Change) {
        switch change {
        case .opened(let logCount, let highestSeq, let batchReservation, let bound):
            self.logCount = logCount
            nextSeq = max(nextSeq, highestSeq + 1)
            lastBatchID = max(lastBatchID, batchReservation)
            reservedBatchID = batchReservation
            expiryBound = bound
            pending = nil
            claimFloor = [0, 0]
            leases.removeAll()
            retryTimesFlagged = false
        case .recounted(let waiting):
            pending = waiting
        case .appended(let stored, let nextSeq, let bound):
            self.nextSeq = nextSeq
            logCount += stored.total
            pending?.normal += stored.normal
            pending?.critical += stored.critical
            expiryBound.lower(to: bound)
        case .claimed(let batchID, let stretches, let reservedThrough, let taken, let floors):
            lastBatchID = batchID
            if let reservedThrough { reservedBatchID = reservedThrough }
            pending?.normal -= taken.normal
            pending?.critical -= taken.critical
            leases.add(stretches)
            for (index, floor) in floors.enumerated() {
                if let floor { claimFloor[index] = max(claimFloor[index], floor) }
            }
        case .completed(let batchID, let deleted):
            leases.remove(batch: batchID)
            logCount -= deleted
        case .completedSeqs(let cut, let deleted, let expired):
            cut.forEach { leases.replace(batch: $0.batch, with: $0.stretches) }
            logCount -= deleted
            if expired { totals.expired += deleted }
        case .released(let batchID, let retryTime):
            leases.remove(batch: batchID)
            releasedRows(retryTime: retryTime)
        case .releasedSeqs(let cut, let retryTime):
            cut.forEach { leases.replace(batch: $0.batch, with: $0.stretches) }
            releasedRows(retryTime: retryTime)
        case .expired(let count, let bound):
            expiryBound = bound
            guard count > 0 else { return }
            pending = nil
            logCount -= count
            totals.expired += count
        case .evicted(let count):
            guard count > 0 else { return }
            logCount -= count
            totals.evicted += count
            pending = nil
        case .deadLettered(let moved, let dropped):
            logCount -= moved
            pending = nil
            totals.deadLettered += moved
            totals.deadLettersDropped += dropped
        case .deadLetteredFor(let moved):
            totals.deadLettered += moved
        case .requeued(let count, let nextSeq, let oldestWallMs):
            self.nextSeq = nextSeq
            logCount += count
            expiryBound.lower(to: ExpiryBound(otherBootWallMs: oldestWallMs))
            if count > 0 { pending = nil }
        case .unreadable(let count):
            logCount -= count
            pending = nil
            totals.unreadable += count
        case .lostAtOpen(let count):
            totals.lostAtOpen += count
        case .diskFull:
            totals.diskFull += 1
        case .retriedFull:
            totals.fullRetries += 1
        case .deletedAll:
            leases.removeAll()
            logCount = 0
            pending = Waiting()
            expiryBound = ExpiryBound()
        }
    }

    private mutating func releasedRows(retryTime: Bool) {
        if retryTime { retryTimesFlagged = true }
        claimFloor = [0, 0]  // rows below the floor are pending again
        pending = nil
    }
}
