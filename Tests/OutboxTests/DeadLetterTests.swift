import Foundation
import Testing
@testable import Outbox

/// Stores `count` logs (ordinals from `first`) and dead-letters them all, one refusal each, so that each letter
/// has its own status and time. Returns the logs as stored.
@discardableResult
private func makeDeadLetters(_ store: LogStore, clock: ManualClock, first: Int = 0, count: Int,
                             priority: Priority = .normal) throws -> [NewLog] {
    let logs = (first..<first + count).map { Fixture.log($0, priority: priority, wallMs: Fixture.baseWallMs + Int64($0)) }
    _ = try store.append(logs)
    let batch = try #require(try store.claim(limit: count, nowMs: .max, priority: priority))
    for log in batch.logs {
        clock.advance(ms: 10)
        try store.deadLetter(seqs: [log.seq], status: 400 + Fixture.ordinal(of: log), reason: "refused \(Fixture.ordinal(of: log))")
    }
    try store.complete(batchID: batch.batchID)
    return logs
}

private func object(_ json: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
}

@Suite("Dead letters: list, requeue, purge (SPEC R2)")
struct DeadLetterTests {
    // SPEC R2: each letter shows the log id, the status, the server's reason, when it was refused, and the log's
    // JSON as it is sent (timestamp and device spliced in).
    @Test func theListShowsStatusReasonTimeAndTheLogAsSent() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), clock: clock)
        defer { store.close() }
        _ = try store.saveContext(json: Array(#"{"osName":"Linux"}"#.utf8))
        let logs = try makeDeadLetters(store, clock: clock, count: 2)

        let records = try store.deadLetterRecords()
        #expect(records.map(\.id) == logs.map(\.id.uuid))
        #expect(records.map(\.status) == [400, 401])
        #expect(records.map(\.reason) == ["refused 0", "refused 1"])
        #expect(records.map(\.deadLetteredAtMs) == [Fixture.baseWallMs + 10, Fixture.baseWallMs + 20])
        let log = object(records[1].log)
        #expect(log["timestamp"] as? String == "2023-11-14T22:13:20.001Z")
        #expect((log["device"] as? [String: Any])?["osName"] as? String == "Linux")
        #expect(log["i"] as? Int == 1)
    }

    // SPEC R2, X6: ids limit the list; an id that is not there is skipped.
    @Test func theListIsLimitedToTheGivenIDs() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), clock: clock)
        defer { store.close() }
        let logs = try makeDeadLetters(store, clock: clock, count: 4)
        let records = try store.deadLetterRecords(ids: [logs[3].id, logs[1].id, Fixture.log(99).id])
        #expect(records.map(\.id) == [logs[1].id.uuid, logs[3].id.uuid])
    }

    // SPEC R2: a requeue puts every letter back in the queue, claimable at once, with its id, priority and capture
    // time; the table is empty after it.
    @Test func requeuedLogsAreClaimableAgainAndKeepTheirIDs() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), clock: clock)
        defer { store.close() }
        let normal = try makeDeadLetters(store, clock: clock, count: 2)
        let critical = try makeDeadLetters(store, clock: clock, first: 2, count: 1, priority: .critical)

        let result = try store.requeueDeadLetters()
        #expect(result == DeadLetterRequeue(normal: 2, critical: 1, evicted: 0, kept: 0))
        #expect(try store.deadLetterRows().isEmpty)
        let counts = try store.counts()
        #expect(counts.pendingNormal == 2 && counts.pendingCritical == 1 && counts.deadLetters == 0)
        let batch = try #require(try store.claim(limit: 10, nowMs: 0))
        #expect(batch.logs.map(\.id) == (critical + normal).map(\.id))
        #expect(batch.logs.map(\.priority) == [.critical, .normal, .normal])
        #expect(batch.logs.map(\.wallMs) == (critical + normal).map(\.wallMs))
        #expect(batch.logs.map(\.payload) == (critical + normal).map(\.payload))
    }

    // SPEC R2, X6: a requeue by id moves only those letters.
    @Test func aRequeueByIDMovesOnlyThoseLetters() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), clock: clock)
        defer { store.close() }
        let logs = try makeDeadLetters(store, clock: clock, count: 3)
        #expect(try store.requeueDeadLetters(ids: [logs[1].id]).requeued == 1)
        #expect(try store.deadLetterRows().map(\.id) == [logs[0].id, logs[2].id])
        #expect(try store.claim(limit: 10, nowMs: 0)?.logs.map(\.id) == [logs[1].id])
    }

    // SPEC R2, S5: requeued logs obey the count cap like new ones: the oldest pending normal logs make room.
    @Test func aRequeueEvictsTheOldestNormalLogsAtTheCountCap() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        var limits = StoreLimits()
        limits.maxLogCount = 3
        let store = try Fixture.open(dir.file("store.sqlite"), limits: limits, clock: clock)
        defer { store.close() }
        let letters = try makeDeadLetters(store, clock: clock, count: 2)
        let waiting = (10..<13).map { Fixture.log($0) }
        _ = try store.append(waiting)

        let result = try store.requeueDeadLetters()
        #expect(result.requeued == 2 && result.evicted == 2 && result.kept == 0)
        #expect(store.evictedTotal == 2)
        #expect(try store.allLogs().map(\.id) == [waiting[2].id] + letters.map(\.id))
    }

    // SPEC R2, S3: a normal letter never evicts a critical log; when the store has no room it stays a dead letter.
    @Test func aLetterTheStoreCannotTakeStaysADeadLetter() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        var limits = StoreLimits()
        limits.maxLogCount = 2
        let store = try Fixture.open(dir.file("store.sqlite"), limits: limits, clock: clock)
        defer { store.close() }
        let letters = try makeDeadLetters(store, clock: clock, count: 1)
        _ = try store.append((10..<12).map { Fixture.log($0, priority: .critical) })

        let result = try store.requeueDeadLetters()
        #expect(result == DeadLetterRequeue(normal: 0, critical: 0, evicted: 0, kept: 1))
        let kept = try store.deadLetterRows()
        #expect(kept.map(\.id) == letters.map(\.id))
        #expect(kept.first?.status == 400 && kept.first?.reason == "refused 0")
        #expect(try store.counts().pendingCritical == 2)
    }

    // SPEC R2: a purge deletes every letter and nothing else.
    @Test func aPurgeDeletesEveryLetter() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), clock: clock)
        defer { store.close() }
        try makeDeadLetters(store, clock: clock, count: 3)
        _ = try store.append([Fixture.log(10)])
        #expect(try store.purgeDeadLetters() == 3)
        #expect(try store.deadLetterRows().isEmpty)
        #expect(try store.counts().pendingNormal == 1)
    }

    // SPEC R2, X6: a purge by id removes only the named letters.
    @Test func aPurgeByIDRemovesOnlyTheNamedLetters() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let store = try Fixture.open(dir.file("store.sqlite"), clock: clock)
        defer { store.close() }
        let logs = try makeDeadLetters(store, clock: clock, count: 4)
        #expect(try store.purgeDeadLetters(ids: [logs[0].id, logs[2].id, Fixture.log(99).id]) == 2)
        #expect(try store.deadLetterRows().map(\.id) == [logs[1].id, logs[3].id])
    }

    // SPEC X6: the command line lists the letters of a store that an engine holds open (a read-only connection).
    @Test func theLettersAreReadableWhileTheStoreIsOpen() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path, clock: clock)
        defer { store.close() }
        let logs = try makeDeadLetters(store, clock: clock, count: 2)
        let records = try LogStore.inspectDeadLetters(path: path, ids: [logs[1].id])
        #expect(records == (try store.deadLetterRecords(ids: [logs[1].id])))
        #expect(records.map(\.id) == [logs[1].id.uuid])
    }

    // SPEC T7: a log id goes to a UUID and back unchanged (the API speaks UUID, the store 16 raw bytes).
    @Test func logIDsRoundTripThroughUUID() {
        let id = Fixture.log(7).id
        #expect(UUIDBytes(id.uuid) == id)
        #expect(UUIDBytes(UUID(uuidString: "0F8FAD5B-D9CB-469F-A165-70867728950E") ?? UUID()).uuid.uuidString
                == "0F8FAD5B-D9CB-469F-A165-70867728950E")
    }
}

