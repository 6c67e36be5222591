import CLibUV
import Foundation
import Testing
@testable import Outbox

@Suite("Engine: tracking and durability")
struct EngineTests {
    // SPEC T5
    @Test func aCriticalLogIsCommittedBeforeTrackEventReturns() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        defer { engine.shutdown() }
        try engine.trackEvent("pay", flags: .critical)
        // Read by another connection, without asking the engine: the row is on disk already.
        #expect(try StoreReport.read(path: dir.file()).pendingCritical == 1)
    }

    // SPEC T5
    @Test func persistedReturnsOnceEverythingTrackedIsCommitted() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = testConfiguration(dir.file())
        configuration.groupCommitWindow = .milliseconds(1000)
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        for index in 0..<1000 { try engine.trackEvent("e", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        #expect(try StoreReport.read(path: dir.file()).pendingNormal == 1000)
    }

    // SPEC T1, T7: any thread may track; every log gets its own id and the fields of T7.
    @Test func manyThreadsTrackConcurrentlyAndEveryLogIsStoredOnce() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        defer { engine.shutdown() }
        let threads = 4, perThread = 5000
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<threads {
                group.addTask {
                    for index in 0..<perThread {
                        try? engine.trackEvent("t\(thread)", properties: ["i": .int(Int64(index))],
                                               flags: index % 500 == 0 ? .critical : .normal)
                    }
                }
            }
        }
        await engine.persisted()
        let logs = try await engine.withStore { try $0.allLogs() }
        #expect(logs.count == threads * perThread)
        #expect(Set(logs.map(\.id)).count == logs.count)
        let sample = payloadObject(logs[0])
        #expect(sample["type"] as? String == "event")
        #expect((sample["id"] as? String).flatMap(UUID.init(uuidString:)) != nil)
        // Per thread, the stored order is the tracking order (one intake queue, ascending sequence).
        for thread in 0..<threads {
            let ordinals = logs.filter { (payloadObject($0)["name"] as? String) == "t\(thread)" }.compactMap { properties(of: $0)["i"] as? Int }
            #expect(ordinals == Array(0..<perThread))
        }
    }

    // SPEC T2: an empty name is refused and nothing is stored.
    @Test func anEmptyNameStoresNothing() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        defer { engine.shutdown() }
        #expect(throws: OutboxError.emptyEventName) { try engine.trackEvent("") }
        #expect(throws: OutboxError.self) { try engine.trackEvent("x", properties: ["v": .double(.nan)]) }
        await engine.persisted()
        #expect(try await engine.withStore { try $0.allLogs() }.isEmpty)
    }

    // SPEC T4: the distinct-name limit holds across restarts.
    @Test func distinctEventNamesAreCappedAndRememberedAcrossRestarts() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = testConfiguration(dir.file())
        configuration.maxDistinctEventNames = 3
        var engine = try OutboxEngine(configuration: configuration)
        for name in ["a", "b", "c", "a"] { try engine.trackEvent(name) }
        #expect(throws: OutboxError.tooManyEventNames(name: "d", limit: 3)) { try engine.trackEvent("d") }
        await engine.persisted()
        engine.shutdown()
        engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        #expect(throws: OutboxError.tooManyEventNames(name: "d", limit: 3)) { try engine.trackEvent("d") }
        try engine.trackEvent("c")
        await engine.persisted()
        #expect(try await engine.withStore { try $0.allLogs() }.count == 5)
    }

    // SPEC T6
    @Test func disablingDeletesStoredLogsIgnoresNewOnesAndSurvivesRestart() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        #expect(engine.isEnabled)
        for _ in 0..<10 { try engine.trackEvent("before") }
        try engine.setEnabled(false)
        #expect(!engine.isEnabled)
        try engine.trackEvent("while-disabled")
        await engine.persisted()
        #expect(try await engine.withStore { try $0.allLogs() }.isEmpty)
        engine.shutdown()

        engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        #expect(!engine.isEnabled)
        try engine.setEnabled(true)
        try engine.trackEvent("after")
        await engine.persisted()
        #expect(try await engine.withStore { try $0.allLogs() }.count == 1)
        engine.shutdown()

        engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        defer { engine.shutdown() }
        #expect(engine.isEnabled)
    }

    // SPEC A8: the anonymous install id is created once and kept.
    @Test func theInstallIDIsPersisted() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let first = try OutboxEngine(configuration: testConfiguration(dir.file()))
        let id = first.installID
        first.shutdown()
        let second = try OutboxEngine(configuration: testConfiguration(dir.file()))
        defer { second.shutdown() }
        #expect(second.installID == id)
        #expect(try StoreReport.read(path: dir.file()).installID == id.uuidString.lowercased())
    }

    // SPEC S1: one engine per file; the file is private to its user.
    @Test func aSecondEngineOnTheSameFileGetsStoreLockedAndTheFileIs0600() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        defer { engine.shutdown() }
        #expect(throws: OutboxError.storeLocked(path: dir.file())) { try OutboxEngine(configuration: testConfiguration(dir.file())) }
        var info = stat()
        #expect(stat(dir.file(), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    // SPEC S4: logs older than the maximum age are deleted at start and never sent.
    @Test func expiredLogsAreDeletedAtStart() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        var configuration = testConfiguration(dir.file())
        configuration.clock = clock
        var engine = try OutboxEngine(configuration: configuration)
        try engine.trackEvent("old")
        clock.advance(ms: 24 * 24 * 3600 * 1000)
        try engine.trackEvent("young")
        await engine.persisted()
        engine.shutdown()
        clock.advance(ms: 2 * 24 * 3600 * 1000)  // "old" is 26 days old, "young" 2 days
        engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        let names = try await engine.withStore { try $0.allLogs() }.map { payloadObject($0)["name"] as? String }
        #expect(names == ["young"])
    }

    // Back-pressure: a caller faster than the disk waits; nothing is dropped.
    @Test func aFullIntakeMakesTheCallerWaitAndLosesNothing() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = testConfiguration(dir.file())
        configuration.intakeCapacity = 8
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        for index in 0..<5000 { try engine.trackEvent("e", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        #expect(try await engine.withStore { try $0.allLogs() }.count == 5000)
    }

    // Back-pressure by bytes: large events fill the queue's 4 MiB long before its 100 000 logs; callers wait for
    // the loop to commit, and nothing is dropped.
    @Test func largeEventsWaitForRoomByBytesAndLoseNothing() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = testConfiguration(dir.file())
        configuration.maxStorageSize = 256 << 20
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        let value = String(repeating: "v", count: 120)
        var properties: [String: PropertyValue] = [:]
        for key in 0..<20 { properties["key\(key)"] = .string(value) }  // ~3.3 KB of JSON per event
        for index in 0..<4000 {
            properties["key0"] = .string("\(index)")
            try engine.trackEvent("big", properties: properties)
        }
        await engine.persisted()
        #expect(try await engine.withStore { try $0.allLogs() }.count == 4000)
    }

    @Test func callsAfterShutdownThrowShutDown() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        engine.shutdown()
        #expect(throws: OutboxError.shutDown) { try engine.trackEvent("late") }
        engine.shutdown()  // idempotent
    }
}
