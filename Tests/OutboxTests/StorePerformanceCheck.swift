import CSQLite
import Foundation
import Testing
@testable import Outbox

/// Not a timed test: prints append throughput next to the raw SQLite baseline when OUTBOX_PERF is set.
/// Run: `OUTBOX_PERF=1 swift test -c release -Xswiftc -enable-testing --filter StorePerformanceCheck`
/// (`OUTBOX_PERF_DIR=/dev/shm` takes the disk out of the measurement; `OUTBOX_PERF_LOGS` changes the count).
/// The disk of a shared machine is noisy: each variant runs three times, interleaved, files deleted and
/// `sync()` called between runs; the best and the median are printed.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["OUTBOX_PERF"] != nil))
struct StorePerformanceCheck {
    static let environment = ProcessInfo.processInfo.environment
    static let total = Int(environment["OUTBOX_PERF_LOGS"] ?? "") ?? 1_000_000
    static let directory = environment["OUTBOX_PERF_DIR"] ?? "/tmp"
    static let rounds = 3
    static let group = 1000
    static let payloadBytes = 300

    // SPEC T5 (group commit): the engine's append must keep up with the raw insert rate.
    @Test func appendThroughputAgainstRawSQLite() throws {
        let dir = TempDirectory(base: Self.directory)
        defer { dir.remove() }
        let logs = (0..<Self.group).map { Fixture.log($0, priority: $0 % 100 == 0 ? .critical : .normal,
                                                      payloadBytes: Self.payloadBytes) }
        var raw: [Double] = []
        var uncapped: [Double] = []
        var capped: [Double] = []
        var notes: [String] = []
        for round in 0..<Self.rounds {
            let file = dir.file("round\(round).sqlite")
            Self.clean(file)
            raw.append(try Self.rawBaseline(path: file))
            Self.clean(file)

            let store = try Fixture.open(file, limits: StoreLimits(maxStorageSize: 2 * 1024 * 1024 * 1024))
            uncapped.append(try Self.appendRate(store, logs))
            notes.append("uncapped: wal \(store.walFileSize) bytes")
            store.close()
            Self.clean(file)

            // Steady state at the default 10 MiB cap: every append evicts about as much as it adds.
            let small = try Fixture.open(file, limits: StoreLimits())
            capped.append(try Self.appendRate(small, logs))
            notes.append("capped: evicted \(small.evictedTotal), SQLITE_FULL retries \(small.fullRetriesTotal), db \(FileSystem.size(file) ?? 0) bytes, wal \(small.walFileSize) bytes")
            small.close()
            Self.clean(file)
        }
        let bestRaw = raw.max() ?? 1
        let medianRaw = raw.sorted()[raw.count / 2]
        print("PERF dir \(Self.directory), \(Self.total) logs of \(Self.payloadBytes) B in groups of \(Self.group), \(Self.rounds) interleaved rounds")
        print("PERF raw sqlite rows/s: \(raw.map { Int($0) })")
        print("PERF LogStore.append, cap not reached, logs/s: \(uncapped.map { Int($0) })")
        print("PERF LogStore.append at the 10 MiB cap, logs/s: \(capped.map { Int($0) })")
        print(String(format: "PERF best: append %.0f%% of raw, capped %.0f%% of raw; median: append %.0f%%, capped %.0f%%",
                     100 * (uncapped.max() ?? 0) / bestRaw, 100 * (capped.max() ?? 0) / bestRaw,
                     100 * uncapped.sorted()[uncapped.count / 2] / medianRaw, 100 * capped.sorted()[capped.count / 2] / medianRaw))
        for note in notes { print("PERF \(note)") }
    }

    // SPEC C4: claiming the oldest 50 among 35 000 stored logs.
    @Test func claimLatency() throws {
        let dir = TempDirectory(base: Self.directory)
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        for base in stride(from: 0, to: 35_000, by: 1000) {
            _ = try store.append((base..<base + 1000).map { Fixture.log($0, priority: $0 % 50 == 0 ? .critical : .normal, payloadBytes: 250) })
        }
        let stored = try store.counts()
        let rounds = 200
        var claimTime = Duration.zero
        var settleTime = Duration.zero
        for round in 0..<rounds {
            let start = ContinuousClock.now
            guard let batch = try store.claim(limit: 50, nowMs: Fixture.baseWallMs) else { break }
            let claimed = ContinuousClock.now
            if round % 2 == 0 { try store.complete(batchID: batch.batchID) } else { try store.release(batchID: batch.batchID, nextAttemptMs: 0) }
            claimTime += claimed - start
            settleTime += ContinuousClock.now - claimed
        }
        store.close()
        let openStart = ContinuousClock.now
        let reopened = try Fixture.open(dir.file("store.sqlite"))
        let openTime = Self.seconds(ContinuousClock.now - openStart) * 1000
        reopened.close()
        print(String(format: "PERF reopening a full 10 MiB store (quick_check, recovery, expiry): %.1f ms", openTime))
        print(String(format: "PERF with %d stored logs: claim(50) %.3f ms, complete/release %.3f ms (mean of %d)",
                     stored.pendingNormal + stored.pendingCritical,
                     Self.seconds(claimTime) / Double(rounds) * 1000, Self.seconds(settleTime) / Double(rounds) * 1000, rounds))
    }

    static func appendRate(_ store: LogStore, _ logs: [NewLog]) throws -> Double {
        let start = ContinuousClock.now
        for _ in 0..<(total / group) {
            _ = try store.append(logs)
        }
        return Double(total) / seconds(ContinuousClock.now - start)
    }

    static func clean(_ file: String) {
        for suffix in ["", "-wal", "-shm", ".lock"] { unlink(file + suffix) }
        sync()
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Plain table, WAL, synchronous=NORMAL, 1000 rows per transaction, one reused prepared statement.
    static func rawBaseline(path: String) throws -> Double {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else {
            throw OutboxError.io(path: path, message: "open failed")
        }
        defer { sqlite3_close_v2(db) }
        sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, payload BLOB)", nil, nil, nil)
        var stmt: OpaquePointer?
        sqlite3_prepare_v3(db, "INSERT INTO t(payload) VALUES (?)", -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        defer { sqlite3_finalize(stmt) }
        let payload = [UInt8](repeating: 0x78, count: payloadBytes)
        let start = ContinuousClock.now
        for _ in 0..<(total / group) {
            sqlite3_exec(db, "BEGIN", nil, nil, nil)
            for _ in 0..<group {
                payload.withUnsafeBytes { bytes in
                    _ = sqlite3_bind_blob(stmt, 1, bytes.baseAddress, Int32(bytes.count), outbox_sqlite_transient())
                }
                guard sqlite3_step(stmt) == SQLITE_DONE else { throw OutboxError.io(path: path, message: "step failed") }
                sqlite3_reset(stmt)
            }
            sqlite3_exec(db, "COMMIT", nil, nil, nil)
        }
        return Double(total) / seconds(ContinuousClock.now - start)
    }
}
