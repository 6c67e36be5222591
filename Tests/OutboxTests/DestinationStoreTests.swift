import Testing
@testable import Outbox

/// SPEC D16–D18 in the store: each destination claims, settles and dead-letters the one copy of each log on its own;
/// a log leaves once every destination settled it; the progress survives a restart; a list changes by name.
struct DestinationStoreTests {
    static func queues(_ store: LogStore, _ names: [String]) throws -> [DestinationQueue] {
        let inUse = try store.useDestinations(names)
        return try names.map { name in DestinationQueue(store: store, id: try #require(inUse.ids[name]), name: name) }
    }

    // SPEC D16, D17: two destinations each get every log once, in C4's order; a log stays until both settled it,
    // and the store is empty once both have.
    @Test func eachDestinationGetsEveryLogAndALogLeavesOnceBothSettledIt() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        let queues = try Self.queues(store, ["ops", "product"])
        let (ops, product) = (queues[0], queues[1])
        let priorities: [Priority] = [.normal, .critical, .normal, .normal, .critical, .normal]
        _ = try store.append(priorities.enumerated().map { Fixture.log($0.offset, priority: $0.element) })
        #expect(try ops.waiting() == Waiting(normal: 4, critical: 2))

        let opsFirst = try #require(try ops.claimBatch(limit: 3, completing: nil))
        #expect(opsFirst.logs.map(Fixture.ordinal) == [1, 4, 0])
        let productAll = try #require(try product.claimBatch(limit: 10, completing: nil))
        #expect(productAll.logs.map(Fixture.ordinal) == [1, 4, 0, 2, 3, 5])
        #expect(try ops.waiting() == Waiting(normal: 3, critical: 0))
        #expect(try product.waiting() == Waiting())

        // ops delivers its first batch: product still holds those logs, so they stay.
        let opsRest = try #require(try ops.claimBatch(limit: 10, completing: opsFirst.batchID))
        #expect(opsRest.logs.map(Fixture.ordinal) == [2, 3, 5])
        #expect(store.logCount == 6)
        // product delivers everything: the three ops settled leave; the rest wait for ops.
        #expect(try product.complete(batchID: productAll.batchID) == 3)
        #expect(store.logCount == 3)
        #expect(try product.claimBatch(limit: 10, completing: nil) == nil)
        #expect(try ops.complete(batchID: opsRest.batchID) == 3)
        #expect(store.logCount == 0)
        #expect(try store.destinationsTable.settled().values.allSatisfy(\.isEmpty))
    }

    // SPEC D16, C9: with two destinations the claim, settle, release and count statements are compiled once. A bound
    // `priority = ?` matched against the partial index `logs_critical` made SQLite compile the settled rows' prune and
    // the pending count again at every batch: a third of the loop's time delivering to two.
    @Test func twoDestinationsCompileTheirStatementsOnce() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        let queues = try Self.queues(store, ["a", "b"])
        _ = try store.append((0..<40).map { Fixture.log($0, priority: $0 % 3 == 0 ? .critical : .normal) })
        // Statements cached while the open created the schema were compiled again once after it: not counted.
        let before = store.db.repreparedStatements
        var held: [Int64?] = [nil, nil]
        for round in 0..<8 {
            _ = try store.append([Fixture.log(100 + round, priority: round % 3 == 0 ? .critical : .normal)])
            for (index, queue) in queues.enumerated() {
                _ = try queue.waiting()
                let batch = try #require(try queue.claimBatch(limit: 3, completing: held[index]))
                if round % 4 == 3 {
                    #expect(try queue.release(batchID: batch.batchID, nextAttemptMs: 0) >= 3)
                    held[index] = nil
                } else {
                    held[index] = batch.batchID
                }
            }
        }
        #expect(store.logCount < 48)
        #expect(store.db.repreparedStatements == before)
    }

