import Foundation
import OutboxMock
import Testing
@testable import Outbox

/// The analytics model through the real engine, its real device context and the mock server's strict validation.
@Suite("Analytics end to end (SPEC A1–A10, W2)")
struct AnalyticsEndToEndTests {
    // SPEC W2, A10, T7: a session with every log type is accepted by the mock server as the engine sends it —
    // with this machine's device context — and every log of the session carries its sid and the user.
    @Test func aSessionWithEveryLogTypeIsAcceptedByTheMockServer() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.sessionTracking = .automatic
        configuration.tracksAppLifecycle = true
        configuration.appVersion = "2.1"
        configuration.appBuild = "210"
        let engine = try OutboxEngine(configuration: configuration)
        try engine.setUserId("u-1842")
        try engine.setCountryCode("TR")
        let timer = try engine.trackTimerStart("Video>Music>Play")
        let screen = try engine.startScreen(title: "Player", path: "/player/42")
        try engine.trackTimerEnd(timer, properties: ["hd": true])
        try engine.endScreen(screen)
        try engine.setUserProperties(["plan": "pro"])
        try engine.sendLocation(latitude: 41.0082, longitude: 28.9784)
        engine.enterBackground()
        engine.enterForeground()
        try engine.endSession()
        await engine.persisted()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()

        #expect(status.deadLettered == 0)
        let logs = server.uniqueLogs()
        // startSession, $AppStart, event, screen, userProperties, location, $AppEnd, $AppStart, endSession
        #expect(logs.count == 9)
        // W2's types (an identify goes on App Center's wire as a userProperties log, A8a).
        #expect(Set(logs.map(\.type.rawValue)) == Set(Outbox.LogType.allCases.filter { $0 != .identify }.map(\.rawValue)))
        let objects = logs.compactMap { try? JSONSerialization.jsonObject(with: Data($0.json.utf8)) as? [String: Any] }
        let sids = Set(objects.compactMap { $0["sid"] as? String })
        #expect(sids.count == 1)
        // All but the two logs of the engine's start, which precede setUserId.
        #expect(objects.filter { $0["userId"] as? String == "u-1842" }.count == 7)
        let end = try #require(objects.first { $0["type"] as? String == "endSession" })
        let device = try #require(end["device"] as? [String: Any])
        #expect(device["countryCode"] as? String == "TR")
        #expect(device["appVersion"] as? String == "2.1")
        #expect(["wired", "wifi", "none"].contains(device["networkType"] as? String ?? ""))
    }

    // SPEC A10: a log is sent with the device context it was captured under — also after a restart, when the
    // context of the new run differs (the delivery driver reads the old version back from the store).
    @Test func logsKeepTheirCapturedContextAcrossARestart() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        var offline = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        offline.endpoint = nil   // the first run only stores
        let first = try OutboxEngine(configuration: offline)
        try first.setCountryCode("TR")
        try first.trackEvent("captured in Turkey")
        await first.persisted()
        first.shutdown()

        let second = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try second.trackEvent("captured without a country")
        #expect(await second.waitUntilDelivered(timeout: .seconds(20)))
        second.shutdown()
        var countries: [String: String] = [:]
        for log in server.uniqueLogs() {
            guard let object = try? JSONSerialization.jsonObject(with: Data(log.json.utf8)) as? [String: Any],
                  let device = object["device"] as? [String: Any] else { continue }
            countries[log.name ?? ""] = device["countryCode"] as? String ?? "none"
        }
        #expect(countries == ["captured in Turkey": "TR", "captured without a country": "none"])
    }
}
