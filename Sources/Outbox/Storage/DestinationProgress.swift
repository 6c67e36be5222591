/// Sorted, disjoint, merged stretches of seqs per priority: the logs one destination has settled (SPEC D17).
/// A stretch may cover seqs that no longer exist; seqs are never reused (`MetaTable.keepSeqHigh`), so such holes
/// are harmless, as with leases.
struct SeqStretches: Sendable, Equatable {
    /// Per priority (by raw value), sorted by lower bound, disjoint and not adjacent.
    private(set) var byPriority: [[ClosedRange<Int64>]] = [[], []]

    var isEmpty: Bool { byPriority.allSatisfy(\.isEmpty) }

    func ranges(_ priority: Priority) -> [ClosedRange<Int64>] { byPriority[priority.rawValue] }

    mutating func insert(_ range: ClosedRange<Int64>, _ priority: Priority) {
        var list = byPriority[priority.rawValue]
        var merged = range
        // Ranges that overlap or touch `range` merge into it.
        list.removeAll { existing in
            guard existing.lowerBound <= merged.upperBound &+ 1 && merged.lowerBound <= existing.upperBound &+ 1 else { return false }
            merged = min(existing.lowerBound, merged.lowerBound)...max(existing.upperBound, merged.upperBound)
            return true
        }
        let index = list.firstIndex { $0.lowerBound > merged.lowerBound } ?? list.endIndex
        list.insert(merged, at: index)
        byPriority[priority.rawValue] = list
    }

    func contains(_ seq: Int64, _ priority: Priority) -> Bool {
        let list = byPriority[priority.rawValue]
        var low = 0, high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle].upperBound < seq { low = middle + 1 } else { high = middle }
        }
        return low < list.count && list[low].contains(seq)
    }

    /// The parts of `range` these stretches cover.
    func covered(_ range: ClosedRange<Int64>, _ priority: Priority) -> [ClosedRange<Int64>] {
        byPriority[priority.rawValue].compactMap { existing in
            let lower = max(existing.lowerBound, range.lowerBound), upper = min(existing.upperBound, range.upperBound)
            return lower <= upper ? lower...upper : nil
        }
    }

    /// The highest seq `from` reaches through stretches that start at or below it: a claim that starts there skips
    /// the settled logs at the head of the queue.
    func skipping(from seq: Int64, _ priority: Priority) -> Int64 {
        var next = seq
        for range in byPriority[priority.rawValue] where range.lowerBound <= next {
            if range.upperBound >= next { next = range.upperBound + 1 }
        }
        return next
    }

    mutating func removeAll() { byPriority = [[], []] }
}

/// One destination's progress through the store when an engine has several (SPEC D16–D17): its settled logs, its
/// batches in flight, where its claims start, and its pending count. Kept in memory beside the `settled` and
/// `leases` tables (their rows carry the destination's id), changed only after the transaction that wrote them
/// committed. Pure: the store (`LogStore+Destinations.swift`) does the SQL.
struct DestinationProgress: Sendable, Equatable {
    /// The destination's id in the `destinations` table.
    let id: Int64
    let name: String
    var settled = SeqStretches()
    var leases = Leases()
    /// Per priority, a seq below which nothing is pending for this destination (see `StoreLedger.claimFloor`).
    var claimFloor: [Int64] = [0, 0]
    /// Logs this destination has still to claim, by priority; nil: count again.
    var pending: Waiting?

    init(id: Int64, name: String) {
        self.id = id
        self.name = name
    }

    /// What a claim of `priority` steps over: the destination's leases and settled logs, as one sorted list of
    /// stretches (they never overlap: a leased log is not settled).
    func skipped(_ priority: Priority) -> [LeaseStretch] {
        let settledStretches = settled.ranges(priority).map {
            LeaseStretch(batch: 0, priority: priority, first: $0.lowerBound, last: $0.upperBound)
        }
        return (leases.stretches(priority) + settledStretches).sorted { $0.first < $1.first }
    }

    /// Where a claim of `priority` starts: the floor, moved past the settled logs at its head.
    func claimStart(_ priority: Priority) -> Int64 {
        settled.skipping(from: claimFloor[priority.rawValue], priority)
    }
}

/// Every destination's progress, and what they share: the batch ids (unique across destinations, since the
/// `leases` table keys by batch) and the rule that a log leaves the store once every destination settled it.
struct DestinationBook: Sendable, Equatable {
    private(set) var destinations: [DestinationProgress] = []
    private(set) var lastBatchID: Int64 = 0

    init(_ destinations: [DestinationProgress]) {
        self.destinations = destinations
    }

    func index(of id: Int64) -> Int? { destinations.firstIndex { $0.id == id } }

    subscript(id: Int64) -> DestinationProgress? { index(of: id).map { destinations[$0] } }

    /// A book made again (an update of the list) keeps numbering above the batches its predecessor gave out, some of
    /// which may still be in flight.
    mutating func continueBatchIDs(after id: Int64) { lastBatchID = max(lastBatchID, id) }

    mutating func nextBatchID() -> Int64 {
        lastBatchID += 1
        return lastBatchID
    }

    mutating func update(_ id: Int64, _ body: (inout DestinationProgress) -> Void) {
        guard let index = index(of: id) else { return }
        body(&destinations[index])
    }

    /// The parts of `stretches` that every destination but `id` has settled as well: once `id` settles them, no
    /// destination needs those logs and they leave the store (SPEC D17).
    func settledByAllOthers(than id: Int64, _ stretches: [LeaseStretch]) -> [LeaseStretch] {
        var result: [LeaseStretch] = []
        for stretch in stretches {
            var parts = [stretch.first...stretch.last]
            for other in destinations where other.id != id {
                parts = parts.flatMap { other.settled.covered($0, stretch.priority) }
                if parts.isEmpty { break }
            }
            result += parts.map { LeaseStretch(batch: stretch.batch, priority: stretch.priority, first: $0.lowerBound, last: $0.upperBound) }
        }
        return result
    }

    /// Every count cached from the file is counted again at its next read (rows left under a change of unknown shape:
    /// eviction, expiry, a release).
    mutating func forgetPending() {
        for index in destinations.indices { destinations[index].pending = nil }
    }

    mutating func appended(_ stored: Waiting) {
        for index in destinations.indices {
            destinations[index].pending?.normal += stored.normal
            destinations[index].pending?.critical += stored.critical
        }
    }

    /// T6 or a fresh file: nothing settled, nothing in flight.
    mutating func reset() {
        for index in destinations.indices {
            destinations[index].settled.removeAll()
            destinations[index].leases.removeAll()
            destinations[index].claimFloor = [0, 0]
            destinations[index].pending = nil
        }
    }
}
