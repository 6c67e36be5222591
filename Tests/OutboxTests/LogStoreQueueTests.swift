import Testing
@testable import Outbox

/// Appending, claiming, completing, releasing, dead letters, expiry, opt-out, meta.
struct LogStoreQueueTests {
    // SPEC C4: critical logs are claimed first; within a priority, ascending seq.
    @Test func claimTakesCriticalLogsFirstThenAscendingSeq() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        let priorities: [Priority] = [.normal, .critical, .normal, .critical, .normal, .normal, .critical]
        let result = try store.append(priorities.enumerated().map { Fixture.log($0.offset, priority: $0.element) })
        #expect(result == AppendResult(stored: 7, evicted: 0, rejected: [:]))

        let first = try #require(try store.claim(limit: 4, nowMs: 0))
        #expect(first.logs.map(Fixture.ordinal) == [1, 3, 6, 0])
        #expect(first.logs.map(\.priority) == [.critical, .critical, .critical, .normal])
        let second = try #require(try store.claim(limit: 10, nowMs: 0))
        #expect(second.logs.map(Fixture.ordinal) == [2, 4, 5])
        #expect(second.batchID > first.batchID)
        #expect(try store.claim(limit: 10, nowMs: 0) == nil)
    }

    // SPEC C4, C9 with the claim's floor (the scan starts above the rows already claimed): claims as delivery
    // makes them (every row claimable) walk the queue in order, a released batch is claimed again first, and
    // logs stored meanwhile come after it.
    @Test func claimsAsDeliveryMakesThemKeepTheOrderAcrossReleases() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        let priorities: [Priority] = (0..<12).map { $0 % 4 == 3 ? .critical : .normal }
        _ = try store.append(priorities.enumerated().map { Fixture.log($0.offset, priority: $0.element) })
        let first = try #require(try store.claim(limit: 4, nowMs: .max))
        #expect(first.logs.map(Fixture.ordinal) == [3, 7, 11, 0])
        let second = try #require(try store.claim(limit: 3, nowMs: .max))
        #expect(second.logs.map(Fixture.ordinal) == [1, 2, 4])
        let third = try #require(try store.claim(limit: 2, nowMs: .max))
        #expect(third.logs.map(Fixture.ordinal) == [5, 6])
        #expect(try store.release(batchID: second.batchID, nextAttemptMs: 0) == 3)
        _ = try store.append([Fixture.log(12), Fixture.log(13, priority: .critical)])
        #expect(try store.complete(batchID: first.batchID) == 4)
        let again = try #require(try store.claim(limit: 5, nowMs: .max))
        #expect(again.logs.map(Fixture.ordinal) == [13, 1, 2, 4, 8])
        _ = try store.release(seqs: third.logs.map(\.seq), nextAttemptMs: 0)
        let rest = try #require(try store.claim(limit: 10, nowMs: .max))
        #expect(rest.logs.map(Fixture.ordinal) == [5, 6, 9, 10, 12])
        #expect(try store.claim(limit: 10, nowMs: .max) == nil)
        #expect(try store.counts().inFlight == 10)
    }

    // SPEC C9, R1, R3: a claim that steps over logs it cannot take (a bisected batch's, another batch's, one not due
    // yet) leases only the logs it took, in several stretches: completing it deletes exactly them, and the logs it
    // stepped over keep their own leases and due times.
    @Test func claimSteppingOverLogsItCannotTakeLeasesOnlyItsOwn() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append((0..<16).map { Fixture.log($0) })
        let a = try #require(try store.claim(limit: 5, nowMs: .max))
        let b = try #require(try store.claim(limit: 5, nowMs: .max))
        #expect(b.logs.map(Fixture.ordinal) == [5, 6, 7, 8, 9])
        // A part of batch a comes back (bisection): 0 and 1 at once, 2 in five seconds.
        #expect(try store.release(seqs: Array(a.logs[0..<2].map(\.seq)), nextAttemptMs: 0) == 2)
        #expect(try store.release(seqs: [a.logs[2].seq], nextAttemptMs: 5000) == 1)

        let c = try #require(try store.claim(limit: 6, nowMs: 1000))
        #expect(c.logs.map(Fixture.ordinal) == [0, 1, 10, 11, 12, 13])
        #expect(store.leases.stretches(of: c.batchID).map { [$0.first, $0.last] }
                == [[a.logs[0].seq, a.logs[1].seq], [c.logs[2].seq, c.logs[5].seq]])
        #expect(try leaseRows(store) == store.leases.stretches(.normal).map { [$0.batch, $0.first, $0.last] })
        #expect(try store.counts().inFlight == 2 + 5 + 6)
        _ = try store.append([Fixture.log(16, priority: .critical), Fixture.log(17, priority: .critical)])
        _ = try #require(try store.claim(limit: 1, nowMs: 1000, priority: .critical))
        let counts = try store.counts()
        #expect(try store.waitingCounts() == (counts.pendingNormal, counts.pendingCritical))
        #expect(try store.waitingCounts() == (3, 1))
        #expect(store.logCount == (try store.allLogs().count))
        _ = try store.complete(seqs: try store.allLogs().filter { $0.priority == .critical }.map(\.seq))

        #expect(try store.complete(batchID: c.batchID) == 6)
        #expect(try store.allLogs().map(Fixture.ordinal) == [2, 3, 4, 5, 6, 7, 8, 9, 14, 15])
        #expect(try store.release(batchID: b.batchID, nextAttemptMs: 0) == 5)
        #expect(try store.complete(batchID: a.batchID) == 2)
        #expect(try store.claim(limit: 20, nowMs: 1000)?.logs.map(Fixture.ordinal) == [5, 6, 7, 8, 9, 14, 15])
        #expect(try store.claim(limit: 20, nowMs: 6000)?.logs.map(Fixture.ordinal) == [2])
        #expect(try leaseRows(store) == store.leases.stretches(.normal).map { [$0.batch, $0.first, $0.last] })
        #expect(store.logCount == (try store.allLogs().count))
    }

    /// The `leases` table's rows as [batch, first, last], in `first` order.
    private func leaseRows(_ store: LogStore) throws -> [[Int64]] {
        let select = try store.db.prepare("SELECT batch, first, last FROM leases ORDER BY first")
        var rows: [[Int64]] = []
        while try select.step() { rows.append([select.int64(at: 0), select.int64(at: 1), select.int64(at: 2)]) }
        return rows
    }

    // SPEC C4: seq is assigned at store time, in input order across appends; never by wall clock.
    @Test func seqFollowsStoreOrderNotWallClock() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append([Fixture.log(0, wallMs: Fixture.baseWallMs + 5000), Fixture.log(1, wallMs: Fixture.baseWallMs)])
        _ = try store.append([Fixture.log(2, wallMs: Fixture.baseWallMs - 5000)])
        let batch = try #require(try store.claim(limit: 10, nowMs: 0))
        #expect(batch.logs.map(Fixture.ordinal) == [0, 1, 2])
        #expect(batch.logs.map(\.seq) == batch.logs.map(\.seq).sorted())
    }

    // SPEC C2 (the engine claims one priority at a time when it wants to).
    @Test func claimCanBeLimitedToOnePriority() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append([Fixture.log(0), Fixture.log(1, priority: .critical), Fixture.log(2)])
        #expect(try store.claim(limit: 10, nowMs: 0, priority: .normal)?.logs.map(Fixture.ordinal) == [0, 2])
        #expect(try store.claim(limit: 10, nowMs: 0, priority: .critical)?.logs.map(Fixture.ordinal) == [1])
    }

    // SPEC T7: every field of a log comes back as stored (the id in canonical byte order).
    @Test func storedLogsRoundTrip() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        let log = NewLog(id: UUIDBytes(high: 0x0011_2233_4455_6677, low: 0x8899_AABB_CCDD_EEFF), priority: .critical,
                         wallMs: 1_700_000_000_123, monoNs: 987_654_321_000, boot: -42, context: 3,
                         payload: Array("{\"type\":\"event\",\"name\":\"tap\"}".utf8))
        _ = try store.append([log])
        let stored = try #require(try store.allLogs().first)
        #expect(stored.id == log.id)
        #expect(stored.priority == .critical)
        #expect(stored.wallMs == log.wallMs && stored.monoNs == log.monoNs && stored.boot == -42 && stored.context == 3)
        #expect(stored.payload == log.payload)
        let raw = try store.db.prepare("SELECT hex(id) FROM logs")
        #expect(try raw.step())
        #expect(raw.string(at: 0) == "00112233445566778899AABBCCDDEEFF")
    }

    // SPEC S6, C9: a batch in flight when the process died is sent again after restart.
    @Test func inFlightRowsReturnToPendingOnReopen() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        _ = try store.append((0..<5).map { Fixture.log($0) })
        let batch = try #require(try store.claim(limit: 3, nowMs: 0))
        try store.release(seqs: [batch.logs[2].seq], nextAttemptMs: .max)
        #expect(try store.counts().inFlight == 2)
        #expect(try store.claim(limit: 10, nowMs: 0)?.logs.map(Fixture.ordinal) == [3, 4])
        store.close()

        let reopened = try Fixture.open(path)
        defer { reopened.close() }
        let counts = try reopened.counts()
        #expect(counts.inFlight == 0)
        #expect(counts.pendingNormal == 5)
        // Retry times belonged to the dead process: everything is claimable now, in seq order.
        let again = try #require(try reopened.claim(limit: 10, nowMs: 0))
        #expect(again.logs.map(Fixture.ordinal) == [0, 1, 2, 3, 4])
        #expect(again.batchID > batch.batchID, "batch ids stay monotonic across restarts")
    }

    // SPEC C9: batch ids are reserved in meta a block at a time: one meta write per block of claims, and a restart
    // numbers above the reservation, so an id is never given twice.
    @Test func batchIDsAreReservedABlockAtATime() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        // A log for every id of the block, and two more.
        _ = try store.append((0..<Int(LogStore.batchIDBlock) + 2).map { Fixture.log($0, payloadBytes: 10) })
        func stored(_ store: LogStore) throws -> Int64? { try store.meta(.lastBatch).flatMap { Int64($0) } }

        let first = try #require(try store.claim(limit: 1, nowMs: 0))
        let reservation = first.batchID + LogStore.batchIDBlock - 1
        #expect(try stored(store) == reservation)
        let second = try #require(try store.claim(limit: 1, nowMs: 0))
        #expect(second.batchID == first.batchID + 1)
        #expect(try stored(store) == reservation, "a claim inside the block writes no meta")

        // The claim past the reservation stores the next block: the block's other ids are given out first (each
        // claim delivers the one before it, one commit each).
        var last = second.batchID
        while last < reservation {
            last = try #require(try store.claim(limit: 1, nowMs: 0, completing: last).batch).batchID
        }
        #expect(try stored(store) == reservation, "every claim of the block kept to its reservation")
        let third = try #require(try store.claim(limit: 1, nowMs: 0))
        #expect(third.batchID == reservation + 1)
        #expect(try stored(store) == reservation + LogStore.batchIDBlock)
        store.close()

        let reopened = try Fixture.open(path)
        defer { reopened.close() }
        let again = try #require(try reopened.claim(limit: 1, nowMs: 0))
        #expect(again.batchID == reservation + LogStore.batchIDBlock + 1)
        #expect(try stored(reopened) == again.batchID + LogStore.batchIDBlock - 1)
    }

    // SPEC C9: the append, claim, complete and release statements are compiled once. A `priority = ?` matched against the partial
    // index `logs_critical` made SQLite compile the complete's DELETE again at every batch (LogSchema).
    @Test func deliveryStatementsAreNotCompiledAgain() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append((0..<40).map { Fixture.log($0, priority: $0 % 3 == 0 ? .critical : .normal) })
        // Statements cached while the open created the schema were compiled again once after it: not counted.
        let before = store.db.repreparedStatements
        for round in 0..<8 {
            _ = try store.append([Fixture.log(100 + round, priority: round % 3 == 0 ? .critical : .normal)])
            let batch = try #require(try store.claim(limit: 5, nowMs: 0))
            if round % 2 == 0 {
                #expect(try store.complete(batchID: batch.batchID) == 5)
            } else {
                #expect(try store.release(batchID: batch.batchID, nextAttemptMs: 0) == 5)
            }
        }
        #expect(store.db.cachedStatementCount > 8)
        #expect(store.db.repreparedStatements == before)
    }

    // SPEC C9: a delivered batch is deleted in the transaction that claims the next one (delivery's one commit per
    // request); with nothing left to claim it is deleted all the same.
    @Test func claimDeletesTheDeliveredBatchInItsOwnTransaction() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append((0..<6).map { Fixture.log($0, priority: $0 == 4 ? .critical : .normal) })
        let a = try #require(try store.claim(limit: 3, nowMs: 0))
        #expect(a.logs.map(Fixture.ordinal) == [4, 0, 1])

        let commits = store.db.committedTransactions
        let next = try store.claim(limit: 2, nowMs: 0, completing: a.batchID)
        #expect(store.db.committedTransactions == commits + 1)
        #expect(next.completed == 3)
        #expect(next.batch?.logs.map(Fixture.ordinal) == [2, 3])
        #expect(try store.allLogs().map(Fixture.ordinal) == [2, 3, 5])
        #expect(try store.counts().inFlight == 2)
        #expect(store.logCount == 3)

        let b = try #require(next.batch)
        let last = try store.claim(limit: 5, nowMs: 0, completing: b.batchID)
        #expect(last.completed == 2)
        #expect(last.batch?.logs.map(Fixture.ordinal) == [5])
        let c = try #require(last.batch)
        let none = try store.claim(limit: 5, nowMs: 0, completing: c.batchID)
        #expect(none.batch == nil)
        #expect(none.completed == 1)
        #expect(try store.allLogs().isEmpty)
        #expect(try store.counts().inFlight == 0)
        #expect(store.logCount == 0)
        #expect(try store.claim(limit: 0, nowMs: 0, completing: c.batchID).completed == 0)
    }

    // SPEC C9: success deletes exactly the batch's rows.
    @Test func completeDeletesOnlyThatBatch() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append((0..<6).map { Fixture.log($0) })
        let a = try #require(try store.claim(limit: 2, nowMs: 0))
        let b = try #require(try store.claim(limit: 2, nowMs: 0))
        #expect(try store.complete(batchID: a.batchID) == 2)
        #expect(try store.complete(batchID: a.batchID) == 0)
        #expect(try store.allLogs().map(Fixture.ordinal) == [2, 3, 4, 5])
        #expect(try store.counts() == StoreCounts(pendingNormal: 2, pendingCritical: 0, inFlight: 2,
                                                  bytes: try LogStore.usedBytes(store.db),
                                                  oldestWallMs: Fixture.baseWallMs, deadLetters: 0))
        #expect(try store.complete(seqs: [b.logs[0].seq]) == 1)
        #expect(try store.allLogs().map(Fixture.ordinal) == [3, 4, 5])
    }

    // SPEC C9, R3: a retryable failure keeps the rows with their next attempt time.
    @Test func releasedBatchIsNotClaimableBeforeItsNextAttempt() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append((0..<3).map { Fixture.log($0) })
        let batch = try #require(try store.claim(limit: 2, nowMs: 1000))
        #expect(try store.release(batchID: batch.batchID, nextAttemptMs: 11_000) == 2)
        #expect(try store.claim(limit: 10, nowMs: 10_999)?.logs.map(Fixture.ordinal) == [2])
        #expect(try store.claim(limit: 10, nowMs: 10_999) == nil)
        let retry = try #require(try store.claim(limit: 10, nowMs: 11_000))
        #expect(retry.logs.map(Fixture.ordinal) == [0, 1])
        #expect(retry.batchID != batch.batchID)
    }

    // SPEC R1 (413 split): halves go back separately and come out again in seq order.
    @Test func releaseBySeqsSplitsABatch() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append((0..<4).map { Fixture.log($0) })
        let batch = try #require(try store.claim(limit: 4, nowMs: 0))
        let seqs = batch.logs.map(\.seq)
        #expect(try store.release(seqs: Array(seqs[2...]), nextAttemptMs: 0) == 2)
        #expect(try store.complete(seqs: Array(seqs[..<2])) == 2)
        #expect(try store.claim(limit: 10, nowMs: 0)?.logs.map(Fixture.ordinal) == [2, 3])
    }

    // SPEC R2: refused logs move to the dead-letter table with status and reason.
    @Test func deadLettersKeepStatusReasonAndPayload() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), clock: clock)
        defer { store.close() }
        let logs = (0..<3).map { Fixture.log($0) }
        _ = try store.append(logs)
        let batch = try #require(try store.claim(limit: 3, nowMs: 0))
        clock.advance(ms: 5)
        #expect(try store.deadLetter(seqs: [batch.logs[1].seq], status: 400, reason: "bad property") == 1)
        #expect(try store.complete(batchID: batch.batchID) == 2)
        let letters = try store.deadLetters(limit: 10)
        #expect(letters == [DeadLetter(id: logs[1].id, status: 400, reason: "bad property",
                                       atMs: Fixture.baseWallMs + 5, payload: logs[1].payload)])
        #expect(try store.counts().deadLetters == 1)
        #expect(store.deadLetteredTotal == 1)
        #expect(try store.allLogs().isEmpty)
    }

    // SPEC R2: the table is capped at 1 MiB of payload; the oldest letters are dropped first and counted.
    @Test func deadLetterTableIsCappedOldestFirst() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (logger, records) = RecordingLogHandler.make()
        let store = try Fixture.open(dir.file("store.sqlite"), logger: logger)
        defer { store.close() }
        #expect(store.deadLetterCap == 1024 * 1024)
        for round in 0..<3 {
            let logs = (0..<10).map { Fixture.log(round * 10 + $0, payloadBytes: 50_000) }
            _ = try store.append(logs)
            let batch = try #require(try store.claim(limit: 10, nowMs: 0))
            #expect(try store.deadLetter(seqs: batch.logs.map(\.seq), status: 422, reason: "refused") == 10)
        }
        let letters = try store.deadLetters()
        let bytes = letters.reduce(0) { $0 + $1.payload.count }
        #expect(bytes <= 1024 * 1024)
        #expect(letters.count == 20)
        #expect(store.deadLettersDroppedTotal == 10)
        // The newest stay: the oldest (ordinals 0–9) went first.
        #expect(letters.first?.id == Fixture.log(10).id)
        #expect(letters.last?.id == Fixture.log(29).id)
        #expect(records.all.contains { $0.metadata["outbox.dropped"] == "10" })
    }

    // SPEC S4: logs older than the maximum age are deleted at start-up, counted and logged.
    @Test func expiredLogsAreDeletedAtOpen() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let limits = StoreLimits(maxAgeMs: 10_000)
        let store = try Fixture.open(path, limits: limits, clock: clock)
        _ = try store.append([Fixture.log(0, wallMs: Fixture.baseWallMs - 9_000), Fixture.log(1, wallMs: Fixture.baseWallMs)])
        store.close()
        clock.advance(ms: 2_000)
        let (logger, records) = RecordingLogHandler.make()
        let reopened = try Fixture.open(path, limits: limits, clock: clock, logger: logger)
        defer { reopened.close() }
        #expect(reopened.expiredTotal == 1)
        #expect(try reopened.allLogs().map(Fixture.ordinal) == [1])
        #expect(records.all.contains { $0.level == .info && $0.metadata["outbox.expired"] == "1" })
    }

    // SPEC S4: … and before each batch is loaded, and through expire(nowMs:).
    @Test func expiredLogsAreNeverClaimed() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxAgeMs: 10_000), clock: clock)
        defer { store.close() }
        _ = try store.append([Fixture.log(0), Fixture.log(1, wallMs: Fixture.baseWallMs + 5_000),
                              Fixture.log(2, priority: .critical, wallMs: Fixture.baseWallMs + 8_000)])
        #expect(try store.expire(nowMs: Fixture.baseWallMs + 10_000) == 0)
        #expect(try store.expire(nowMs: Fixture.baseWallMs + 10_001) == 1)
        clock.advance(ms: 15_001)
        #expect(try store.claim(limit: 10, nowMs: 0)?.logs.map(Fixture.ordinal) == [2])
        #expect(store.expiredTotal == 2)
    }

    // SPEC T6: opting out deletes every stored log (and dead letter); the store keeps working.
    @Test func deleteAllLogsEmptiesTheStore() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        defer { store.close() }
        _ = try store.append((0..<500).map { Fixture.log($0, priority: $0 % 7 == 0 ? .critical : .normal, payloadBytes: 500) },
                             newEventNames: ["tap"])
        let batch = try #require(try store.claim(limit: 5, nowMs: 0))
        _ = try store.deadLetter(seqs: [batch.logs[0].seq], status: 400, reason: "x")
        try store.setMeta(.enabled, "false")
        #expect(try store.deleteAllLogs() == 499)
        let counts = try store.counts()
        #expect(counts.pendingNormal == 0 && counts.pendingCritical == 0 && counts.inFlight == 0 && counts.deadLetters == 0)
        #expect(counts.oldestWallMs == nil)
        #expect(try store.meta(.enabled) == "false")
        #expect(try store.eventNames() == ["tap"])
        #expect((FileSystem.size(path) ?? 0) < 100 * 1024, "the file is rebuilt without the deleted pages")
        #expect(store.walFileSize == 0)
        #expect(try store.append([Fixture.log(1)]).stored == 1)
    }

    // SPEC T4, T6: meta values and event names survive a restart.
    @Test func metaAndEventNamesSurviveReopen() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        try store.setMeta(.enabled, "true")
        try store.setMeta(.installID, "8E4C…")
        try store.setMeta(.installID, "A1B2")
        try store.setMeta(.destination, "soon")
        try store.setMeta(.destination, nil)
        _ = try store.append([Fixture.log(0)], newEventNames: ["tap", "open"])
        _ = try store.append([], newEventNames: ["tap", "close"])
        store.close()

        let reopened = try Fixture.open(path)
        defer { reopened.close() }
        #expect(try reopened.meta(.enabled) == "true")
        #expect(try reopened.meta(.installID) == "A1B2")
        #expect(try reopened.meta(.destination) == nil)
        #expect(try reopened.eventNames() == ["tap", "open", "close"])
    }

    // SPEC A10: device contexts are stored once per version.
    @Test func deviceContextsAreStoredOncePerVersion() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        let v1 = try store.saveContext(json: Array("{\"os\":\"a\"}".utf8))
        #expect(try store.saveContext(json: Array("{\"os\":\"a\"}".utf8)) == v1)
        let v2 = try store.saveContext(json: Array("{\"os\":\"b\"}".utf8))
        #expect(v2 > v1)
        _ = try store.append([Fixture.log(0, context: v1)])
        let v3 = try store.saveContext(json: Array("{\"os\":\"c\"}".utf8))
        store.close()

        // At open, versions no log refers to are pruned, except the latest.
        let reopened = try Fixture.open(path)
        defer { reopened.close() }
        #expect(try reopened.context(id: v1) == Array("{\"os\":\"a\"}".utf8))
        #expect(try reopened.context(id: v2) == nil)
        #expect(try reopened.latestContext()?.id == v3)
    }

    // SPEC C8: after shutdown the store is closed and says so.
    @Test func closedStoreRefusesCalls() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        store.close()
        store.close()
        #expect(throws: OutboxError.shutDown) { try store.append([Fixture.log(0)]) }
        #expect(throws: OutboxError.shutDown) { try store.counts() }
    }
}

