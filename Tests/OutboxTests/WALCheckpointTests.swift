import Foundation
import Testing
@testable import Outbox

/// The store's WAL checkpoints run on libuv's pool, not inside the loop's commits (README, "Storage"): the loop —
/// the engine's own or the host's — never waits for a checkpoint's page copies and syncs.
@Suite("WAL checkpoints off the loop")
struct WALCheckpointTests {
    /// Records the WAL's frame count after each commit.
    private final class Frames: @unchecked Sendable {
        var counts: [Int] = []
    }

    // With a hook installed the store's connection checkpoints no more: the WAL grows past the threshold at which
    // SQLite would have copied it back. Removing the hook brings the automatic checkpoints back.
    @Test func aWALHookTakesOverTheConnectionsCheckpoints() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"), limits: StoreLimits(maxStorageSize: 4 << 20))
        defer { store.close() }
        let threshold = store.walAutocheckpointPages
        let frames = Frames()
        store.setWALCommitHook { frames.counts.append($0) }
        for ordinal in 0..<(threshold * 2) {
            _ = try store.append([Fixture.log(ordinal, payloadBytes: 3000)])
        }
        #expect(frames.counts.count == threshold * 2)
        #expect((frames.counts.max() ?? 0) > threshold * 2, "frames: \(frames.counts.suffix(3))")
        #expect(frames.counts == frames.counts.sorted(), "the WAL restarted: something checkpointed it")

        store.setWALCommitHook(nil)
        for ordinal in 0..<(threshold * 2) {
            _ = try store.append([Fixture.log(10_000 + ordinal, payloadBytes: 3000)])
        }
        let after = Frames()
        store.setWALCommitHook { after.counts.append($0) }
        _ = try store.append([Fixture.log(20_000, payloadBytes: 3000)])
        // SQLite checkpointed at the threshold again, so the WAL restarted since.
        #expect((after.counts.first ?? .max) < threshold + 10, "frames: \(after.counts)")
    }

    // The engine hands checkpoints to the pool: they happen (the WAL stays near its size limit although far more
    // was written through it), every log is kept, and shutdown leaves no handle open.
    @Test func theEngineCheckpointsOnThePoolAndKeepsEveryLog() async throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var configuration = testConfiguration(dir.file())
        configuration.maxStorageSize = 8 << 20
        configuration.groupCommitWindow = .milliseconds(1)
        let engine = try OutboxEngine(configuration: configuration)
        let padding = String(repeating: "w", count: 120)
        let properties: [String: PropertyValue] = ["a": .string(padding), "b": .string(padding), "c": .string(padding),
                                                   "d": .string(padding), "e": .string(padding)]
        var maxWAL = 0
        for round in 0..<60 {
            for index in 0..<100 {
                try engine.trackEvent("wal", properties: properties.merging(["i": .int(Int64(round * 100 + index))]) { $1 })
            }
            // Half the rounds leave the loop a pause (the jobs finish the WAL, the next write restarts it); the
            // other half keep it committing, so the WAL is bounded only by the copy during a commit.
            if round < 30 { await engine.persisted() }
            maxWAL = max(maxWAL, FileSystem.size(dir.file() + "-wal") ?? 0)
        }
        await engine.persisted()
        let limit = try await engine.withStore { $0.walSizeLimit }
        engine.shutdown()
        #expect(engine.walCheckpointsCompleted > 0)
        print("WAL checkpoints: \(engine.walCheckpointsCompleted) on the pool, \(engine.walCheckpointsInsideCommits) during commits, max WAL \(maxWAL) B")
        #expect(engine.dedicatedLoopCloseResult == 0)
        let report = try StoreReport.read(path: dir.file())
        #expect(report.pendingNormal == 6000)
        // About 6 MB went through the WAL; without checkpoints it would hold all of it.
        #expect(maxWAL <= limit + (1 << 20), "max WAL \(maxWAL) bytes, limit \(limit)")
    }
}
