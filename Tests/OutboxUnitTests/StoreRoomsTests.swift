import Testing
@testable import Outbox

/// The store's pure rooms, without SQLite: the ledger of its counts, the eviction plan and the disk budget
/// (SPEC S2, S3, S4, S5, S7, C9).
@Suite("Store ledger, eviction plan and disk budget")
struct StoreRoomsTests {
    static func stretch(_ batch: Int64, _ first: Int64, _ last: Int64, _ priority: Priority = .normal) -> LeaseStretch {
        LeaseStretch(batch: batch, priority: priority, first: first, last: last)
    }

    // SPEC C9, C4: the ledger follows a session's committed changes: counts, pending by priority, leases, numbering.
    @Test func theLedgerFollowsWhatCommitted() {
        var ledger = StoreLedger()
        ledger.apply(.opened(logCount: 3, highestSeq: 10, batchReservation: 4096, bound: ExpiryBound()))
        #expect(ledger.nextSeq == 11 && ledger.lastBatchID == 4096 && ledger.reservedBatchID == 4096)
        #expect(ledger.pending == nil, "pending is counted from the file at the first read")
        ledger.apply(.recounted(Waiting(normal: 2, critical: 1)))
        ledger.apply(.appended(stored: Waiting(normal: 4, critical: 1), nextSeq: 16, bound: ExpiryBound(thisBootMonoNs: 5)))
        #expect(ledger.logCount == 8 && ledger.pending == Waiting(normal: 6, critical: 2) && ledger.nextSeq == 16)
        #expect(ledger.expiryBound.thisBootMonoNs == 5)
        ledger.apply(.claimed(batchID: 4097, stretches: [Self.stretch(4097, 11, 14)], reservedThrough: 8192,
                              taken: Waiting(normal: 4), floors: [15, nil]))
        #expect(ledger.pending == Waiting(normal: 2, critical: 2) && ledger.claimFloor == [15, 0])
        #expect(ledger.leases.stretches(of: 4097) == [Self.stretch(4097, 11, 14)] && ledger.reservedBatchID == 8192)
        ledger.apply(.completedSeqs(cut: [(4097, [Self.stretch(4097, 13, 14)])], deleted: 2, expired: true))
        #expect(ledger.logCount == 6 && ledger.totals.expired == 2)
        #expect(ledger.leases.stretches(of: 4097) == [Self.stretch(4097, 13, 14)])
        ledger.apply(.released(batchID: 4097, retryTime: true))
        #expect(ledger.leases.isEmpty && ledger.claimFloor == [0, 0] && ledger.pending == nil && ledger.retryTimesFlagged)
        ledger.apply(.evicted(count: 0))
        #expect(ledger.totals.evicted == 0 && ledger.logCount == 6)
        ledger.apply(.deadLettered(moved: 1, dropped: 3))
        ledger.apply(.requeued(count: 1, nextSeq: 17, oldestWallMs: 99))
        #expect(ledger.logCount == 6 && ledger.totals.deadLettered == 1 && ledger.totals.deadLettersDropped == 3)
        #expect(ledger.expiryBound.otherBootWallMs == 99 && ledger.nextSeq == 17)
        ledger.apply(.deletedAll)
        #expect(ledger.logCount == 0 && ledger.pending == Waiting() && ledger.nextSeq == 17, "numbering goes on (S7)")
    }

    // SPEC S7: a file opened afresh after a corrupt one was moved aside numbers above what this session gave out.
    @Test func aFreshFileContinuesTheNumbering() {
        var ledger = StoreLedger()
        ledger.apply(.opened(logCount: 0, highestSeq: 0, batchReservation: 0, bound: ExpiryBound()))
        ledger.apply(.appended(stored: Waiting(normal: 2000), nextSeq: 2001, bound: ExpiryBound()))
        ledger.apply(.claimed(batchID: 1, stretches: [Self.stretch(1, 1, 50)], reservedThrough: 4096, taken: Waiting(normal: 50),
                              floors: [51, nil]))
        ledger.apply(.opened(logCount: 0, highestSeq: 0, batchReservation: 0, bound: ExpiryBound()))
        #expect(ledger.nextSeq == 2001 && ledger.lastBatchID == 1 && ledger.reservedBatchID == 0)
        #expect(ledger.leases.isEmpty && ledger.logCount == 0 && ledger.claimFloor == [0, 0])
    }