    // SPEC D16: a destination's pending count is kept, not counted again from the file after every append: an
    // eviction check that took nothing made every destination count its settled stretches' rows again at every
    // batch, a scan of the store each time (a hundred times the loop's time delivering to two).
    @Test func appendsKeepEachDestinationsPendingCount() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        let queues = try Self.queues(store, ["a", "b"])
        _ = try store.append((0..<6).map { Fixture.log($0) })
        #expect(try queues[0].waiting() == Waiting(normal: 6, critical: 0))
        let batch = try #require(try queues[0].claimBatch(limit: 4, completing: nil))
        _ = try store.append([Fixture.log(6, priority: .critical)])
        #expect(store.destinationBook?[queues[0].id]?.pending == Waiting(normal: 2, critical: 1))
        _ = try queues[0].claimBatch(limit: 4, completing: batch.batchID)
        _ = try store.append([Fixture.log(7)])
        #expect(store.destinationBook?[queues[0].id]?.pending == Waiting(normal: 1, critical: 0))
        #expect(try queues[0].waiting() == Waiting(normal: 1, critical: 0))
        #expect(try queues[1].waiting() == Waiting(normal: 7, critical: 1))
    }

    // SPEC D16: one destination's retries and releases never give the other a log twice or take one from it.
    @Test func aReleaseIsTheReleasingDestinationsOnly() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        let queues = try Self.queues(store, ["a", "b"])
        _ = try store.append((0..<4).map { Fixture.log($0) })
        let a1 = try #require(try queues[0].claimBatch(limit: 2, completing: nil))
        let b1 = try #require(try queues[1].claimBatch(limit: 4, completing: nil))
        #expect(try queues[0].release(batchID: a1.batchID, nextAttemptMs: 0) == 2)
        let again = try #require(try queues[0].claimBatch(limit: 10, completing: nil))
        #expect(again.logs.map(Fixture.ordinal) == [0, 1, 2, 3])
        #expect(try queues[1].claimBatch(limit: 10, completing: nil) == nil)
        #expect(try queues[1].complete(batchID: b1.batchID) == 0)
        #expect(try queues[0].complete(seqs: [again.logs[0].seq, again.logs[1].seq]) == 2)
        #expect(store.logCount == 2)
    }

    // SPEC R2, D16: a log one destination refuses is its dead letter only; the other still delivers it, and it leaves
    // the store when that one has.
    @Test func aDeadLetterIsTheRefusingDestinationsOnly() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        let queues = try Self.queues(store, ["a", "b"])
        _ = try store.append((0..<3).map { Fixture.log($0) })
        let a1 = try #require(try queues[0].claimBatch(limit: 3, completing: nil))
        #expect(try queues[0].deadLetter(seqs: [a1.logs[1].seq], status: 400, reason: "bad") == 1)
        #expect(try queues[0].complete(seqs: [a1.logs[0].seq, a1.logs[2].seq]) == 0)
        #expect(store.logCount == 3)
        #expect(try store.db.int64("SELECT dest FROM dead_letters") == queues[0].id)
        let b1 = try #require(try queues[1].claimBatch(limit: 3, completing: nil))
        #expect(b1.logs.count == 3)
        #expect(try queues[1].complete(batchID: b1.batchID) == 3)
        #expect(store.logCount == 0)
        #expect(try store.deadLetters().count == 1)
    }

    // SPEC D17: what each destination settled survives a restart: after it, each claims only what it has not settled.
    @Test func progressSurvivesARestart() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("store.sqlite")
        do {
            let store = try Fixture.open(path); defer { store.close() }
            let queues = try Self.queues(store, ["a", "b"])
            _ = try store.append((0..<5).map { Fixture.log($0) })
            let a1 = try #require(try queues[0].claimBatch(limit: 3, completing: nil))
            _ = try queues[0].complete(batchID: a1.batchID)
            // b's batch is in flight when the process stops: it is b's to send again.
            _ = try #require(try queues[1].claimBatch(limit: 2, completing: nil))
        }
        let store = try Fixture.open(path); defer { store.close() }
        let queues = try Self.queues(store, ["a", "b"])
        #expect(try queues[0].waiting() == Waiting(normal: 2, critical: 0))
        #expect(try queues[1].waiting() == Waiting(normal: 5, critical: 0))
        let a2 = try #require(try queues[0].claimBatch(limit: 10, completing: nil))
        #expect(a2.logs.map(Fixture.ordinal) == [3, 4])
        let b = try #require(try queues[1].claimBatch(limit: 10, completing: nil))
        #expect(b.logs.map(Fixture.ordinal) == [0, 1, 2, 3, 4])
    }

    // SPEC D18: an added destination receives the logs stored from then on; a removed one's logs leave, and a store
    // written with one destination keeps its progress as `default` when it grows a list.
    @Test func addingAndRemovingDestinationsByName() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        // One destination, as a store before lists: two logs pending.
        #expect(try store.useDestinations(["default"]).ids == ["default": 0])
        #expect(store.destinationBook == nil)
        _ = try store.append((0..<2).map { Fixture.log($0) })

        var queues = try Self.queues(store, ["default", "product"])
        #expect(try queues[0].waiting().total == 2)
        #expect(try queues[1].waiting().total == 0)
        _ = try store.append([Fixture.log(2)])
        #expect(try queues[1].waiting().total == 1)
        #expect(try queues[0].waiting().total == 3)

        // `default` goes: the two logs only it held leave; `product` keeps its one.
        queues = try Self.queues(store, ["product"])
        #expect(store.logCount == 1)
        let batch = try #require(try queues[0].claimBatch(limit: 10, completing: nil))
        #expect(batch.logs.map(Fixture.ordinal) == [2])
        #expect(try store.useDestinations(["product"]).removed.isEmpty)
    }

    // SPEC T6: opting out deletes every log for every destination, and each starts afresh.
    @Test func optOutDeletesForEveryDestination() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        let queues = try Self.queues(store, ["a", "b"])
        _ = try store.append((0..<3).map { Fixture.log($0) })
        let a1 = try #require(try queues[0].claimBatch(limit: 2, completing: nil))
        _ = try queues[0].complete(batchID: a1.batchID)
        #expect(try queues[1].deleteAllLogs() == 3)
        #expect(store.logCount == 0)
        #expect(try queues[0].waiting().total == 0 && queues[1].waiting().total == 0)
        _ = try store.append([Fixture.log(3)])
        #expect(try queues[0].claimBatch(limit: 5, completing: nil)?.logs.count == 1)
        #expect(try queues[1].claimBatch(limit: 5, completing: nil)?.logs.count == 1)
    }

    // SPEC D17: pure intersection: a log leaves only where every other destination settled it too.
    @Test func settledByAllOthersIsTheIntersection() {
        var a = DestinationProgress(id: 1, name: "a"), b = DestinationProgress(id: 2, name: "b"), c = DestinationProgress(id: 3, name: "c")
        a.settled.insert(1...10, .normal)
        b.settled.insert(5...20, .normal)
        c.settled.insert(1...3, .normal)
        c.settled.insert(8...30, .normal)
        let book = DestinationBook([a, b, c])
        let gone = book.settledByAllOthers(than: 1, [LeaseStretch(batch: 9, priority: .normal, first: 1, last: 12)])
        #expect(gone.map { $0.first...$0.last } == [8...12])
        #expect(book.settledByAllOthers(than: 1, [LeaseStretch(batch: 9, priority: .critical, first: 1, last: 12)]).isEmpty)
        var merged = SeqStretches()
        merged.insert(1...3, .normal)
        merged.insert(5...6, .normal)
        merged.insert(4...4, .normal)
        #expect(merged.ranges(.normal) == [1...6])
        #expect(merged.skipping(from: 2, .normal) == 7)
        #expect(merged.contains(6, .normal) && !merged.contains(7, .normal) && !merged.contains(2, .critical))
    }

    // SPEC D17: storage beyond one destination is at most 16 bytes per pending log per extra destination, measured as
    // the store's used pages with 10 000 pending logs — pending for both, and after one of them delivered them all
    // in batches of 50 while the other still holds them. Prints the figures BENCHMARKS.md quotes.
    @Test func aSecondDestinationCostsAtMost16BytesAPendingLog() throws {
        let count = 10_000
        func usedBytes(destinations: [String], deliverFirst: Bool) throws -> Int {
            let dir = TempDirectory(); defer { dir.remove() }
            var limits = StoreLimits()
            limits.maxStorageSize = 64 << 20
            let store = try Fixture.open(dir.file("store.sqlite"), limits: limits)
            defer { store.close() }
            let queues = try Self.queues(store, destinations)
            for start in stride(from: 0, to: count, by: 1000) {
                _ = try store.append((start..<start + 1000).map { Fixture.log($0) })
            }
            if deliverFirst {
                while let batch = try queues[0].claimBatch(limit: 50, completing: nil) {
                    _ = try queues[0].complete(batchID: batch.batchID)
                }
            }
            #expect(store.logCount == count)
            return try LogStore.usedBytes(store.db)
        }
        let one = try usedBytes(destinations: ["default"], deliverFirst: false)
        let pending = try usedBytes(destinations: ["ops", "product"], deliverFirst: false)
        let deliveredByOne = try usedBytes(destinations: ["ops", "product"], deliverFirst: true)
        print("D17: one destination \(one) B; two, all pending \(pending) B (+\(pending - one)); two, one delivered all "
              + "\(deliveredByOne) B (+\(deliveredByOne - one)); per pending log: \(Double(pending - one) / Double(count)) B and "
              + "\(Double(deliveredByOne - one) / Double(count)) B")
        #expect(pending - one <= 16 * count)
        #expect(deliveredByOne - one <= 16 * count)
    }

    // SPEC D18: a requeued dead letter is pending for the destination that refused it only; listing and purging
    // narrow to a destination, and an unknown name is refused.
    @Test func aRequeuedDeadLetterIsPendingForItsDestinationOnly() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite")); defer { store.close() }
        let queues = try Self.queues(store, ["a", "b"])
        _ = try store.append((0..<2).map { Fixture.log($0) })
        let a1 = try #require(try queues[0].claimBatch(limit: 2, completing: nil))
        _ = try queues[0].deadLetter(seqs: [a1.logs[0].seq], status: 400, reason: "bad")
        _ = try queues[0].complete(seqs: [a1.logs[1].seq])
        let b1 = try #require(try queues[1].claimBatch(limit: 2, completing: nil))
        _ = try queues[1].complete(batchID: b1.batchID)
        #expect(store.logCount == 0)
        #expect(try store.deadLetterRecords(destination: "a").map(\.destination) == ["a"])
        #expect(try store.deadLetterRecords(destination: "b").isEmpty)
        #expect(throws: OutboxError.self) { try store.deadLetterRecords(destination: "c") }

        #expect(try store.requeueDeadLetters(destination: "a").requeued == 1)
        #expect(try queues[1].waiting().total == 0, "b delivered it already")
        #expect(try queues[1].claimBatch(limit: 5, completing: nil) == nil)
        let again = try #require(try queues[0].claimBatch(limit: 5, completing: nil))
        #expect(again.logs.map(Fixture.ordinal) == [0])
        _ = try queues[0].complete(batchID: again.batchID)
        #expect(store.logCount == 0)
        #expect(try store.purgeDeadLetters(destination: "b") == 0)
    }
}
