/// One stretch of a batch's lease (SPEC C9): every log of `priority` whose seq lies in `first...last` belongs
/// to `batch`. A claim takes the lowest claimable logs of a priority in seq order, so a batch is one stretch
/// per priority unless the claim stepped over logs it could not take (another batch's, or not due yet); then
/// the stretch ends before the first log skipped and a new one starts after it.
///
/// Stretches of one priority never overlap: a claim never extends a stretch across a log it skipped, and a log
/// leaves a stretch (bisection, R1) by cutting the stretch in two. A stretch may cover seqs that no longer exist
/// (delivered in part, evicted, expired): seqs are never reused within a session, and leases do not outlive one
/// (C9: all return to pending at start-up), so such holes are harmless.
struct LeaseStretch: Equatable, Sendable {
    var batch: Int64
    var priority: Priority
    var first: Int64
    var last: Int64
}

/// The engine's leases, kept in memory beside the `leases` table that records them (the store updates both,
/// the table in the transaction and this after its commit). A claim consults it for every row it reads; the
/// table is what survives a crash and what `outbox status` reads.
///
/// Leases as stretches rather than one row per log: marking and unmarking 50 logs one row at a time would be most
/// of SQLite's work per delivered log.
struct Leases: Sendable, Equatable {
    /// Per priority (by raw value), sorted by `first`.
    private(set) var byPriority: [[LeaseStretch]] = [[], []]

    var isEmpty: Bool { byPriority.allSatisfy(\.isEmpty) }

    /// The stretches of one priority, sorted by `first`.
    func stretches(_ priority: Priority) -> [LeaseStretch] { byPriority[priority.rawValue] }

    /// Every stretch of `batch`.
    func stretches(of batch: Int64) -> [LeaseStretch] {
        byPriority.flatMap { $0.filter { $0.batch == batch } }
    }

    mutating func add(_ stretches: [LeaseStretch]) {
        for stretch in stretches {
            byPriority[stretch.priority.rawValue].append(stretch)
        }
        for index in byPriority.indices {
            byPriority[index].sort { $0.first < $1.first }
        }
    }

    mutating func remove(batch: Int64) {
        for index in byPriority.indices {
            byPriority[index].removeAll { $0.batch == batch }
        }
    }

    mutating func removeAll() { byPriority = [[], []] }

    /// The batches whose stretches cover any of `seqs`, each with the stretches it keeps once those seqs leave
    /// it. A seq is cut from every stretch that covers it, whatever the log's priority: a stretch of the other
    /// priority does not hold that log, so cutting it there changes nothing it holds.
    func cutting(_ seqs: [Int64]) -> [(batch: Int64, stretches: [LeaseStretch])] {
        let cut = seqs.sorted()
        var affected: [Int64] = []
        for stretch in byPriority.joined() where !affected.contains(stretch.batch) {
            if Self.firstIndex(in: cut, atLeast: stretch.first).map({ cut[$0] <= stretch.last }) ?? false {
                affected.append(stretch.batch)
            }
        }
        return affected.map { batch in
            var kept: [LeaseStretch] = []
            for stretch in stretches(of: batch) {
                var start = stretch.first
                var index = Self.firstIndex(in: cut, atLeast: stretch.first)
                while let position = index, position < cut.count, cut[position] <= stretch.last {
                    if cut[position] > start {
                        kept.append(LeaseStretch(batch: batch, priority: stretch.priority, first: start, last: cut[position] - 1))
                    }
                    start = cut[position] + 1
                    index = position + 1
                }
                if start <= stretch.last {
                    kept.append(LeaseStretch(batch: batch, priority: stretch.priority, first: start, last: stretch.last))
                }
            }
            return (batch, kept)
        }
    }

    /// Replaces `batch`'s stretches with `stretches`.
    mutating func replace(batch: Int64, with stretches: [LeaseStretch]) {
        remove(batch: batch)
        add(stretches)
    }

    /// Index of the first element of sorted `values` that is ≥ `bound`, nil when none is.
    private static func firstIndex(in values: [Int64], atLeast bound: Int64) -> Int? {
        var low = 0
        var high = values.count
        while low < high {
            let middle = (low + high) / 2
            if values[middle] < bound { low = middle + 1 } else { high = middle }
        }
        return low < values.count ? low : nil
    }
}

/// Walks one priority's stretches alongside a claim's ascending scan: `covers(seq)` is answered from a cursor
/// that only moves forward, so checking every row costs a comparison or two.
struct LeaseCursor {
    private let stretches: [LeaseStretch]
    private var index = 0

    init(_ stretches: [LeaseStretch]) { self.stretches = stretches }

    /// Whether `seq` is leased. Calls must come in ascending `seq` order.
    mutating func covers(_ seq: Int64) -> Bool {
        while index < stretches.count && stretches[index].last < seq { index += 1 }
        return index < stretches.count && stretches[index].first <= seq
    }
}