    static let page = 4096

    static func need(used: Int, budget: Int = 100 * page, count: Int = 0, maxCount: Int? = nil,
                     critical: Bool = false) -> EvictionPlanner.Need {
        EvictionPlanner.Need(usedBytes: used, budgetBytes: budget, pageSize: page, logCount: count, maxLogCount: maxCount,
                             overflowMayEvictCritical: critical)
    }

    /// Rows of `bytes` each, pending then `inFlight` in flight, seqs from `first`.
    static func rows(_ pending: Int, inFlight: Int = 0, bytes: Int = 1000, first: Int64 = 1) -> [EvictionPlanner.Row] {
        (0..<(pending + inFlight)).map { EvictionPlanner.Row(seq: first + Int64($0), bytes: bytes, inFlight: $0 >= pending) }
    }

    /// A source of evictable rows that honours the (bytes, count) it is asked for, as `LogsTable.evictable` does.
    static func source(normal: [EvictionPlanner.Row], critical: [EvictionPlanner.Row]) -> EvictionPlanner.Evictable {
        { (priority, bytes, count) throws(OutboxError) in
            var taken: [EvictionPlanner.Row] = []
            var covered = 0
            for row in priority == .normal ? normal : critical where covered < bytes || taken.count < count {
                taken.append(row)
                covered += row.bytes
            }
            return taken
        }
    }

    // SPEC S2: under the budget, nothing is planned and no row is read.
    @Test func underTheBudgetNothingGoes() throws {
        let plan = try EvictionPlanner.plan(for: [.init(index: 0, bytes: 500, priority: .normal)], Self.need(used: 10 * Self.page)) {
            (_, _, _) throws(OutboxError) in
            Issue.record("no row is read under the budget")
            return []
        }
        #expect(plan == EvictionPlanner.Plan())
    }

    // SPEC S2: the oldest normal logs go first, pending before in flight, with a little slack.
    @Test func oldNormalLogsGoFirst() throws {
        let candidates = [EvictionPlanner.Candidate(index: 0, bytes: 2000, priority: .normal)]
        let plan = try EvictionPlanner.plan(for: candidates, Self.need(used: 100 * Self.page),
                                            evictable: Self.source(normal: Self.rows(3, inFlight: 10), critical: Self.rows(5)))
        #expect(plan.rejected.isEmpty && plan.reason == "storage cap")
        // 2000 bytes short, plus the slack (2000/16 + a page): 7 rows of 1000 bytes.
        #expect(plan.evictions == [.init(priority: .normal, rows: Array(Self.rows(3, inFlight: 10)[..<7]))])
    }

    // SPEC S3: critical logs make room only for critical logs; the batch's normal logs are refused first.
    @Test func criticalLogsMakeRoomOnlyForCriticalOnes() throws {
        let candidates: [EvictionPlanner.Candidate] = [.init(index: 0, bytes: 3000, priority: .normal),
                                                        .init(index: 1, bytes: 3000, priority: .critical)]
        let full = Self.need(used: 100 * Self.page)
        let plan = try EvictionPlanner.plan(for: candidates, full, evictable: Self.source(normal: [], critical: Self.rows(9)))
        #expect(plan.rejected == [0])
        #expect(plan.evictions == [.init(priority: .critical, rows: Array(Self.rows(9)[..<3]))])
        // Only normal candidates: stored critical logs stay, and the candidate is refused.
        let normalOnly = try EvictionPlanner.plan(for: [candidates[0]], full, evictable: Self.source(normal: [], critical: Self.rows(9)))
        #expect(normalOnly.rejected == [0] && normalOnly.evictions.isEmpty)
        // Not even critical logs suffice: the earliest critical candidates are refused too.
        let tooBig = try EvictionPlanner.plan(for: [.init(index: 0, bytes: 20_000, priority: .critical),
                                                    .init(index: 1, bytes: 100, priority: .critical)],
                                              full, evictable: Self.source(normal: [], critical: Self.rows(2)))
        #expect(tooBig.rejected == [0] && tooBig.evictions.first?.rows.count == 1)
    }

