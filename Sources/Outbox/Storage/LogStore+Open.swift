/// The store's side of opening (SPEC S7): the file is `StoreOpener`'s, the start-up on its connection `StoreOpening`'s;
/// the store takes the connection and what the start-up returns. Sealing a plain store opened with a key stays the
/// store's (`sealIfKeyed`, LogStore+Keys.swift): it runs a rotation's transactions with room made, which is the store's
/// sequencing.
extension LogStore {
    var opener: StoreOpener { StoreOpener(path: path, limits: limits, clock: clock, logger: logger) }

    /// Takes `opened` as the store's connection and runs the start-up on it: the store's ledger takes what the
    /// start-up reads and does as it happens, and the store keeps the room it set up and the commit mark.
    func start(_ opened: StoreOpener.Opened) throws(OutboxError) {
        db = opened.db
        checkedAtOpen = opened.checked
        keys = opened.keys
        rotation = nil
        recoveredFromCorruption = opened.movedAside
        // A store file created now, or one just moved aside (which reported its loss already), starts its mark afresh.
        let started = try StoreOpening(db: db, keys: keys, opener: opener, boot: boot)
            .start(disk: disk, ledger: ledger, commitMark: commitMark,
                   reportsLoss: recoveredFromCorruption == nil && !createdAtOpen, record: record)
        disk = started.disk
        commitMark = started.commitMark
    }

    /// Mid-session corruption (S7): the same treatment as at open, keeping the lock.
    func recoverFromCorruption(cause: OutboxError) throws(OutboxError) {
        db.close()
        // The engine may still hold seqs and batch ids of the lost file: the ledger's numbering continues above them
        // (`.opened`), so a late complete(seqs:) or complete(batchID:) cannot touch a row of the fresh file. The mark
        // stays at what the fresh file holds: raised to the lost file's seqs, it would report the loss again at the
        // next open, though the move aside has reported it already.
        try start(try opener.replaceCorrupt(cause: cause))
        try sealIfKeyed()
        // The fresh file knows no destination: each starts there with what is stored from now on (nothing yet).
        if let book = destinationBook { try useDestinations(book.destinations.map(\.name)) }
    }
}
