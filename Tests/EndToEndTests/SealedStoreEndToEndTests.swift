import Foundation
import OutboxMock
import Testing
@testable import Outbox

/// SPEC K1 and R8 with the real engine, a real store file and the mock over loopback: a sealed store delivers what it
/// holds, and `update` rotates its key while tracking and delivery go on.
@Suite("Sealed store end to end (SPEC K1, R8)")
struct SealedStoreEndToEndTests {
    static let keyA = try! StoreKey(bytes: [UInt8](repeating: 0x11, count: 32))
    static let keyB = try! StoreKey(bytes: [UInt8](repeating: 0x22, count: 32))

    /// Waits for the engine's store to end its key rotation (`status().rotatingStoreKey`; no event says it: polled).
    static func rotationEnded(_ engine: OutboxEngine) async throws -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if try await !engine.status().rotatingStoreKey { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return try await !engine.status().rotatingStoreKey
    }

    @Test func aKeyRotatedWhileTrackingAndDeliveringLosesNothing() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock()
        defer { try? server.stop() }
        let store = dir.file()
        var configuration = fastConfiguration(store: store, endpoint: server.baseURL)
        configuration.dispatchInterval = .zero
        configuration.storeKey = Self.keyA
        do {
            let engine = try OutboxEngine(configuration: configuration)
            defer { engine.shutdown() }
            engine.setReachability(.offline)
            try engine.setUserId("sealed-user")
            for index in 0..<2000 { try engine.trackEvent("before", properties: ["i": .int(Int64(index))]) }
            await engine.persisted()
            // R8: a new key; the stored rows are sealed again a step at a time while more are tracked and sent.
            try engine.update { $0.storeKey = Self.keyB }
            #expect(try await engine.status().rotatingStoreKey)
            engine.setReachability(.online)
            for index in 0..<500 { try engine.trackEvent("during", properties: ["i": .int(Int64(index))]) }
            while await dispatchResult(engine) == .good, try await engine.status().pendingNormal > 0 {}
            #expect(try await Self.rotationEnded(engine))
            let names = server.uniqueLogs().compactMap(\.name)
            #expect(names.filter { $0 == "before" }.count == 2000)
            #expect(names.filter { $0 == "during" }.count == 500)
            // The user id was sealed again with the rest: the logs sent after the rotation still carry it.
            #expect(server.uniqueLogs().filter { $0.name == "during" }.allSatisfy { $0.json.contains("\"userId\":\"sealed-user\"") })
            // A key cannot be removed, only replaced.
            let removal = #expect(throws: OutboxError.self) { try engine.update { $0.storeKey = nil } }
            #expect(removal?.description.contains("storeKey cannot be removed") == true)
        }
        // Only the new key opens the store now.
        let stale = #expect(throws: OutboxError.self) { try OutboxEngine(configuration: configuration) }
        guard case .storeKeyInvalid? = stale else { Issue.record("got \(String(describing: stale))"); return }
        configuration.storeKey = Self.keyB
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        #expect(try await engine.status().pendingNormal == 0)
    }
}