@Suite("Dead letters through the engine (SPEC R2)")
struct DeadLetterEngineTests {
    // SPEC R2: the engine lists, requeues (the logs are pending again, same ids) and purges, from any thread.
    @Test func theEngineListsRequeuesAndPurgesDeadLetters() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        defer { engine.shutdown() }
        for index in 0..<3 { try engine.trackEvent("refused", properties: ["i": .int(Int64(index))]) }
        // No endpoint: the refusal is made here, as delivery makes it.
        let ids = try await engine.withStore { store -> [UUID] in
            let batch = try #require(try store.claim(limit: 10, nowMs: .max))
            try store.deadLetter(seqs: batch.logs.map(\.seq), status: 422, reason: "unprocessable")
            try store.complete(batchID: batch.batchID)
            return batch.logs.map(\.id.uuid)
        }

        let letters = try await engine.deadLetters()
        #expect(letters.map(\.id) == ids)
        #expect(letters.allSatisfy { $0.status == 422 && $0.reason == "unprocessable" })
        #expect(letters.allSatisfy { object($0.log)["name"] as? String == "refused" })
        #expect(try await engine.deadLetters(ids: [ids[1]]).map(\.id) == [ids[1]])

        #expect(try await engine.requeueDeadLetters(ids: [ids[0]]) == 1)
        let status = try await engine.status()
        #expect(status.pendingNormal == 1 && status.deadLetters == 2)
        let pending = try await engine.withStore { try $0.allLogs().map(\.id.uuid) }
        #expect(pending == [ids[0]])

        #expect(try await engine.purgeDeadLetters(ids: [ids[2]]) == 1)
        #expect(try await engine.deadLetters().map(\.id) == [ids[1]])
        #expect(try await engine.purgeDeadLetters() == 1)
        #expect(try await engine.deadLetters().isEmpty)
    }

    // SPEC R2: after a shutdown the calls fail with `shutDown` instead of waiting for a loop that is gone.
    @Test func theCallsFailAfterShutdown() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        engine.shutdown()
        await #expect(throws: OutboxError.self) { try await engine.requeueDeadLetters() }
    }
}
