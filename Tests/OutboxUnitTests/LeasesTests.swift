import Testing
@testable import Outbox

/// Leases as stretches of seqs (SPEC C9): the pure bookkeeping the store keeps beside its `leases` table.
struct LeasesTests {
    private func stretch(_ batch: Int64, _ priority: Priority, _ first: Int64, _ last: Int64) -> LeaseStretch {
        LeaseStretch(batch: batch, priority: priority, first: first, last: last)
    }

    // SPEC C9, R1: a log leaving a bisected batch cuts its stretch in two; the batch keeps every other seq.
    @Test func cuttingSeqsSplitsOnlyTheStretchesThatHoldThem() {
        var leases = Leases()
        leases.add([stretch(1, .normal, 10, 19), stretch(1, .critical, 3, 5), stretch(2, .normal, 20, 29)])
        let cut = leases.cutting([12, 13, 19, 4])
        #expect(cut.map(\.batch) == [1])
        #expect(cut.first?.stretches == [stretch(1, .normal, 10, 11), stretch(1, .normal, 14, 18),
                                         stretch(1, .critical, 3, 3), stretch(1, .critical, 5, 5)])
        for (batch, stretches) in cut { leases.replace(batch: batch, with: stretches) }
        #expect(leases.stretches(of: 2) == [stretch(2, .normal, 20, 29)])
        #expect(leases.stretches(.normal).map(\.first) == [10, 14, 20])
    }

    // SPEC C9: cutting every seq of a stretch removes it; cutting seqs no stretch holds changes nothing.
    @Test func cuttingAWholeStretchRemovesItAndCuttingNothingHeldIsANoOp() {
        var leases = Leases()
        leases.add([stretch(4, .normal, 7, 8), stretch(5, .normal, 9, 9)])
        #expect(leases.cutting([1, 2, 100]).isEmpty)
        let cut = leases.cutting([7, 8])
        #expect(cut.count == 1 && cut[0].batch == 4 && cut[0].stretches.isEmpty)
        for (batch, stretches) in cut { leases.replace(batch: batch, with: stretches) }
        #expect(leases.stretches(.normal) == [stretch(5, .normal, 9, 9)])
        leases.remove(batch: 5)
        #expect(leases.isEmpty)
    }

    // SPEC C9: the claim's check, row by row in ascending seq: inside a stretch, between stretches, past the last.
    @Test func cursorAnswersForAscendingSeqs() {
        var cursor = LeaseCursor([stretch(1, .normal, 3, 4), stretch(2, .normal, 8, 8)])
        let leased = (1...10).filter { cursor.covers(Int64($0)) }
        #expect(leased == [3, 4, 8])
    }
}
