import Testing
@testable import Outbox

/// The size and count caps: eviction order, rejections, disk full, the WAL bound.
struct LogStoreLimitTests {
    static let smallCap = StoreLimits(maxStorageSize: 256 * 1024)

    /// Appends groups of `make(i)` until an append evicts (the store is full). Returns the next ordinal.
    static func fill(_ store: LogStore, from start: Int = 0, group: Int = 10,
                     _ make: (Int) -> NewLog) throws -> Int {
        var next = start
        while true {
            let result = try store.append((next..<next + group).map(make))
            next += group
            if result.evicted > 0 || !result.rejected.isEmpty { return next }
            if next > start + 100_000 { Issue.record("the store never filled up"); return next }
        }
    }

    // SPEC S2: when a new log does not fit, the oldest normal logs are evicted first, counted and logged.
    @Test func oldestNormalLogsAreEvictedFirst() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let (logger, records) = RecordingLogHandler.make()
        let store = try Fixture.open(path, limits: Self.smallCap, logger: logger)
        defer { store.close() }
        let next = try Self.fill(store) { Fixture.log($0, payloadBytes: 500) }
        for ordinal in next..<next + 200 {
            _ = try store.append([Fixture.log(ordinal, payloadBytes: 500)])
        }
        let ordinals = try store.allLogs().map(Fixture.ordinal)
        let last = next + 199
        #expect(ordinals.last == last)
        #expect(ordinals == Array((last - ordinals.count + 1)...last), "only the oldest went")
        #expect(store.evictedTotal == last + 1 - ordinals.count)
        #expect((FileSystem.size(path) ?? .max) <= Self.smallCap.maxStorageSize)
        let logged = records.all.filter { $0.level == .info && $0.metadata["outbox.evicted"] != nil }
        #expect(logged.reduce(0) { $0 + (Int($1.metadata["outbox.evicted"]?.description ?? "") ?? 0) } == store.evictedTotal)
    }

    // SPEC S2: normal logs go before critical ones, whatever their age.
    @Test func criticalLogsOutliveNewerNormalLogs() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: Self.smallCap)
        defer { store.close() }
        _ = try store.append((0..<20).map { Fixture.log($0, priority: .critical, payloadBytes: 500) })
        let next = try Self.fill(store, from: 20) { Fixture.log($0, payloadBytes: 500) }
        _ = try store.append((next..<next + 100).map { Fixture.log($0, payloadBytes: 500) })
        let logs = try store.allLogs()
        #expect(logs.filter { $0.priority == .critical }.map(Fixture.ordinal) == Array(0..<20))
        #expect(logs.first { $0.priority == .normal }.map(Fixture.ordinal) ?? 0 > 20)
        #expect(store.evictedTotal > 100)
    }

    // SPEC S2: pending logs are evicted before in-flight ones (a batch on the wire is likely to be delivered).
    @Test func pendingLogsAreEvictedBeforeInFlightOnes() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: Self.smallCap)
        defer { store.close() }
        _ = try store.append((0..<10).map { Fixture.log($0, payloadBytes: 500) })
        let batch = try #require(try store.claim(limit: 5, nowMs: 0))
        let next = try Self.fill(store, from: 10) { Fixture.log($0, payloadBytes: 500) }
        _ = try store.append([Fixture.log(next, payloadBytes: 500)])
        let ordinals = try store.allLogs().map(Fixture.ordinal)
        #expect(Array(ordinals.prefix(5)) == [0, 1, 2, 3, 4])
        #expect(!ordinals.contains(5))
        #expect(try store.complete(batchID: batch.batchID) == 5)
    }

    // SPEC S2: when nothing pending is left, in-flight logs are evicted too, oldest first; the batch then
    // completes with fewer rows.
    @Test func inFlightLogsAreEvictedWhenNothingPendingIsLeft() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxStorageSize: 64 * 1024))
        defer { store.close() }
        let next = try Self.fill(store, group: 5) { Fixture.log($0, payloadBytes: 400) }
        let batch = try #require(try store.claim(limit: 1000, nowMs: 0))
        #expect(try store.counts().pendingNormal == 0)
        let result = try store.append((next..<next + 20).map { Fixture.log($0, payloadBytes: 400) })
        #expect(result.stored == 20 && result.evicted >= 1)
        let ordinals = try store.allLogs().map(Fixture.ordinal)
        #expect(!ordinals.contains(Fixture.ordinal(of: batch.logs[0])))
        #expect(ordinals.last == next + 19)
        #expect(try store.complete(batchID: batch.batchID) == batch.logs.count - result.evicted)
    }

    // SPEC S3: storage full of critical logs: a new normal log is rejected, a new critical one evicts the oldest
    // critical log.
    @Test func fullOfCriticalLogsRejectsNormalAndRotatesCritical() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxStorageSize: 64 * 1024))
        defer { store.close() }
        // Full to the log: fill in groups, then one at a time until a single critical log had to evict (an eviction
        // for a group of 5 can leave room for one more log, depending on page geometry).
        let filled = try Self.fill(store, group: 5) { Fixture.log($0, priority: .critical, payloadBytes: 400) }
        let next = try Self.fill(store, from: filled, group: 1) { Fixture.log($0, priority: .critical, payloadBytes: 400) }
        let before = try store.allLogs()
        #expect(before.allSatisfy { $0.priority == .critical })

        let normal = try store.append([Fixture.log(next, payloadBytes: 400)])
        #expect(normal == AppendResult(stored: 0, evicted: 0, rejected: [0: .storageFull]))
        #expect(try store.allLogs() == before)

        let critical = try store.append([Fixture.log(next + 1, priority: .critical, payloadBytes: 400)])
        #expect(critical.stored == 1 && critical.evicted >= 1 && critical.rejected.isEmpty)
        let after = try store.allLogs()
        #expect(after.last.map(Fixture.ordinal) == next + 1)
        #expect(Array(after.dropLast()) == Array(before.dropFirst(critical.evicted)))
    }

    // SPEC S3: within one append, normal logs cannot push out stored critical logs; critical ones get the room.
    @Test func mixedAppendIntoAFullCriticalStore() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxStorageSize: 64 * 1024))
        defer { store.close() }
        let next = try Self.fill(store, group: 5) { Fixture.log($0, priority: .critical, payloadBytes: 400) }
        let criticalBefore = try store.allLogs().count
        let batch = [Fixture.log(next, payloadBytes: 400), Fixture.log(next + 1, priority: .critical, payloadBytes: 400),
                     Fixture.log(next + 2, payloadBytes: 400)]
        let result = try store.append(batch)
        #expect(result.rejected == [0: .storageFull, 2: .storageFull])
        #expect(result.stored == 1)
        #expect(try store.allLogs().count == criticalBefore + 1 - result.evicted)
    }

    // SPEC S5: the count cap evicts like the size cap, and a store full of critical logs rejects normal ones.
    @Test func countCapEvictsOldestNormalThenRejects() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxLogCount: 10))
        defer { store.close() }
        _ = try store.append((0..<10).map { Fixture.log($0) })
        let more = try store.append((10..<15).map { Fixture.log($0) })
        #expect(more == AppendResult(stored: 5, evicted: 5, rejected: [:]))
        #expect(try store.allLogs().map(Fixture.ordinal) == Array(5..<15))

        let critical = try store.append((15..<25).map { Fixture.log($0, priority: .critical) })
        #expect(critical.stored == 10 && critical.evicted == 10)
        let normal = try store.append([Fixture.log(25)])
        #expect(normal.rejected == [0: .storageFull])
        let rotated = try store.append([Fixture.log(26, priority: .critical)])
        #expect(rotated == AppendResult(stored: 1, evicted: 1, rejected: [:]))
        #expect(try store.allLogs().map(Fixture.ordinal) == Array(16..<25) + [26])
    }

    // SPEC S2: a log larger than the whole cap is rejected without evicting anything; its neighbours are stored.
    @Test func logLargerThanTheCapIsRejectedWithoutEviction() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let limits = StoreLimits(maxStorageSize: 64 * 1024)
        let store = try Fixture.open(dir.file("store.sqlite"), limits: limits)
        defer { store.close() }
        _ = try store.append((0..<20).map { Fixture.log($0, payloadBytes: 1000) })
        let before = try store.allLogs()
        let result = try store.append([Fixture.log(20, payloadBytes: 70_000), Fixture.log(21, priority: .critical, payloadBytes: 60_000),
                                       Fixture.log(22, payloadBytes: 100)])
        #expect(result.rejected == [0: .logTooLarge(bytes: 70_000, limit: limits.maxStorageSize),
                                    1: .logTooLarge(bytes: 60_000, limit: limits.maxStorageSize)])
        #expect(result.stored == 1 && result.evicted == 0)
        #expect(try store.allLogs() == before + [try #require(try store.allLogs().last)])
    }

    // SPEC S2, S7: 100 000 logs of 50–2000 bytes in engine-like groups through a 1 MiB cap: the database file
    // never exceeds the cap, the WAL stays under 4 MiB, nothing throws, critical logs survive.
    @Test func heavyTrafficThroughASmallCapStaysBounded() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let limits = StoreLimits(maxStorageSize: 1024 * 1024)
        let store = try Fixture.open(path, limits: limits)
        defer { store.close() }
        var random = SplitMix64(seed: 2024)
        var ordinal = 0
        var criticalAppended = 0
        var maxFile = 0
        var maxWal = 0
        var stored = 0
        var rejected = 0
        let payloads = (0..<64).map { [UInt8](repeating: UInt8(ascii: "a") + UInt8($0 % 26), count: 50 + $0 * 1950 / 63) }
        while ordinal < 100_000 {
            let count = min(Int.random(in: 1...1000, using: &random), 100_000 - ordinal)
            var logs: [NewLog] = []
            logs.reserveCapacity(count)
            for _ in 0..<count {
                let critical = ordinal % 2000 == 0
                if critical { criticalAppended += 1 }
                var log = Fixture.log(ordinal, priority: critical ? .critical : .normal, payloadBytes: 0)
                log.payload = payloads[Int.random(in: 0..<payloads.count, using: &random)]
                logs.append(log)
                ordinal += 1
            }
            let result = try store.append(logs)
            // A group can hold more than the whole cap: then its earliest normal logs cannot be kept.
            let rejectedNormal = result.rejected.keys.filter { logs[$0].priority == .normal && result.rejected[$0] == .storageFull }
            #expect(rejectedNormal.count == result.rejected.count)
            #expect(result.stored + result.rejected.count == count)
            stored += result.stored
            rejected += result.rejected.count
            maxFile = max(maxFile, FileSystem.size(path) ?? 0)
            maxWal = max(maxWal, store.walFileSize)
        }
        #expect(maxFile <= limits.maxStorageSize)
        #expect(maxWal <= 4 * 1024 * 1024)
        let logs = try store.allLogs()
        #expect(logs.filter { $0.priority == .critical }.count == criticalAppended)
        #expect(stored + rejected == 100_000)
        #expect(logs.count == stored - store.evictedTotal)
        #expect(logs.map(\.seq) == logs.map(\.seq).sorted())
        print("heavy traffic: max db \(maxFile) B, max wal \(maxWal) B, kept \(logs.count), rejected \(rejected), evicted \(store.evictedTotal), SQLITE_FULL retries \(store.fullRetriesTotal)")
    }

    // SPEC S7: disk full at the smallest cap (24 KiB): evictions or rejections, never a crash or a throw.
    @Test func tinyCapNeverThrows() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let limits = StoreLimits(maxStorageSize: LogStore.minimumStorageSize, maxDeadLetterBytes: 4096)
        let store = try Fixture.open(path, limits: limits)
        defer { store.close() }
        var random = SplitMix64(seed: 24)
        var ordinal = 0
        for round in 0..<300 {
            let count = Int.random(in: 1...40, using: &random)
            let logs = (0..<count).map { _ -> NewLog in
                ordinal += 1
                return Fixture.log(ordinal, priority: Int.random(in: 0..<4, using: &random) == 0 ? .critical : .normal,
                                   payloadBytes: Int.random(in: 50...30_000, using: &random))
            }
            let result = try store.append(logs, newEventNames: ["name\(round % 50)"])
            #expect(result.stored + result.rejected.count == count)
            #expect((FileSystem.size(path) ?? .max) <= limits.maxStorageSize)
            if round % 10 == 0, let batch = try store.claim(limit: 5, nowMs: 0) {
                if round % 20 == 0 {
                    _ = try store.deadLetter(seqs: batch.logs.map(\.seq), status: 400, reason: "refused")
                } else {
                    _ = try store.release(batchID: batch.batchID, nextAttemptMs: 0)
                }
            }
        }
        print("tiny cap: evicted \(store.evictedTotal), SQLITE_FULL retries \(store.fullRetriesTotal)")
        try store.setMeta(.destination, "works")
        #expect(try store.meta(.destination) == "works")
        #expect((FileSystem.size(path) ?? .max) <= limits.maxStorageSize)
        #expect(store.walFileSize <= 1024 * 1024)
    }

    // SPEC S1, S2: the WAL (outside the cap) is bounded by its checkpoint size, which follows the cap: a quarter of it up to 1000 pages, and 1/16 of it up to 4096 pages
    // (16 MiB) for large caps, where a drain otherwise stalls on a checkpoint's two syncs every 1000 pages.
    @Test func checkpointSizeFollowsTheCap() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let cases: [(cap: Int, pages: Int)] = [(64 * 1024, 16), (1 << 20, 64), (10 << 20, 640), (64 << 20, 1024),
                                               (256 << 20, 4096), (1 << 30, 4096)]
        for (index, (cap, pages)) in cases.enumerated() {
            let store = try Fixture.open(dir.file("store\(index).sqlite"), limits: StoreLimits(maxStorageSize: cap))
            defer { store.close() }
            #expect(store.walAutocheckpointPages == pages, "cap \(cap)")
            let checkpointer = try #require(store.db.walCheckpointer)
            #expect(checkpointer.checkpointPages == Int32(pages), "cap \(cap)")
            // 1 MiB of WAL between write-backs, at least four per checkpoint (1 KiB pages below a 512 KiB cap).
            let pageSize = cap >= 512 * 1024 ? 4096 : 1024
            #expect(checkpointer.writeBackPages == Int32(max(1, min((1 << 20) / pageSize, pages / 4))), "cap \(cap)")
            #expect(try store.db.int64("PRAGMA journal_size_limit") == Int64(max(1 << 20, 2 * pages * 4096)), "cap \(cap)")
        }
    }

    // SPEC S1: the store's own WAL hook checkpoints at the threshold, as SQLite's would, and starts the kernel's
    // write-back of the WAL every `writeBackPages` frames in between, so that the checkpoint's sync has little
    // left to write (BENCHMARKS.md, Delivery). The write-backs go through the store's own read-only descriptor.
    @Test func walIsWrittenBackBetweenCheckpoints() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxStorageSize: 64 << 20))
        defer { store.close() }
        let checkpointer = try #require(store.db.walCheckpointer)
        #expect(checkpointer.checkpointPages == 1024)
        #expect(checkpointer.writeBackPages == 256)
        // ~3 000 pages of logs, 50 per transaction (~9 pages each), then delivered (deleted) in batches of 50.
        for start in stride(from: 0, to: 10_000, by: 50) {
            _ = try store.append((start..<start + 50).map { Fixture.log($0, payloadBytes: 1000) })
        }
        while let batch = try store.claim(limit: 50, nowMs: 0) {
            try store.complete(batchID: batch.batchID)
        }
        #expect(try store.allLogs().isEmpty)
        #expect(checkpointer.checkpoints >= 2)
        // Between two checkpoints of 1 024 frames, three write-backs (at 256, 512 and 768 frames).
        #expect(checkpointer.writeBacks >= 3 * checkpointer.checkpoints)
        #expect(store.walFileSize <= store.walSizeLimit)
    }

    // The page cache follows the cap like the checkpoints do: a 256th of it, 1–4 MiB (negative: KiB).
    @Test func pageCacheFollowsTheCap() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let cases: [(cap: Int, kib: Int64)] = [(64 * 1024, 1024), (10 << 20, 1024), (256 << 20, 1024),
                                               (512 << 20, 2048), (1 << 30, 4096), (8 << 30, 4096)]
        for (index, (cap, kib)) in cases.enumerated() {
            let store = try Fixture.open(dir.file("store\(index).sqlite"), limits: StoreLimits(maxStorageSize: cap))
            defer { store.close() }
            #expect(try store.db.int64("PRAGMA cache_size") == -kib, "cap \(cap)")
        }
    }

    // SPEC S7: an SQLITE_FULL the soft check did not foresee is handled by evicting more, not by failing.
    @Test func unexpectedSQLiteFullIsRetriedWithEviction() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxStorageSize: 1024 * 1024))
        defer { store.close() }
        _ = try store.append((0..<10).map { Fixture.log($0, priority: .critical, payloadBytes: 300) })
        _ = try store.append((10..<300).map { Fixture.log($0, payloadBytes: 300) })
        // The hard limit drops below what the soft check believes (as a full disk would do).
        let pages = try store.db.pragma("page_count")
        try store.db.exec("PRAGMA max_page_count = \(pages + 1)")
        let result = try store.append((300..<400).map { Fixture.log($0, payloadBytes: 300) })
        #expect(result.stored == 100)
        #expect(result.evicted > 0)
        #expect(store.fullRetriesTotal > 0)
        let logs = try store.allLogs()
        #expect(logs.filter { $0.priority == .critical }.count == 10)
        #expect(logs.last.map(Fixture.ordinal) == 399)
    }

    // SPEC S2: lowering the cap between runs shrinks the file to the new cap at open.
    @Test func loweredCapShrinksTheFileAtOpen() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path, limits: StoreLimits(maxStorageSize: 2 * 1024 * 1024))
        _ = try store.append((0..<3000).map { Fixture.log($0, payloadBytes: 500) })
        store.close()
        #expect((FileSystem.size(path) ?? 0) > 1024 * 1024)

        let smaller = StoreLimits(maxStorageSize: 1024 * 1024)
        let reopened = try Fixture.open(path, limits: smaller)
        defer { reopened.close() }
        #expect((FileSystem.size(path) ?? .max) <= smaller.maxStorageSize)
        let ordinals = try reopened.allLogs().map(Fixture.ordinal)
        #expect(ordinals.last == 2999)
        #expect(reopened.evictedTotal == 3000 - ordinals.count)
        #expect(try reopened.append([Fixture.log(3000, payloadBytes: 500)]).stored == 1)
    }

    // SPEC S2, S5: maxStorageSize has a 24 KiB minimum; maxLogCount, when set, is at least 1.
    @Test func limitsBelowTheMinimumAreRefused() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        #expect(throws: OutboxError.self) {
            try Fixture.open(dir.file("a.sqlite"), limits: StoreLimits(maxStorageSize: 16 * 1024))
        }
        #expect(throws: OutboxError.self) {
            try Fixture.open(dir.file("b.sqlite"), limits: StoreLimits(maxLogCount: 0))
        }
    }
}
