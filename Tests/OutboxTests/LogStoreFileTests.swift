import Foundation
import OutboxTestSupport
import Testing
@testable import Outbox

/// The store file: permissions, the lock, the schema version, corruption, read-only inspection.
struct LogStoreFileTests {
    // SPEC S1 (migrates forward), C9: a version-1 store kept its leases in `logs.batch`. Read as it is, its
    // in-flight row counts as in flight; opened by the engine, it is migrated to the lease table and, as at every
    // open, the row is pending again and claimable.
    @Test func aVersionOneStoreWithALeaseMigratesAndItsRowIsPendingAgain() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        try withStore(at: path, version: 1) { db throws(OutboxError) in
            try db.execute("""
                INSERT INTO logs (seq, priority, batch, wall_ms, mono_ns, boot, context, id, payload)
                VALUES (1, 0, 7, ?, 0, 0, 0, x'00112233445566778899aabbccddeeff', '{"name":"v1"}')
                """, [.integer(Fixture.baseWallMs)])
        }
        #expect(try StoreInspector.inspect(path: path).counts.inFlight == 1)

        let store = try Fixture.open(path)
        defer { store.close() }
        #expect(try store.db.userVersion == LogStore.schemaVersion)
        let counts = try store.counts()
        #expect(counts.inFlight == 0 && counts.pendingNormal == 1)
        let batch = try #require(try store.claim(limit: 10, nowMs: Fixture.baseWallMs))
        #expect(batch.logs.map(\.seq) == [1])
        #expect(try store.counts().inFlight == 1)
        #expect(try store.complete(batchID: batch.batchID) == 1)
        #expect(try store.counts().inFlight == 0 && store.counts().pendingNormal == 0)
    }

    // SPEC S1 (migrates forward), C9: a version-2 store kept one lease row per log in `in_flight`. Migrated, each
    // becomes a stretch of one seq, still in flight for `inspect`; opened by the engine, the rows are pending again.
    @Test func aVersionTwoStoreWithLeasesMigratesToStretches() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        try withStore(at: path, version: 2) { db throws(OutboxError) in
            for (seq, priority) in [(1, 0), (2, 1), (3, 0)] {
                try db.execute("""
                    INSERT INTO logs (seq, priority, wall_ms, mono_ns, boot, context, id, payload)
                    VALUES (?, ?, ?, 0, 0, 0, x'00112233445566778899aabbccddeeff', '{"name":"v2"}')
                    """, [.integer(Int64(seq)), .integer(Int64(priority)), .integer(Fixture.baseWallMs)])
            }
            try db.exec("INSERT INTO in_flight (seq, batch) VALUES (1, 7), (2, 7)")
            #expect(try StoreInspector.inspect(path: path).counts.inFlight == 2)
            _ = try Migrator(Array(LogSchema.migrator.migrations.prefix(3))).migrate(db)
            let select = try db.prepare("SELECT batch, priority, first, last FROM leases ORDER BY first")
            var rows: [[Int64]] = []
            while try select.step() { rows.append((0..<4).map { select.int64(at: Int32($0)) }) }
            #expect(rows == [[7, 0, 1, 1], [7, 1, 2, 2]])
        }
        let counts = try StoreInspector.inspect(path: path).counts
        #expect(counts.inFlight == 2 && counts.pendingNormal == 1)

        let store = try Fixture.open(path)
        defer { store.close() }
        #expect(try store.counts().inFlight == 0)
        #expect(try store.claim(limit: 10, nowMs: .max)?.logs.map(\.seq) == [2, 1, 3])
    }

    // SPEC C9, S6, R3: retry times belong to the process that set them. A release that sets one flags the store in
    // meta, in the same transaction; the next open clears them all and the flag. An unflagged store is not scanned
    // for them at open, and a store from version 3 (which had no flag) is flagged by its migration.
    @Test func retryTimesAreClearedAtOpenWhenFlagged() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        try withStore(at: path, version: 3) { db throws(OutboxError) in
            for seq in 1...3 {
                try db.execute("""
                    INSERT INTO logs (seq, priority, next_attempt_ms, wall_ms, mono_ns, boot, context, id, payload)
                    VALUES (?, 0, ?, ?, 0, 0, 0, x'00112233445566778899aabbccddeeff', '{"name":"v3"}')
                    """, [.integer(Int64(seq)), .integer(seq == 2 ? Int64.max : 0), .integer(Fixture.baseWallMs)])
            }
        }
        let store = try Fixture.open(path)
        #expect(try store.db.userVersion == LogSchema.version)
        #expect(try store.meta(.retryTimes) == nil, "the open that cleared them removes the flag")
        let batch = try #require(try store.claim(limit: 10, nowMs: 0))
        #expect(batch.logs.map(\.seq) == [1, 2, 3])

        try store.release(batchID: batch.batchID, nextAttemptMs: 1_000)
        #expect(try store.meta(.retryTimes) == "1")
        #expect(try store.claim(limit: 10, nowMs: 999) == nil)
        store.close()

        let reopened = try Fixture.open(path)
        #expect(try reopened.meta(.retryTimes) == nil)
        #expect(try reopened.claim(limit: 10, nowMs: 0)?.logs.map(\.seq) == [1, 2, 3])
        // Unflagged, the open leaves next_attempt_ms alone: a value written behind the store's back survives it.
        try reopened.db.execute("UPDATE logs SET next_attempt_ms = 5 WHERE seq = 3")
        reopened.close()
        let third = try Fixture.open(path)
        defer { third.close() }
        #expect(try third.db.int64("SELECT next_attempt_ms FROM logs WHERE seq = 3") == 5)
        #expect(try third.claim(limit: 10, nowMs: 0)?.logs.map(\.seq) == [1, 2])
    }

    /// Creates a store at `path` as the engine's schema `version` left it (WAL mode, migrated that far), and runs
    /// `body` on it.
    private func withStore(at path: String, version: Int,
                           _ body: (Database) throws(OutboxError) -> Void) throws(OutboxError) {
        let db = try Database(path: path)
        defer { db.close() }
        try db.exec("PRAGMA journal_mode = WAL")
        _ = try Migrator(Array(LogSchema.migrator.migrations.prefix(version))).migrate(db)
        #expect(try db.userVersion == version)
        try body(db)
    }

    // SPEC S1: the database and every file beside it are created 0600.
    @Test func filesAreCreatedOwnerOnly() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        defer { store.close() }
        _ = try store.append((0..<10).map { Fixture.log($0) })
        for file in [path, path + "-wal", path + "-shm", path + ".lock"] {
            #expect(FileSystem.exists(file), "\(file) should exist while the store is open")
            #expect(FileSystem.mode(file) == 0o600, "\(file) has mode \(String(FileSystem.mode(file) ?? 0, radix: 8))")
        }
        #expect(try store.db.string("PRAGMA journal_mode") == "wal")
        #expect(try store.db.pragma("synchronous") == 1)
    }

    // At the default cap, the page cache stays within 1 MiB while 5 MB of logs are written, read back and
    // deleted (SQLite's default would grow to ~2 MB).
    @Test func pageCacheStaysWithinItsBound() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        for chunk in 0..<12 {
            _ = try store.append((0..<500).map { Fixture.log(chunk * 500 + $0, payloadBytes: 800) })
        }
        var delivered = 0
        while let batch = try store.claim(limit: 500, nowMs: .max) {
            delivered += try store.complete(batchID: batch.batchID)
        }
        #expect(delivered == 6000)
        let bound = StoreOpener.pageCacheKiB(for: StoreLimits().maxStorageSize) * 1024
        #expect(bound == 1 << 20)
        #expect(store.db.pageCacheBytesUsed > bound / 2, "the cache was used")
        // SQLite counts its per-page headers too: a few percent over the bound.
        #expect(store.db.pageCacheBytesUsed <= bound + bound / 16, "\(store.db.pageCacheBytesUsed) bytes")
    }

    // SPEC S1: a store file that arrives readable by others is made owner-only at open.
    @Test func existingLooseFileIsMadeOwnerOnly() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        try Fixture.open(path).close()
        #expect(chmod(path, 0o644) == 0)
        let store = try Fixture.open(path)
        defer { store.close() }
        #expect(FileSystem.mode(path) == 0o600)
    }

    // SPEC S1: one engine per store; a second LogStore in the same process is refused (flock is per open file
    // description, so the same process conflicts with itself).
    @Test func secondStoreOnTheSamePathIsLocked() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let first = try Fixture.open(path)
        #expect(throws: OutboxError.storeLocked(path: path)) { try Fixture.open(path) }
        first.close()
        let second = try Fixture.open(path)
        second.close()
    }

    // SPEC S1: a lock released within the patience is taken (a spawned child may share it until its exec); one held
    // longer is refused, at once without patience.
    @Test func aLockReleasedWithinThePatienceIsTaken() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.lock")
        let holder = try FileLock(path: path)
        #expect(throws: FileLock.Failure.self) { try FileLock(path: path, patienceMs: 0) }
        // The holder lets go 30 ms later, from another thread (the scenario's delay, not a wait for something).
        nonisolated(unsafe) let held = holder
        // Joined before `holder` is read again: the kernel's flock orders the unlock before the take, but TSan
        // cannot see that, and the Swift memory model does not promise it either.
        let unlocked = DispatchSemaphore(value: 0)
        let released = Thread { usleep(30_000); held.unlock(); unlocked.signal() }
        released.start()
        let taker = try FileLock(path: path, patienceMs: 5_000)
        unlocked.wait()
        #expect(taker.isHeld && !holder.isHeld)
        #expect(throws: FileLock.Failure.self) { try FileLock(path: path, patienceMs: 20) }
    }

    // SPEC S1: the lock holds against another process, both ways.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/flock")))
    func lockHoldsAcrossProcesses() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let lockPath = path + ".lock"

        let store = try Fixture.open(path)
        let probe = ChildProcess()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        probe.arguments = ["--nonblock", "--conflict-exit-code", "99", lockPath, "true"]
        try probe.run()
        probe.waitUntilExit()
        #expect(probe.terminationStatus == 99, "another process could take the lock of an open store")
        store.close()

        // A child holds the lock until its stdin closes; no sleeping: it says when it holds it.
        let holder = ChildProcess()
        let input = Pipe()
        let output = Pipe()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        holder.arguments = ["--nonblock", lockPath, "-c", "echo locked; read line"]
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        let said = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        #expect(said.hasPrefix("locked"))
        #expect(throws: OutboxError.storeLocked(path: path)) { try Fixture.open(path) }
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        let reopened = try Fixture.open(path)
        reopened.close()
    }

    // SPEC S1: the schema is versioned; re-opening does not migrate again.
    @Test func freshStoreIsMigratedAndReopensAtTheSameVersion() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        #expect(try store.db.userVersion == LogStore.schemaVersion)
        let tables = try store.db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        var names: [String] = []
        while try tables.step() { names.append(tables.string(at: 0)) }
        #expect(names == ["contexts", "dead_letters", "destinations", "event_names", "leases", "logs", "meta", "settled"])
        _ = try store.append([Fixture.log(1)])
        store.close()

        let again = try Fixture.open(path)
        defer { again.close() }
        #expect(try again.db.userVersion == LogStore.schemaVersion)
        #expect(try again.allLogs().count == 1)
    }

    // SPEC S1: a store written by a newer Outbox is refused, and left alone (it is not corrupt).
    @Test func storeFromANewerVersionIsRefusedAndKept() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        _ = try store.append([Fixture.log(1)])
        try store.db.exec("PRAGMA user_version = 99")
        store.close()
        #expect(throws: OutboxError.storeTooNew(version: 99, supported: LogStore.schemaVersion)) {
            try Fixture.open(path)
        }
        #expect(dir.contents().filter { $0.contains("corrupt") }.isEmpty)
        #expect(throws: OutboxError.storeTooNew(version: 99, supported: LogStore.schemaVersion)) {
            try StoreInspector.inspect(path: path)
        }
    }

    // SPEC S7: a file overwritten with garbage is moved aside, a fresh store works, the loss is reported once.
    @Test func garbageFileIsMovedAsideAndAFreshStoreWorks() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        _ = try store.append((0..<100).map { Fixture.log($0) })
        store.close()
        var generator = SplitMix64(seed: 7)
        let size = FileSystem.size(path) ?? 0
        let garbage = Data((0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        try garbage.write(to: URL(fileURLWithPath: path))

        let (logger, records) = RecordingLogHandler.make()
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        let fresh = try Fixture.open(path, clock: clock, logger: logger)
        defer { fresh.close() }
        let moved = try #require(fresh.recoveredFromCorruption)
        #expect(moved == "\(path).corrupt-\(Fixture.baseWallMs / 1000)")
        #expect(FileManager.default.contents(atPath: moved) == garbage)
        #expect(records.all.filter { $0.level == .error }.count == 1)
        #expect(try fresh.allLogs().isEmpty)
        _ = try fresh.append([Fixture.log(1, priority: .critical)])
        #expect(try fresh.claim(limit: 10, nowMs: 0)?.logs.count == 1)
    }

    /// A store of 2 000 logs (over 100 pages) at `path`, closed: returns the file's size.
    private func cleanlyClosedStore(at path: String) throws -> Int {
        let store = try Fixture.open(path)
        _ = try store.append((0..<2000).map { Fixture.log($0, payloadBytes: 200) })
        store.close()
        #expect(!FileSystem.exists(path + "-wal"), "closing the last connection checkpoints and removes the WAL")
        let size = try #require(FileSystem.size(path))
        #expect(size > 100 * 4096)
        return size
    }

    // SPEC S7: a file truncated in the middle of a page is caught at open (not at a random later query).
    @Test func truncatedFileIsMovedAsideAndAFreshStoreWorks() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let size = try cleanlyClosedStore(at: path)
        #expect(truncate(path, off_t(size / 2 + 1234)) == 0)

        let fresh = try Fixture.open(path)
        defer { fresh.close() }
        let moved = try #require(fresh.recoveredFromCorruption)
        #expect(FileSystem.size(moved) == size / 2 + 1234)
        #expect(try fresh.allLogs().isEmpty)
        let result = try fresh.append((0..<10).map { Fixture.log($0) })
        #expect(result.stored == 10)
    }

    // SPEC S7, README "Storage": a clean close lets the next open skip quick_check. The open's first write removes
    // the mark, so a crash after it is checked again; so is a file whose length changed since the close.
    @Test func cleanCloseLetsTheNextOpenSkipTheCheck() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let first = try Fixture.open(path)
        #expect(first.checkedAtOpen, "a new file has no mark")
        _ = try first.append((0..<500).map { Fixture.log($0, payloadBytes: 200) })
        first.close()
        #expect(!FileSystem.exists(path + "-wal"))

        let second = try Fixture.open(path)
        #expect(!second.checkedAtOpen)
        #expect(try second.meta(.closedCleanly) == nil, "the open's first transaction removes the mark")
        #expect(try second.allLogs().count == 500)
        // A crash now leaves the file as it is on disk, without the close's mark. The WAL is checkpointed into the
        // file first, so that the missing mark alone (not a leftover WAL) tells the next open.
        #expect(try second.checkpoint())
        let crashed = dir.file("crashed.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: crashed)
        #expect(!FileSystem.exists(crashed + "-wal"))
        second.close()
        let afterCrash = try Fixture.open(crashed)
        #expect(afterCrash.checkedAtOpen)
        #expect(afterCrash.recoveredFromCorruption == nil)
        #expect(try afterCrash.allLogs().count == 500)
        afterCrash.close()

        // Closed cleanly again, then grown by a page behind the store's back.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0, count: 4096))
        try handle.close()
        let grown = try Fixture.open(path)
        #expect(grown.checkedAtOpen)
        #expect(grown.recoveredFromCorruption == nil)
        #expect(try grown.allLogs().count == 500)
        grown.close()
    }

    // SPEC S7: damage inside a cleanly closed file (its length unchanged) is found by the open's own reads (the row
    // count reads every leaf of the logs' table) and gets the same treatment as when quick_check finds it.
    @Test func damageBehindACleanCloseIsFoundAtOpen() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let size = try cleanlyClosedStore(at: path)
        let half = size / 2 / 4096 * 4096
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: UInt64(half))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: size - half))
        try handle.close()
        #expect(FileSystem.size(path) == size)

        let (logger, records) = RecordingLogHandler.make()
        let fresh = try Fixture.open(path, logger: logger)
        defer { fresh.close() }
        let moved = try #require(fresh.recoveredFromCorruption)
        #expect(FileSystem.size(moved) == size)
        #expect(records.all.filter { $0.level == .error }.count == 1)
        #expect(try fresh.allLogs().isEmpty)
        #expect(try fresh.append((0..<10).map { Fixture.log($0) }).stored == 10)
    }

    // SPEC S7: two corruptions in the same second keep both pieces of evidence.
    @Test func secondCorruptionInTheSameSecondDoesNotOverwriteTheFirst() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let clock = ManualClock(wallMs: Fixture.baseWallMs)
        var moved: [String] = []
        // A store lived here (its lock file stays): garbage at its path is a damaged store, not another file (S7).
        try Fixture.open(path, clock: clock).close()
        for _ in 0..<2 {
            try Data(repeating: 0xEE, count: 8192).write(to: URL(fileURLWithPath: path))
            let store = try Fixture.open(path, clock: clock)
            moved.append(try #require(store.recoveredFromCorruption))
            store.close()
        }
        #expect(moved[0] != moved[1])
        #expect(moved.allSatisfy { FileSystem.exists($0) })
    }

    // SPEC S7: corruption found mid-session gets the same treatment; the call that found it still succeeds.
    @Test func corruptionFoundMidSessionIsRecovered() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let (logger, records) = RecordingLogHandler.make()
        let store = try Fixture.open(path, logger: logger)
        defer { store.close() }
        _ = try store.append((0..<2000).map { Fixture.log($0, payloadBytes: 200) })
        try store.checkpoint()
        try Fixture.scribbleOverAllButTheFirstPage(store, path: path)

        let result = try store.append([Fixture.log(9999)])
        #expect(result.stored == 1)
        let moved = try #require(store.recoveredFromCorruption)
        #expect(FileSystem.exists(moved))
        #expect(try store.allLogs().map(Fixture.ordinal) == [9999])
        #expect(records.all.filter { $0.level == .error }.count == 1)
    }

    // SPEC X4: `outbox status` reads counts while the engine holds the store.
    @Test func inspectReadsCountsWhileAnotherStoreHoldsTheLock() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path)
        _ = try store.append((0..<5).map { Fixture.log($0) } + (5..<8).map { Fixture.log($0, priority: .critical) })
        try store.setMeta(.enabled, "true")
        _ = try store.claim(limit: 4, nowMs: 0)

        let (counts, meta, _) = try StoreInspector.inspect(path: path)
        #expect(counts.pendingCritical == 0)
        #expect(counts.pendingNormal == 4)
        #expect(counts.inFlight == 4)
        #expect(counts.bytes > 0)
        #expect(counts.oldestWallMs == Fixture.baseWallMs)
        #expect(meta[.enabled] == "true")
        #expect(try store.counts() == counts)
        // The store keeps working after the inspection.
        #expect(try store.append([Fixture.log(9)]).stored == 1)
        store.close()

        // And with no engine running (WAL removed at close).
        let closed = try StoreInspector.inspect(path: path)
        #expect(closed.counts.pendingNormal + closed.counts.pendingCritical == 5)
        #expect(closed.counts.inFlight == 4, "inspection recovers nothing: rows return to pending when an engine opens the store")
    }

    // SPEC X4: a missing store is a clear error, and inspecting does not create it.
    @Test func inspectOfAMissingStoreIsAClearError() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("missing.sqlite")
        #expect(throws: OutboxError.io(path: path, message: "no store at this path (check --store)")) {
            try StoreInspector.inspect(path: path)
        }
        #expect(!FileSystem.exists(path))
    }
}
