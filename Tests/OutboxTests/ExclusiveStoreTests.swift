import Foundation
import Testing
@testable import Outbox

/// `Configuration.exclusiveStoreLock` (SPEC F4: at most 4 descriptors a fleet device): SQLite's exclusive locking
/// mode keeps the WAL index in memory and holds the database's own lock, so the store needs only the database and
/// its WAL open while it runs, and a second opener still gets the clear "store in use" error (SPEC S1).
@Suite("exclusive store lock (SPEC F4, S1)")
struct ExclusiveStoreTests {
    static var exclusive: StoreLimits {
        var limits = StoreLimits()
        limits.exclusiveLock = true
        return limits
    }

    /// The files this process has open, by path.
    static func openFiles() -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
    }

    // SPEC F4: no -shm file is ever created, and neither it nor the .lock file is held open while the store runs.
    @Test func anExclusiveStoreHoldsOnlyItsDatabaseAndWAL() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path, limits: Self.exclusive)
        _ = try store.append((0..<50).map { Fixture.log($0) })
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        let held = Self.openFiles().filter { $0.hasPrefix(path) }
        #expect(!held.contains(path + "-shm"))
        #expect(!held.contains(path + ".lock"))
        #expect(held.contains(path))
        #expect(held.contains(path + "-wal"))
        #expect(try store.counts().pendingNormal == 50)
        store.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        #expect(Self.openFiles().filter { $0.hasPrefix(path) }.isEmpty)
    }

    // SPEC S1: while it runs, a second engine on the same file is refused with `storeLocked`, in either mode, and a
    // reader such as `outbox status` cannot read it either; after close the store opens again.
    @Test func aSecondOpenIsRefusedAsStoreLocked() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let first = try Fixture.open(path, limits: Self.exclusive)
        _ = try first.append([Fixture.log(1)])
        #expect(throws: OutboxError.storeLocked(path: path)) { try Fixture.open(path, limits: Self.exclusive) }
        #expect(throws: OutboxError.storeLocked(path: path)) { try Fixture.open(path) }
        #expect(throws: (any Error).self) { try StoreReport.read(path: path) }
        first.close()
        let second = try Fixture.open(path, limits: Self.exclusive)
        #expect(try second.counts().pendingNormal == 1)
        second.close()
        // The file is an ordinary WAL store afterwards: a default engine and a reader open it.
        #expect(try StoreReport.read(path: path).pendingNormal == 1)
    }

    // SPEC S6, S7: what a killed process leaves on disk (the database and a WAL holding the commits, no clean-close
    // marker) opens again with every committed log, in exclusive mode and in the default one.
    @Test func aStoreLeftByACrashReopensWithItsCommits() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path, limits: Self.exclusive)
        _ = try store.append((0..<20).map { Fixture.log($0) })
        // While it runs: the files as they are at this instant, as a kill -9 would leave them.
        for crashed in ["crashed-a.sqlite", "crashed-b.sqlite"] {
            try FileManager.default.copyItem(atPath: path, toPath: dir.file(crashed))
            try FileManager.default.copyItem(atPath: path + "-wal", toPath: dir.file(crashed) + "-wal")
            #expect((try FileManager.default.attributesOfItem(atPath: dir.file(crashed) + "-wal")[.size] as? Int ?? 0) > 0)
        }
        store.close()

        let exclusive = try Fixture.open(dir.file("crashed-a.sqlite"), limits: Self.exclusive)
        #expect(exclusive.checkedAtOpen)
        #expect(try exclusive.counts().pendingNormal == 20)
        exclusive.close()
        let shared = try Fixture.open(dir.file("crashed-b.sqlite"))
        #expect(try shared.counts().pendingNormal == 20)
        shared.close()
    }
}
