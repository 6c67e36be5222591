import Foundation
import OutboxMock
import Testing
@testable import Outbox

@Suite("Dead letters end to end (SPEC R2)")
struct DeadLetterEndToEndTests {
    // SPEC R2: a requeued letter reaches delivery at once (no restart, no new log needed) and is sent under its id.
    @Test func aRequeuedLetterIsDeliveredUnderItsOwnID() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("poison"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        defer { engine.shutdown() }
        for index in 0..<5 { try engine.trackEvent(index == 2 ? "poison" : "fine", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let letters = try await engine.deadLetters()
        try #require(letters.count == 1)

        server.setScenario(nil)
        #expect(try await engine.requeueDeadLetters() == 1)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        #expect(try await engine.deadLetters().isEmpty)
        let poison = server.uniqueLogs().filter { $0.name == "poison" }
        #expect(poison.map(\.id) == [letters[0].id.uuidString.lowercased()])
        #expect(server.stats().logsUnique == 5)
    }
}
