import Foundation
import Testing
@testable import Outbox

/// A WAL cut short while the engine is stopped (SPEC S7): SQLite reads it as a torn tail and drops the commits after
/// the last whole one; the commit mark (`<store>-mark`) tells, and the loss is reported once. Real SQLite files; a
/// "crash" is a copy of the store's files taken while it is open, as `kill -9` would leave them.
struct WALCutTests {
    /// Copies the files a killed process leaves (database, WAL, mark; the -shm is rebuilt from the WAL) to `to`.
    private func crashCopy(_ path: String, to: String) throws {
        for suffix in ["", "-wal", "-mark"] where FileSystem.exists(path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: to + suffix)
        }
    }

    private func walSize(_ path: String) -> Int { FileSystem.size(path + "-wal") ?? 0 }

    /// Appends `commits` transactions of `perCommit` logs each and returns the WAL's size after each commit.
    private func appendCommits(_ store: LogStore, commits: Int, perCommit: Int, from first: Int = 0) throws -> [Int] {
        var sizes: [Int] = []
        for commit in 0..<commits {
            let start = first + commit * perCommit
            let result = try store.append((start..<start + perCommit).map { Fixture.log($0, payloadBytes: 300) })
            #expect(result.stored == perCommit)
            sizes.append(walSize(store.path))
        }
        return sizes
    }

    private func lossReports(_ box: RecordingLogHandler.Box) -> [RecordingLogHandler.Entry] {
        box.all.filter { $0.message.contains("WAL was cut short") }
    }

    // SPEC S7: a WAL cut mid-frame drops the commits from the cut on; the loss is reported once, with the number of
    // logs those commits held, loudly; the next start reports nothing.
    @Test func aWALCutMidFrameReportsTheLostLogsOnce() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        defer { store.close() }
        let sizes = try appendCommits(store, commits: 10, perCommit: 20)
        let crashed = dir.file("crashed.sqlite")
        try crashCopy(path, to: crashed)
        // Into the first frame of the fifth commit: its 24-byte frame header and part of the page.
        #expect(truncate(crashed + "-wal", off_t(sizes[3] + 24 + 100)) == 0)

        let (logger, box) = RecordingLogHandler.make()
        let reopened = try Fixture.open(crashed, logger: logger)
        #expect(reopened.recoveredFromCorruption == nil, "a torn tail is not corruption: nothing is moved aside")
        #expect(try reopened.allLogs().count == 80)
        #expect(reopened.lostAtOpen == 120)
        let reports = lossReports(box)
        #expect(reports.count == 1)
        #expect(reports.first?.level == .error)
        #expect(reports.first?.metadata["outbox.lost"] == "120")
        // Work goes on: new logs are stored and numbered above what survived.
        _ = try reopened.append([Fixture.log(1000)])
        #expect(try reopened.allLogs().count == 81)
        reopened.close()

        let (logger2, box2) = RecordingLogHandler.make()
        let again = try Fixture.open(crashed, logger: logger2)
        #expect(again.lostAtOpen == 0, "reported once: the mark was brought in line")
        #expect(lossReports(box2).isEmpty)
        #expect(try again.allLogs().count == 81)
        again.close()
    }

    // SPEC S7: a WAL cut to a part of its header loses every commit since the last checkpoint (here, since the clean
    // close that checkpointed the first 5 logs); all 30 logs of the later commits are reported.
    @Test func aWALCutInItsHeaderReportsEveryCommitItHeld() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let first = try Fixture.open(path)
        _ = try appendCommits(first, commits: 1, perCommit: 5)
        first.close()
        let store = try Fixture.open(path)
        defer { store.close() }
        _ = try appendCommits(store, commits: 3, perCommit: 10, from: 5)
        let crashed = dir.file("crashed.sqlite")
        try crashCopy(path, to: crashed)
        #expect(truncate(crashed + "-wal", 10) == 0)

        let (logger, box) = RecordingLogHandler.make()
        let reopened = try Fixture.open(crashed, logger: logger)
        #expect(reopened.recoveredFromCorruption == nil)
        #expect(try reopened.allLogs().count == 5)
        #expect(reopened.lostAtOpen == 30)
        #expect(lossReports(box).count == 1)
        reopened.close()
        let again = try Fixture.open(crashed)
        #expect(again.lostAtOpen == 0)
        again.close()
    }

    /// What happened before the crash, in the no-false-report cases.
    enum Before: String, CaseIterable, CustomTestStringConvertible {
        case nothing, deliveredAll, deliveredCriticalFirst, evicted, expired, deadLettered, optedOut
        var testDescription: String { rawValue }
    }

    // SPEC S7: no loss is reported where none happened — a restart after kill -9 with the WAL intact, and a clean
    // restart, after delivery (which deletes the highest rows, critical first), eviction (S2, S5), expiry (S4),
    // dead-lettering (R2) and opt-out (T6). The database's record of the highest seq never goes back on a delete.
    @Test(arguments: Before.allCases)
    func noLossIsReportedWhenNothingWasLost(_ before: Before) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let limits = before == .evicted ? StoreLimits(maxLogCount: 15) : StoreLimits()
        let store = try Fixture.open(path, limits: limits)
        // Two appends, so that with a count cap of 15 the second one evicts the 5 oldest.
        _ = try store.append((0..<15).map { Fixture.log($0, priority: $0 % 4 == 3 ? .critical : .normal) })
        _ = try store.append((15..<20).map { Fixture.log($0, priority: $0 % 4 == 3 ? .critical : .normal) })
        switch before {
        case .nothing: break
        case .deliveredAll:
            while let batch = try store.claim(limit: 7, nowMs: Fixture.baseWallMs) {
                _ = try store.complete(batchID: batch.batchID)
            }
        case .deliveredCriticalFirst:
            let batch = try #require(try store.claim(limit: 5, nowMs: Fixture.baseWallMs, priority: .critical))
            #expect(batch.logs.contains { $0.seq == 20 }, "the highest row is critical and goes first")
            _ = try store.complete(batchID: batch.batchID)
        case .evicted:
            #expect(store.evictedTotal == 5)
        case .expired:
            #expect(try store.expire(nowMs: Fixture.baseWallMs + 26 * 24 * 3_600_000) == 20)
        case .deadLettered:
            let seqs = try store.allLogs().map(\.seq).suffix(3)
            #expect(try store.deadLetter(seqs: Array(seqs), status: 400, reason: "refused") == 3)
        case .optedOut:
            #expect(try store.deleteAllLogs() == 20)
        }
        let remaining = try store.allLogs().count
        let crashed = dir.file("crashed.sqlite")
        try crashCopy(path, to: crashed)
        store.close()

        let (logger, box) = RecordingLogHandler.make()
        let afterCrash = try Fixture.open(crashed, limits: limits, logger: logger)
        #expect(afterCrash.lostAtOpen == 0, "kill -9 with the WAL intact")
        #expect(lossReports(box).isEmpty)
        #expect(try afterCrash.allLogs().count == remaining)
        afterCrash.close()
        let afterClose = try Fixture.open(path, limits: limits, logger: logger)
        #expect(afterClose.lostAtOpen == 0, "a normal restart")
        afterClose.close()
        #expect(lossReports(box).isEmpty)
    }

    // SPEC S7: a mark that is missing or garbled (torn by a power loss, written by something else) starts afresh
    // without a report, even over a cut WAL — no false loss from a mark the store cannot trust.
    @Test(arguments: ["missing", "garbled", "short"])
    func aMissingOrGarbledMarkReportsNothingAndStartsAfresh(_ damage: String) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        defer { store.close() }
        let sizes = try appendCommits(store, commits: 4, perCommit: 10)
        let crashed = dir.file("crashed.sqlite")
        try crashCopy(path, to: crashed)
        #expect(truncate(crashed + "-wal", off_t(sizes[1] + 30)) == 0)
        switch damage {
        case "missing": try FileManager.default.removeItem(atPath: crashed + "-mark")
        case "garbled": try Data((0..<16).map { UInt8($0 * 7 + 1) }).write(to: URL(fileURLWithPath: crashed + "-mark"))
        default: try Data([1, 2, 3]).write(to: URL(fileURLWithPath: crashed + "-mark"))
        }
        let reopened = try Fixture.open(crashed)
        #expect(reopened.lostAtOpen == 0)
        #expect(try reopened.allLogs().count == 20)
        #expect(reopened.commitMark?.read() == 20, "started afresh at what the database holds")
        reopened.close()
    }

    // SPEC S1: the mark is user data's neighbour and follows the store's mode, 0600, even when copied in wider.
    @Test func theMarkIsCreatedOwnerOnly() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        _ = try store.append([Fixture.log(0)])
        #expect(FileSystem.mode(path + "-mark") == 0o600)
        store.close()
        FileSystem.chmod(path + "-mark", 0o644)
        let reopened = try Fixture.open(path)
        #expect(FileSystem.mode(path + "-mark") == 0o600)
        reopened.close()
    }

    // SPEC S7: a store moved aside as corrupt has reported its loss already; its mark does not report it twice,
    // and a store file deleted by hand (a fresh file) is no loss of the new one.
    @Test func aStoreMovedAsideOrDeletedIsNotReportedTwice() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        _ = try store.append((0..<50).map { Fixture.log($0) })
        store.close()
        // Not a database any more.
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        let recovered = try Fixture.open(path)
        #expect(recovered.recoveredFromCorruption != nil)
        #expect(recovered.lostAtOpen == 0)
        _ = try recovered.append([Fixture.log(0)])
        recovered.close()

        try FileManager.default.removeItem(atPath: path)
        let fresh = try Fixture.open(path)
        #expect(fresh.lostAtOpen == 0)
        fresh.close()
    }

    /// Each way the store deletes logs.
    enum DeletePath: String, CaseIterable, CustomTestStringConvertible {
        case delivered, deliveredWithTheNextClaim, deliveredBySeqs, expiredBeforeSending, expired, deadLettered, evicted, optedOut
        var testDescription: String { rawValue }
    }

    /// Deletes every stored log by `path`; returns how many were deleted.
    private func deleteEverything(_ store: LogStore, by path: DeletePath) throws -> Int {
        switch path {
        case .delivered:
            var total = 0
            while let batch = try store.claim(limit: 7, nowMs: Fixture.baseWallMs) {
                total += try store.complete(batchID: batch.batchID)
            }
            return total
        case .deliveredWithTheNextClaim:
            var total = 0
            var previous: Int64?
            while true {
                let (batch, completed) = try store.claim(limit: 7, nowMs: Fixture.baseWallMs, completing: previous)
                total += completed
                guard let batch else { return total }
                previous = batch.batchID
            }
        case .deliveredBySeqs:
            let batch = try #require(try store.claim(limit: 100, nowMs: Fixture.baseWallMs))
            return try store.complete(seqs: batch.logs.map(\.seq))
        case .expiredBeforeSending:
            return try store.expire(seqs: store.allLogs().map(\.seq))
        case .expired:
            return try store.expire(nowMs: Fixture.baseWallMs + 26 * 24 * 3_600_000)
        case .deadLettered:
            return try store.deadLetter(seqs: store.allLogs().map(\.seq), status: 400, reason: "refused")
        case .evicted:
            // S2's eviction asked for more room than the store has (what a claim at a full cap can ask): every
            // log goes, critical ones last.
            let events = try store.db.transaction { () throws(OutboxError) -> [LogStore.EvictionEvent] in
                try store.makeRoom(for: [], mandatoryBytes: 0, extraBytes: 1 << 40, overflowMayEvictCritical: true).evictions
            }
            return store.commitEvictions(events)
        case .optedOut:
            return try store.deleteAllLogs()
        }
    }

    // SPEC S7: every path that deletes logs keeps the database's record of the highest seq it held, in the deleting
    // transaction. With every log deleted by that path, a restart (after kill -9) reports no loss and numbers new
    // logs above the deleted ones; and when the WAL is cut in a later commit, exactly that commit's logs are
    // reported, not the deleted ones.
    @Test(arguments: DeletePath.allCases)
    func everyDeletePathKeepsTheHighestSeq(_ path: DeletePath) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let file = dir.file("store.sqlite")
        let store = try Fixture.open(file)
        defer { store.close() }
        // The highest row is critical, so that the critical-first paths take it before the normal rows below it.
        _ = try store.append((0..<20).map { Fixture.log($0, priority: $0 % 4 == 3 ? .critical : .normal) })
        #expect(try deleteEverything(store, by: path) == 20)
        #expect(try store.allLogs().isEmpty)
        #expect(try store.meta(.seqHigh) == "20")
        let intact = dir.file("intact.sqlite")
        try crashCopy(file, to: intact)
        let walBefore = walSize(file)
        _ = try appendCommits(store, commits: 1, perCommit: 10, from: 100)
        let cut = dir.file("cut.sqlite")
        try crashCopy(file, to: cut)
        // Into the first frame of the commit after the deletion.
        #expect(truncate(cut + "-wal", off_t(max(walBefore, 32) + 24 + 100)) == 0)

        let (logger, box) = RecordingLogHandler.make()
        let afterCrash = try Fixture.open(intact, logger: logger)
        #expect(afterCrash.lostAtOpen == 0, "kill -9 with the WAL intact")
        #expect(lossReports(box).isEmpty)
        _ = try afterCrash.append([Fixture.log(200)])
        #expect(try afterCrash.allLogs().map(\.seq) == [21], "numbering goes on above the deleted logs")
        afterCrash.close()

        let (cutLogger, cutBox) = RecordingLogHandler.make()
        let afterCut = try Fixture.open(cut, logger: cutLogger)
        #expect(try afterCut.allLogs().isEmpty)
        #expect(afterCut.lostAtOpen == 10, "the cut commit's logs, not the deleted ones")
        #expect(lossReports(cutBox).count == 1)
        afterCut.close()
    }

    // SPEC S7: a delete below the highest row leaves the record alone: delivery with a backlog above the batch writes
    // no meta row for it (the check is a comparison, not a write per transaction).
    @Test func aDeleteBelowTheHighestRowWritesNothing() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        _ = try store.append((0..<20).map { Fixture.log($0) })
        let batch = try #require(try store.claim(limit: 7, nowMs: Fixture.baseWallMs))
        #expect(try store.complete(batchID: batch.batchID) == 7)
        #expect(try store.meta(.seqHigh) == nil)
        #expect(try store.deadLetter(seqs: [8, 9], status: 400, reason: "refused") == 2)
        #expect(try store.meta(.seqHigh) == nil)
        #expect(try store.complete(seqs: [20]) == 1)
        #expect(try store.meta(.seqHigh) == "20")
    }

    // SPEC S7: the mark holds no descriptor while the store is open (a store costs its database's descriptors only,
    // which a fleet of stores in one process counts on); it is opened to be read at open and for each write.
    @Test func theMarkHoldsNoDescriptorWhileTheStoreIsOpen() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        defer { store.close() }
        _ = try store.append((0..<3).map { Fixture.log($0) })
        #expect(store.commitMark?.read() == 3, "the mark is written")
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")
        let onTheMark = descriptors.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == path + "-mark"
        }
        #expect(onTheMark.isEmpty)
    }

    // SPEC S7: corruption found mid-session by a read moves the store aside and reports it then; the fresh file's
    // next open reports nothing more, though the engine had numbered logs far above what the fresh file holds.
    @Test func aStoreRecoveredMidSessionIsNotReportedAgainAtTheNextOpen() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        _ = try store.append((0..<2000).map { Fixture.log($0, payloadBytes: 200) })
        try store.checkpoint()
        try Fixture.scribbleOverAllButTheFirstPage(store, path: path)
        #expect(try store.claim(limit: 50, nowMs: Fixture.baseWallMs) == nil)
        #expect(store.recoveredFromCorruption != nil)
        store.close()

        let (logger, box) = RecordingLogHandler.make()
        let reopened = try Fixture.open(path, logger: logger)
        #expect(reopened.recoveredFromCorruption == nil)
        #expect(reopened.lostAtOpen == 0, "the loss was reported when the store was moved aside")
        #expect(lossReports(box).isEmpty)
        reopened.close()
    }
}
