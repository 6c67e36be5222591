import Foundation
import Outbox
import OutboxMock
import SwiftApp
import Testing

/// The app against Outbox's mock server in-process, with a named scenario that the mock finds as its own resource
/// (SPEC P3): every event reaches the server through the faults.
@Suite("An app that depends on Outbox")
struct PlayerAnalyticsTests {
    @Test func everyEventReachesTheServerThroughAFlakyNetwork() async throws {
        let server = try MockServer(configuration: .init(scenario: try Scenario.fixture("flaky")))
        try server.start()
        defer { try? server.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("swift-app-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let analytics = try PlayerAnalytics(storePath: directory.appendingPathComponent("app.outbox").path,
                                            endpoint: server.baseURL, appSecret: "swift-app") {
            $0.sessionTracking = .manual
            $0.retryIntervals = [.milliseconds(50), .milliseconds(100)]
            $0.testingAllowsValuesBelowBounds = true
        }
        try analytics.openedScreen("Library")
        for index in 0..<20 { try analytics.played(track: "t\(index)", seconds: index) }
        try analytics.signedIn("u-1")
        #expect(await analytics.engine.waitUntilDelivered(timeout: .seconds(60)))
        await analytics.close()

        let stats = server.stats()
        #expect(stats.logsUnique == 22, "20 plays, a screen and the identify")
        #expect(server.scenario.rules.isEmpty == false, "the named scenario was loaded")
    }
}
