import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D1: a store written by the release before destinations — pending logs, dead letters, a session in
/// progress — opens and delivers after the change. `Fixtures/stores/release-0.1.0.outbox` was written by that
/// release's engine with `makeFixture` below (OUTBOX_MAKE_UPGRADE_FIXTURE=PATH runs it).
@Suite("Upgrade of a store written by the previous release (SPEC D1)")
struct UpgradeTests {
    static let fixture = "Fixtures/stores/release-0.1.0.outbox"
    /// What the fixture holds: the session's start, then these events, pending; and 3 dead letters.
    static let pendingEvents = 12
    static let deadLetters = 3

    // Writes the fixture: a session started (automatic tracking), 3 poison events refused with 400 (dead
    // letters), then 12 events tracked while the server is unreachable, and the engine stopped with its session open.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["OUTBOX_MAKE_UPGRADE_FIXTURE"] != nil))
    func makeFixture() async throws {
        let path = try #require(ProcessInfo.processInfo.environment["OUTBOX_MAKE_UPGRADE_FIXTURE"])
        let poison = try startMock("poison"); defer { try? poison.stop() }
        var configuration = fastConfiguration(store: path, endpoint: poison.baseURL)
        configuration.sessionTracking = .automatic
        configuration.dispatchInterval = .zero
        configuration.appVersion = "0.1.0-fixture"
        var engine = try OutboxEngine(configuration: configuration)
        for i in 0..<Self.deadLetters { try engine.trackEvent("poison", properties: ["i": .int(Int64(i))]) }
        for _ in 0..<20 where await dispatchResult(engine) != .noData {}
        await engine.shutdown(drainFor: .seconds(1))
        #expect(try OutboxEngine.deadLetters(inStoreAt: path).count == Self.deadLetters)
        configuration.endpoint = "http://127.0.0.1:1"  // nothing listens: what follows stays pending
        engine = try OutboxEngine(configuration: configuration)
        for i in 0..<Self.pendingEvents { try engine.trackEvent("kept", properties: ["i": .int(Int64(i))]) }
        await engine.persisted()
        engine.shutdown()
    }

    /// A copy of the previous release's store in `dir`, to be opened and changed.
    static func copyOfTheFixture(in dir: TempDirectory) throws -> String {
        let path = dir.file()
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(fixture).path
        try FileManager.default.copyItem(atPath: source, toPath: path)
        return path
    }

    @Test func aStoreOfThePreviousReleaseOpensAndDelivers() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = try Self.copyOfTheFixture(in: dir)
        let before = try StoreReport.read(path: path)
        #expect(before.pendingNormal + before.pendingCritical >= Self.pendingEvents)
        #expect(before.deadLetters == Self.deadLetters)

        let server = try startMock("ok"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: path, endpoint: server.baseURL)
        configuration.sessionTracking = .automatic
        let engine = try OutboxEngine(configuration: configuration)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.pendingNormal + status.pendingCritical + status.inFlight == 0)
        let kept = server.uniqueLogs().compactMap(\.name).filter { $0 == "kept" }
        #expect(kept.count == Self.pendingEvents)
        #expect(try OutboxEngine.deadLetters(inStoreAt: path).count == Self.deadLetters, "dead letters stay")
        #expect(try StoreReport.read(path: path).installID == before.installID, "the install keeps its id")
    }

    // BEHAVIOUR D18: the previous release's store opened with two destinations — the first unnamed, so it is the store's
    // `default` — keeps its pending logs and dead letters for the first; the added one receives only the logs stored
    // from then on.
    @Test func aStoreOfThePreviousReleaseOpensWithTwoDestinations() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = try Self.copyOfTheFixture(in: dir)
        let before = try StoreReport.read(path: path)

        let server = try startMock("ok"); defer { try? server.stop() }
        let product = try startMock("ok"); defer { try? product.stop() }
        var configuration = fastConfiguration(store: path, endpoint: server.baseURL)
        configuration.sessionTracking = .automatic
        var first = NamedDestination(name: nil, destination: .appCenter, endpoint: server.baseURL)
        first.appSecret = configuration.appSecret
        var analytics = NamedDestination(name: "product", destination: .posthog, endpoint: product.baseURL)
        analytics.apiKey = "phc_test"
        configuration.endpoint = nil
        configuration.appSecret = ""
        configuration.destinations = [first, analytics]
        let engine = try OutboxEngine(configuration: configuration)
        let added = 5
        for i in 0..<added { try engine.trackEvent("added", properties: ["i": .int(Int64(i))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.pendingNormal + status.pendingCritical + status.inFlight == 0)
        #expect(status.store.destinations.map { Set($0.keys) } == ["default", "product"])
        let names = server.uniqueLogs().compactMap(\.name)
        #expect(names.filter { $0 == "kept" }.count == Self.pendingEvents, "the first kept the old pending logs")
        #expect(names.filter { $0 == "added" }.count == added)
        let productEvents = product.vendorEvents().filter { $0.vendor == .posthog }
            .compactMap { jsonLines($0.json).first?["event"] as? String }
        #expect(productEvents.filter { $0 == "added" }.count == added, "the added destination got what came after")
        #expect(!productEvents.contains("kept"), "and none of the logs stored before it: \(productEvents)")
        let letters = try OutboxEngine.deadLetters(inStoreAt: path)
        #expect(letters.count == Self.deadLetters && letters.allSatisfy { $0.destination == "default" },
                "the old dead letters stay, the first destination's")
        #expect(try StoreReport.read(path: path).installID == before.installID)
    }
}
