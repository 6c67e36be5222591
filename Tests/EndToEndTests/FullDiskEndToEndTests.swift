import Foundation
import Glibc
import OutboxMock
import Testing
@testable import Outbox

/// A real filesystem that fills up: a tmpfs of a few MiB mounted under a temporary directory. Needs root and a
/// working `mount`; otherwise `mount` returns nil and says why.
struct SmallDisk {
    let dir: TempDirectory
    var path: String { dir.path }
    var store: String { dir.file() }
    var filler: String { path + "/filler" }

    static func mount(megabytes: Int, name: String = #function) -> SmallDisk? {
        guard getuid() == 0 else {
            print("skipped: mounting a tmpfs needs root (uid \(getuid()))")
            return nil
        }
        let disk = SmallDisk(dir: TempDirectory(name))
        let mounted = try? run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", disk.path])
        guard mounted?.status == 0 else {
            print("skipped: could not mount a tmpfs on \(disk.path) (status \(mounted.map { "\($0.status)" } ?? "unknown"))")
            disk.dir.remove()
            return nil
        }
        return disk
    }

    /// Unmounts (lazily, should a descriptor still be open) and removes the directory.
    func unmount() {
        _ = try? run("/usr/bin/umount", ["-l", path])
        dir.remove()
    }

    var availableBytes: Int { FileSystem.availableBytes(path) ?? -1 }

    /// Takes every byte left on the disk with a file of its own: the disk is full for everyone.
    func fill() {
        let fd = open(filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        for size in [65_536, 4096, 512, 1] {
            let chunk = [UInt8](repeating: 0, count: size)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, size) }) == size {}
        }
    }

    func freeFiller() { FileSystem.remove(filler) }
}

/// SPEC S2, S7 on a real full disk: nothing unaccounted for, nothing blocked.
@Suite("Full disk (SPEC S2, S7)", .serialized)
struct FullDiskEndToEndTests {
    /// Manual dispatch: nothing leaves until a test asks, so the identity of S2 holds without `delivered`.
    private func configuration(_ disk: SmallDisk, endpoint: String) -> Configuration {
        var configuration = fastConfiguration(store: disk.store, endpoint: endpoint)
        configuration.dispatchInterval = .zero
        return configuration
    }

    /// Tracks far more than a 3 MiB disk holds (about 9 MB of rows); returns how many calls were accepted.
    private func trackUntilFullAndBeyond(_ engine: OutboxEngine, count: Int = 30_000) async -> Int {
        let padding = String(repeating: "p", count: 100)
        var tracked = 0
        for index in 0..<count {
            if (try? engine.trackEvent("fill", properties: ["i": .int(Int64(index)), "pad": .string(padding)])) != nil {
                tracked += 1
            }
        }
        await engine.persisted()
        return tracked
    }

    private func accounted(_ status: EngineStatus) -> Int {
        status.pendingNormal + status.pendingCritical + status.inFlight + status.delivered + status.deadLettered
            + status.evicted + status.expired + status.rejected
    }

    // SPEC S2, S7: tracking into a full disk evicts the oldest logs for new ones; every log is stored, evicted or
    // rejected, and counted.
    @Test func everyLogTrackedIntoAFullDiskIsAccountedFor() async throws {
        guard let disk = SmallDisk.mount(megabytes: 3) else { return }
        defer { disk.unmount() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: configuration(disk, endpoint: server.baseURL))
        defer { engine.shutdown() }

        let tracked = await trackUntilFullAndBeyond(engine)

        let status = try await engine.status()
        #expect(tracked == 30_000)
        #expect(status.evicted > 0, "the disk did not fill: nothing to prove")
        #expect(status.delivered == 0)
        #expect(tracked == status.pendingNormal + status.pendingCritical + status.inFlight + status.evicted + status.rejected)
        #expect(status.pendingNormal > 1000, "the store keeps what the disk holds")
    }

    // SPEC S7: with the disk still full, everything that was kept is delivered (deleting delivered logs needs no
    // room the disk does not have).
    @Test func whatWasKeptIsDeliveredWhileTheDiskIsStillFull() async throws {
        guard let disk = SmallDisk.mount(megabytes: 3) else { return }
        defer { disk.unmount() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: configuration(disk, endpoint: server.baseURL))
        defer { engine.shutdown() }
        let tracked = await trackUntilFullAndBeyond(engine)
        let kept = try await engine.withStore { store in try store.allLogs().map { $0.id.string.lowercased() } }
        disk.fill()
        #expect(disk.availableBytes < 4096)

        engine.dispatch()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(60)))

        let status = try await engine.status()
        #expect(Set(server.uniqueLogs().map { $0.id.lowercased() }) == Set(kept))
        #expect(status.pendingNormal + status.pendingCritical + status.inFlight == 0)
        #expect(status.delivered == kept.count)
        #expect(tracked == accounted(status))
        #expect(disk.availableBytes < 4096, "the disk stayed full")
    }

    // SPEC S2, S7: once delivered logs are deleted, new logs fit again on the same full disk: stored, nothing evicted
    // or rejected for them.
    @Test func newLogsAreStoredAfterDeliveryOnTheFullDisk() async throws {
        guard let disk = SmallDisk.mount(megabytes: 3) else { return }
        defer { disk.unmount() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: configuration(disk, endpoint: server.baseURL))
        defer { engine.shutdown() }
        var tracked = await trackUntilFullAndBeyond(engine)
        disk.fill()
        engine.dispatch()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(60)))
        let before = try await engine.status()

        tracked += await trackUntilFullAndBeyond(engine, count: 2000)

        let after = try await engine.status()
        #expect(after.pendingNormal == 2000)
        #expect(after.evicted == before.evicted)
        #expect(after.rejected == before.rejected)
        #expect(tracked == accounted(after))
        #expect(disk.availableBytes < 4096, "the disk stayed full")
    }

    // SPEC S7: when the disk has room again, the store takes its reserve back and returns to its configured cap.
    @Test func theStoreReturnsToItsCapWhenTheDiskHasRoomAgain() async throws {
        guard let disk = SmallDisk.mount(megabytes: 8) else { return }
        defer { disk.unmount() }
        let server = try startMock("ok"); defer { try? server.stop() }
        var configuration = configuration(disk, endpoint: server.baseURL)
        configuration.maxStorageSize = 2 * 1024 * 1024
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        // Leave the store about 1 MiB of the disk.
        let blocker = disk.path + "/blocker"
        #expect(FileSystem.allocate(blocker, bytes: disk.availableBytes - 1024 * 1024))
        var tracked = await trackUntilFullAndBeyond(engine, count: 10_000)
        let capped = try await engine.withStore { store in store.diskCapped }
        #expect(capped)

        FileSystem.remove(blocker)
        // The disk is read at most twice a second; the test does not wait for that.
        _ = try await engine.withStore { store in store.lastDiskCheckNs = 0 }
        tracked += await trackUntilFullAndBeyond(engine, count: 10_000)

        let (stillCapped, reserve) = try await engine.withStore { store in
            (store.diskCapped, FileSystem.exists(store.reservePath))
        }
        #expect(!stillCapped)
        #expect(reserve)
        let status = try await engine.status()
        #expect(tracked == accounted(status))
    }
}
