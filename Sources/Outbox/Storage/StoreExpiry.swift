import Logging

/// Expiry carried out (SPEC S4): the logs older than `maxAgeMs` deleted in one transaction, the bounds read again, the
/// deletion counted and logged. Like `StoreEviction`, the store's and the opening's, with only what it needs.
struct StoreExpiry {
    let logs: LogsTable
    let meta: MetaTable
    /// The boot id logs captured now carry (their age is measured on CLOCK_BOOTTIME).
    let boot: Int64
    let maxAgeMs: Int64
    /// The ledger's bounds of the stored logs' ages and its next seq, as they are before the transaction.
    let bound: ExpiryBound
    let nextSeq: Int64

    init(db: Database, keys: StoreKeys?, boot: Int64, maxAgeMs: Int64, ledger: StoreLedger) {
        logs = LogsTable(db: db, keys: keys)
        meta = MetaTable(db: db)
        self.boot = boot
        self.maxAgeMs = maxAgeMs
        bound = ledger.expiryBound
        nextSeq = ledger.nextSeq
    }

    /// Deletes the logs older than `maxAgeMs` (boot-time age under this boot, wall-clock age before `nowMs`
    /// otherwise), records (`.expired`) and logs them. Returns how many were deleted.
    func expire(nowMs: Int64, monoNs: Int64, logger: Logger,
                record: (StoreLedger.Change) -> Void) throws(OutboxError) -> Int {
        let wallCutoff = nowMs &- maxAgeMs
        let monoCutoff = monoNs &- maxAgeMs &* 1_000_000
        guard bound.mayHaveExpired(wallCutoff: wallCutoff, monoCutoff: monoCutoff) else { return 0 }
        // SPEC S4: a log of this boot ages on CLOCK_BOOTTIME, so that a wall clock stepped by NTP expires nothing by
        // itself; a log of an earlier boot can only age on the wall clock. The scan re-tightens the bounds.
        let (expired, bound) = try logs.db.transaction { () throws(OutboxError) -> (Int, ExpiryBound) in
            let deleted = try logs.deleteExpired(boot: boot, monoCutoff: monoCutoff, wallCutoff: wallCutoff)
            if deleted > 0 { try keepSeqHighAfterDelete() }
            return (deleted, try logs.expiryBound(boot: boot))
        }
        record(.expired(count: expired, bound: bound))
        guard expired > 0 else { return 0 }
        logger.info("deleted logs older than the maximum age (SPEC S4)", metadata: [
            "outbox.expired": "\(expired)",
            "outbox.max_age_ms": "\(maxAgeMs)",
        ])
        return expired
    }

    /// `MetaTable.keepSeqHigh` after a delete whose rows are not listed (expiry's filter): whether the highest row is
    /// gone is one seek.
    private func keepSeqHighAfterDelete() throws(OutboxError) {
        let top = nextSeq - 1
        guard top > 0, try logs.highestSeq() < top else { return }
        try meta.keepSeqHigh(nextSeq: nextSeq, deletingThrough: top)
    }
}
