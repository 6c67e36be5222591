import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D1, D4, D6, D7, A8a: the engine's PostHog destination against the real mock, which validates PostHog's capture
/// API as strictly as posthog-python's captures, through the scenarios of Fixtures/scenarios/.
@Suite("PostHog destination against the mock (SPEC D1, D4, D7, A8a)")
struct PostHogDestinationTests {
    /// Every PostHog event the mock holds, as sent.
    static func events(_ server: MockServer) -> [[String: Any]] {
        server.vendorEvents().filter { $0.vendor == .posthog }.compactMap { jsonLines($0.json).first }
    }

    static func configuration(_ dir: TempDirectory, _ server: MockServer) -> Configuration {
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .posthog
        configuration.apiKey = "phc_test_key"
        return configuration
    }

    // SPEC D7: `emit --destination posthog` delivers every log exactly once (by `uuid`) through each scenario a log
    // survives: faults, lost answers (absorbed as duplicates), slowness, throttling, a skewed server clock.
    @Test(arguments: ["ok", "flaky", "lost-ack", "drop-before-body", "slow-network", "throttle", "skewed-clock", "too-large"])
    func everyLogArrivesOnceUnderTheScenario(scenario: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario); defer { try? server.stop() }
        let count = 200
        let keyFile = dir.file("key")
        try "phc_from_a_file\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "\(count)", "--destination", "posthog",
                                    "--api-key-file", keyFile, "--endpoint", server.baseURL, "--wait-delivered",
                                    "--timeout", "60"] + OTLPDestinationTests.fast, in: dir)
        #expect(result.status == 0, "\(scenario): \(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["delivered"] as? Int == count)
        let uuids = Self.events(server).compactMap { $0["uuid"] as? String }
        #expect(uuids.count == count, "\(scenario): each log once, by its uuid")
        #expect(Set(uuids).count == count)
        #expect(server.stats().vendors["posthog"]?.eventsUnique == count)
        #expect(!result.errors.contains("phc_from_a_file"), "the key is never logged")
    }

    // SPEC D4: the events as PostHog's SDKs make them: distinct_id the install id until a user signs in, $session_id
    // from session_start to session_end, $screen with $screen_name, $set for user properties, the device's $-properties;
    // SPEC A8a: identify is $identify with distinct_id the user and $anon_distinct_id the install id, its traits as
    // $set, and later events carry the user's distinct_id.
    @Test func eventsCarryPostHogsModel() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = Self.configuration(dir, server)
        configuration.appNamespace = "com.example.shop"
        configuration.appVersion = "2.1"
        let engine = try OutboxEngine(configuration: configuration)
        let install = engine.installID.uuidString.lowercased()
        try trackEveryLogType(engine)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        let events = Self.events(server)
        func named(_ name: String) throws -> [String: Any] { try #require(events.first { $0["event"] as? String == name }, "\(name)") }
        func properties(_ event: [String: Any]) -> [String: Any] { event["properties"] as? [String: Any] ?? [:] }

        let viewed = try named("Viewed")
        #expect(viewed["distinct_id"] as? String == install)
        #expect(properties(viewed)["n"] as? Int == 3)
        #expect(properties(viewed)["price"] as? Double == 9.5)
        #expect(properties(viewed)["hd"] as? Bool == true)
        #expect(properties(viewed)["$lib"] as? String == "outbox")
        #expect(properties(viewed)["$device_id"] as? String == install)
        #expect(properties(viewed)["$app_version"] as? String == "2.1")
        #expect(properties(viewed)["$app_namespace"] as? String == "com.example.shop")
        #expect(properties(viewed)["$device_type"] as? String == "Desktop")
        let session = try #require(properties(viewed)["$session_id"] as? String)
        #expect(session.count == 36 && Array(session)[14] == "7", "a UUIDv7")
        #expect(properties(try named("session_start"))["$session_id"] as? String == session)
        #expect(properties(try named("session_end"))["$session_id"] as? String == session)

        let screen = try named("$screen")
        #expect(properties(screen)["$screen_name"] as? String == "Cart")
        #expect(properties(screen)["path"] as? String == "/cart")
        #expect((properties(try named("$set"))["$set"] as? [String: Any])?["plan"] as? String == "pro")

        let identify = try named("$identify")
        #expect(identify["distinct_id"] as? String == "u-7")
        #expect(properties(identify)["$anon_distinct_id"] as? String == install)
        #expect((properties(identify)["$set"] as? [String: Any])?["email"] as? String == "a@example.com")
        #expect(try named("Paid")["distinct_id"] as? String == "u-7")
        let location = try named("location")
        #expect(properties(location)["latitude"] as? Double == 41.0)
        #expect(properties(location)["accuracy"] as? Double == 5)
        #expect(events.allSatisfy { ($0["timestamp"] as? String)?.hasSuffix("Z") == true })
    }

    // SPEC R1 on PostHog: 401 stops sending and keeps the data.
    @Test func unauthorizedStopsAndKeepsTheData() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("unauthorized"); defer { try? server.stop() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "30", "--destination", "posthog",
                                    "--api-key", "phc_k", "--endpoint", server.baseURL, "--wait-delivered",
                                    "--timeout", "2"] + OTLPDestinationTests.fast, in: dir)
        #expect(result.status == 1, "\(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["pending"] as? Int == 30)
    }

    // SPEC R2 on PostHog: the mock refuses a whole request holding the poison event; bisection leaves it alone in
    // the dead letters and delivers the rest once each.
    @Test func aPoisonLogAloneIsDeadLettered() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("poison"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, server))
        for i in 0..<20 { try engine.trackEvent(i == 7 ? "poison" : "fine", properties: ["i": .int(Int64(i))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.deadLetters == 1)
        #expect(status.delivered == 19)
        #expect(Self.events(server).count == 19)
    }

    // SPEC D6: an event over PostHog's 1 MB is dead-lettered before any request, the limit in its reason (reached
    // through the Swift API with characters of many combining marks, which T3 counts as one each); its
    // neighbours arrive.
    @Test func anEventOverOneMegabyteIsDeadLetteredWithTheLimit() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = Self.configuration(dir, server)
        configuration.maxStorageSize = 64 * 1024 * 1024
        let engine = try OutboxEngine(configuration: configuration)
        // About 1 002 000 bytes stored: over PostHog's limit, under the dead-letter table's 1 MiB cap (R2), so the
        // letter is kept to be read.
        let heavy = "e" + String(repeating: "\u{301}", count: 250)          // one character, 501 bytes
        var properties: [String: PropertyValue] = [:]
        for key in 0..<20 { properties["p\(key)"] = .string(String(repeating: heavy, count: 100)) }
        try engine.trackEvent("small-before")
        try engine.trackEvent("huge", properties: properties)
        try engine.trackEvent("small-after")
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.deadLetters == 1)
        #expect(Set(Self.events(server).compactMap { $0["event"] as? String }).isSuperset(of: ["small-before", "small-after"]))
        let letter = try #require(try OutboxEngine.deadLetters(inStoreAt: dir.file()).first)
        #expect(letter.reason.contains("1000000"), "\(letter.reason)")
    }

    // SPEC D1: PostHog without its key is refused at configuration, naming the destination and the key.
    @Test func aMissingKeyIsRefusedNamingTheDestination() throws {
        var configuration = Configuration(storePath: "/tmp/unused.outbox")
        configuration.endpoint = "http://127.0.0.1:9"
        configuration.destination = .posthog
        #expect(throws: OutboxError.invalidConfiguration("destination posthog needs apiKey, the project API key (phc_…)")) {
            try configuration.validate()
        }
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--destination", "posthog",
                                    "--endpoint", "http://127.0.0.1:9"], in: dir)
        #expect(result.status == 64, "a usage error")
        #expect(result.errors.contains("--destination posthog needs --api-key"), "\(result.errors)")
    }
}
