import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D1, D4, D6, D7: the engine's Segment destination (both profiles) against the real mock, which validates
/// Segment's tracking API as strictly as analytics-python's captures, through the scenarios of Fixtures/scenarios/.
@Suite("Segment destination against the mock (SPEC D1, D4, D7)")
struct SegmentDestinationTests {
    /// Every Segment message the mock holds, as sent.
    static func messages(_ server: MockServer) -> [[String: Any]] {
        server.vendorEvents().filter { $0.vendor == .segment }.compactMap { jsonLines($0.json).first }
    }

    // SPEC D7: `emit --destination segment` delivers every log exactly once (by `messageId`), on both profiles,
    // through each scenario a log survives; the write key, given in a file, appears nowhere in the output.
    @Test(arguments: [("ok", "segment"), ("ok", "rudderstack"), ("flaky", "segment"), ("lost-ack", "segment"),
                      ("lost-ack", "rudderstack"), ("drop-before-body", "segment"), ("slow-network", "rudderstack"),
                      ("throttle", "segment"), ("skewed-clock", "segment"), ("too-large", "segment")])
    func everyLogArrivesOnceUnderTheScenario(scenario: String, profile: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario); defer { try? server.stop() }
        let count = 200
        let keyFile = dir.file("key")
        try "wk_from_a_file\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "\(count)", "--destination", "segment",
                                    "--write-key-file", keyFile, "--segment-profile", profile, "--endpoint", server.baseURL,
                                    "--wait-delivered", "--timeout", "60"] + OTLPDestinationTests.fast, in: dir)
        #expect(result.status == 0, "\(scenario)/\(profile): \(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["delivered"] as? Int == count)
        let ids = Self.messages(server).compactMap { $0["messageId"] as? String }
        #expect(ids.count == count, "\(scenario)/\(profile): each log once, by its messageId")
        #expect(Set(ids).count == count)
        #expect(server.stats().vendors["segment"]?.eventsUnique == count)
        #expect(!result.errors.contains("wk_from_a_file") && !result.output.contains("wk_from_a_file"), "the key is never shown")
    }

    // SPEC D4: the messages as Segment's libraries make them — track, screen, identify, the context objects,
    // anonymousId the install id, userId once set, context.sessionId the session — and on RudderStack's profile
    // originalTimestamp and a numeric sessionId (the session's start) with sessionStart on its first message.
    @Test(arguments: [SegmentProfile.segment, .rudderstack])
    func messagesCarryTheModel(profile: SegmentProfile) async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .segment
        configuration.writeKey = "wk"
        configuration.segmentProfile = profile
        configuration.appVersion = "2.1"
        let engine = try OutboxEngine(configuration: configuration)
        let install = engine.installID.uuidString.lowercased()
        try engine.startSession()
        try engine.trackEvent("Viewed", properties: ["n": .int(3), "hd": .bool(true)])
        try engine.trackScreen(title: "Cart", path: "/cart")
        try engine.setUserProperties(["plan": "pro"])
        try engine.identify(userId: "u-7", traits: ["email": "a@example.com"])
        try engine.sendLocation(latitude: 41.0, longitude: 29.0, accuracy: 5)
        try engine.endSession()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        let messages = Self.messages(server)
        func first(_ test: ([String: Any]) -> Bool) throws -> [String: Any] {
            let found = messages.first(where: test)
            return try #require(found)
        }
        func context(_ message: [String: Any]) -> [String: Any] { message["context"] as? [String: Any] ?? [:] }
        let viewed = try first { $0["event"] as? String == "Viewed" }
        #expect(viewed["type"] as? String == "track")
        #expect(viewed["anonymousId"] as? String == install)
        #expect(viewed["userId"] == nil)
        #expect((viewed["properties"] as? [String: Any])?["n"] as? Int == 3)
        #expect((context(viewed)["library"] as? [String: Any])?["name"] as? String == "outbox")
        #expect((context(viewed)["app"] as? [String: Any])?["version"] as? String == "2.1")
        #expect((context(viewed)["device"] as? [String: Any])?["id"] as? String == install)
        let started = try first { $0["event"] as? String == "Session Started" }
        let screen = try first { $0["type"] as? String == "screen" }
        #expect(screen["name"] as? String == "Cart")
        #expect((screen["properties"] as? [String: Any])?["path"] as? String == "/cart")
        let identify = try first { $0["type"] as? String == "identify" && $0["userId"] as? String == "u-7" }
        #expect((identify["traits"] as? [String: Any])?["email"] as? String == "a@example.com")
        let location = try first { $0["event"] as? String == "Location Updated" }
        #expect((context(location)["location"] as? [String: Any])?["latitude"] as? Double == 41.0)
        #expect((location["properties"] as? [String: Any])?["accuracy"] as? Double == 5)
        #expect(location["userId"] as? String == "u-7")
        switch profile {
        case .segment:
            let session = try #require(context(viewed)["sessionId"] as? String)
            #expect(context(started)["sessionId"] as? String == session)
            #expect(viewed["timestamp"] is String)
        case .rudderstack:
            let session = try #require(context(viewed)["sessionId"] as? Int)
            #expect(abs(Double(session) / 1000 - Date().timeIntervalSince1970) < 600, "the session's start in ms")
            #expect(context(started)["sessionStart"] as? Bool == true)
            #expect(context(viewed)["sessionStart"] == nil)
            #expect(viewed["originalTimestamp"] is String && viewed["timestamp"] == nil)
        }
    }

    // SPEC D6: a message over Segment's 32 KB is dead-lettered before any request, the limit in its reason; its
    // neighbours arrive.
    @Test func aMessageOver32KBIsDeadLetteredWithTheLimit() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .segment
        configuration.writeKey = "wk"
        let engine = try OutboxEngine(configuration: configuration)
        let heavy = "e" + String(repeating: "\u{301}", count: 20)           // one character, 41 bytes
        var properties: [String: PropertyValue] = [:]
        for key in 0..<10 { properties["p\(key)"] = .string(String(repeating: heavy, count: 100)) }  // about 41 KB
        try engine.trackEvent("small-before")
        try engine.trackEvent("huge", properties: properties)
        try engine.trackEvent("small-after")
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.deadLetters == 1)
        #expect(Set(Self.messages(server).compactMap { $0["event"] as? String }) == ["small-before", "small-after"])
        let letter = try #require(try OutboxEngine.deadLetters(inStoreAt: dir.file()).first)
        #expect(letter.reason.contains("32000"), "\(letter.reason)")
    }

    // SPEC D1: Segment without its write key is refused at configuration and on the command line.
    @Test func aMissingWriteKeyIsRefusedNamingTheDestination() throws {
        var configuration = Configuration(storePath: "/tmp/unused.outbox")
        configuration.endpoint = "http://127.0.0.1:9"
        configuration.destination = .segment
        #expect(throws: OutboxError.invalidConfiguration("destination segment needs writeKey, the source's write key")) {
            try configuration.validate()
        }
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--destination", "segment",
                                    "--endpoint", "http://127.0.0.1:9"], in: dir)
        #expect(result.status == 64, "a usage error")
        #expect(result.errors.contains("--destination segment needs --write-key"), "\(result.errors)")
    }
}
