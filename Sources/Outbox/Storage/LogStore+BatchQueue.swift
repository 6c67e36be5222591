/// `LogStore` is delivery's queue: the counts delivery decides on are the store's own, never a copy kept apart.
extension LogStore: BatchQueue {
    func waiting() throws(OutboxError) -> Waiting {
        if let pending = ledger.pending { return pending }
        let counted = try waitingCounts()
        let fresh = Waiting(normal: counted.normal, critical: counted.critical)
        record(.recounted(fresh))
        return fresh
    }

    func claimBatch(limit: Int, completing: Int64?) throws(OutboxError) -> ClaimedBatch? {
        // Delivery claims every pending log whatever its next attempt time: retry timing is the machine's.
        try claim(limit: limit, nowMs: Int64.max, completing: completing).batch
    }

    func expire(seqs: [Int64]) throws(OutboxError) -> Int {
        guard !seqs.isEmpty else { return 0 }
        let expired = try delete(seqs: seqs, expired: true)
        logger.info("deleted logs older than the maximum age before sending them (SPEC S4)",
                    metadata: ["outbox.expired": "\(expired)"])
        return expired
    }

    func setDisabledReason(_ reason: String?) throws(OutboxError) {
        try setMeta(.disabledReason, reason)
    }

    func recordDestination(_ name: String) throws(OutboxError) {
        try setMeta(.destination, name)
    }

    func addServerRejected(_ count: Int) throws(OutboxError) {
        guard count > 0 else { return }
        let total = Int(try meta(.serverRejected) ?? "") ?? 0
        try setMeta(.serverRejected, String(total + count))
    }
}