    // SPEC S5: the count cap evicts by count, whatever the bytes.
    @Test func theCountCapEvictsByCount() throws {
        let candidates = (0..<3).map { EvictionPlanner.Candidate(index: $0, bytes: 10, priority: .normal) }
        let plan = try EvictionPlanner.plan(for: candidates, Self.need(used: 0, count: 10, maxCount: 10),
                                            evictable: Self.source(normal: Self.rows(10, bytes: 10), critical: []))
        #expect(plan.reason == "count cap" && plan.rejected.isEmpty && plan.evictions.first?.rows.count == 3)
        // A lowered cap (an overflow from before) may take critical logs when no normal one is left.
        let lowered = try EvictionPlanner.plan(for: [], Self.need(used: 0, count: 4, maxCount: 2, critical: true),
                                               evictable: Self.source(normal: [], critical: Self.rows(4, bytes: 10)))
        #expect(lowered.evictions == [.init(priority: .critical, rows: Array(Self.rows(4, bytes: 10)[..<2]))])
    }

    // SPEC S2, S7: the budget's figures, and the full-disk plans.
    @Test func theDiskBudgetPlansFromWhatWasRead() {
        var budget = DiskBudget(limits: StoreLimits(maxStorageSize: 10 << 20))
        #expect(budget.capacityBytes == 0, "no room before the file is open")
        budget.opened(pageSize: 4096)
        #expect(budget.maxPages == 2560 && budget.capacityBytes == 10 << 20)
        #expect(budget.budgetBytes == budget.capacityBytes - (2 * 4096 + (10 << 20) / 64))
        #expect(budget.walAutocheckpointPages == 640 && budget.diskReserveBytes == 256 * 1024)
        // Plenty of room on the disk: SQLITE_FULL was the cap's, not the disk's.
        #expect(!budget.diskIsShort(pages: 2000, availableBytes: 1 << 30))
        #expect(budget.diskIsShort(pages: 2000, availableBytes: 1 << 20))
        // 1 MiB free, twice the reserve kept: 128 more pages than the file's 2000.
        let cap = budget.capOnFullDisk(pages: 2000, availableBytes: 1 << 20)
        #expect(cap == 2128)
        budget.diskFull(cap: cap)
        #expect(budget.diskCapped && budget.maxPages == 2128)
        #expect(budget.capOnFullDisk(pages: 2000, availableBytes: 1 << 20) == nil, "capped there already")
        // The file grew to the cap and the disk has just the two reserves left: no more room. Then some (not enough
        // for the whole cap), then plenty.
        #expect(budget.capWithRoom(pages: 2128, availableBytes: 512 * 1024) == nil)
        let more = budget.capWithRoom(pages: 2128, availableBytes: 2 << 20)
        #expect(more == 2128 + 384)
        #expect(budget.lift(to: more ?? 0) == false && budget.diskCapped)
        #expect(budget.lift(to: budget.capWithRoom(pages: 2512, availableBytes: 1 << 30) ?? 0) && !budget.diskCapped)
        #expect(budget.maxPages == 2560)
        #expect(budget.checkDue(nowNs: 1) && { var b = budget; b.lastCheckNs = 1; return !b.checkDue(nowNs: 2) }())
    }
}