@Suite("Expiry by boot time (SPEC S4)")
struct ExpiryClockTests {
    // SPEC S4: a log of this boot ages on CLOCK_BOOTTIME: the wall clock stepped a month ahead expires nothing,
    // while the same month on the boot clock does.
    @Test func aWallClockStepExpiresNothingOfThisBoot() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        var limits = StoreLimits()
        limits.maxAgeMs = 24 * 3600 * 1000
        let store = try LogStore(path: dir.file("s.sqlite"), limits: limits, clock: clock, logger: Fixture.quietLogger)
        defer { store.close() }
        var log = Fixture.log(1, wallMs: clock.wallMs())
        log.monoNs = clock.monoNs()
        log.boot = store.boot
        var old = Fixture.log(2, wallMs: clock.wallMs())
        old.boot = store.boot &+ 1  // captured under an earlier boot: only its wall age counts
        try store.append([log, old])
        clock.jumpWall(ms: 30 * 24 * 3600 * 1000)
        #expect(try store.expire(nowMs: clock.wallMs()) == 1)  // the earlier boot's log only
        #expect(store.logCount == 1)
        clock.advance(ms: 24 * 3600 * 1000 + 1)
        #expect(try store.expire(nowMs: clock.wallMs()) == 1)
        #expect(store.logCount == 0)
    }
}
