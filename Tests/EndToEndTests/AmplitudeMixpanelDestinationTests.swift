import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D13: the engine's Amplitude destination against the real mock, which validates Amplitude's HTTP V2 API as its
/// documentation states it and de-duplicates by `insert_id`.
@Suite("Amplitude destination against the mock (SPEC D13, D5)")
struct AmplitudeDestinationTests {
    static func events(_ server: MockServer) -> [[String: Any]] {
        server.vendorEvents().filter { $0.vendor == .amplitude }.compactMap { jsonLines($0.json).first }
    }

    static func configuration(_ dir: TempDirectory, _ server: MockServer) -> Configuration {
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .amplitude
        configuration.apiKey = "amp-test-key"
        return configuration
    }

    // SPEC D7, D13: `emit --destination amplitude` with the key from a file delivers 1 000 events exactly once (by
    // `insert_id`) through lost answers (absorbed as duplicates), throttling (429, retried) and a healthy server.
    @Test(arguments: ["lost-ack", "throttle", "ok"])
    func everyLogArrivesOnceUnderTheScenario(scenario: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario); defer { try? server.stop() }
        let count = 1000
        let keyFile = dir.file("key")
        try "amp_from_a_file\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "\(count)", "--destination", "amplitude",
                                    "--api-key-file", keyFile, "--endpoint", server.baseURL, "--wait-delivered",
                                    "--timeout", "60"] + OTLPDestinationTests.fast, in: dir)
        #expect(result.status == 0, "\(scenario): \(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["delivered"] as? Int == count)
        let ids = Self.events(server).compactMap { $0["insert_id"] as? String }
        #expect(ids.count == count && Set(ids).count == count, "\(scenario): each log once, by its insert_id")
        #expect(server.stats().vendors["amplitude"]?.eventsUnique == count)
        #expect(!result.errors.contains("amp_from_a_file"), "the key is never logged")
    }

    // SPEC D13, D4: the events as the table in docs/BEHAVIOUR.md maps them.
    @Test func eventsCarryAmplitudesModel() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = Self.configuration(dir, server)
        configuration.appVersion = "2.1"
        let engine = try OutboxEngine(configuration: configuration)
        let install = engine.installID.uuidString.lowercased()
        try engine.startSession()
        try engine.trackEvent("Viewed", properties: ["n": .int(3), "hd": .bool(true)])
        try engine.trackScreen(title: "Cart", path: "/cart")
        try engine.setUserProperties(["plan": "pro"])
        try engine.identify(userId: "user-7", traits: ["email": "a@example.com"])
        try engine.sendLocation(latitude: 41.0, longitude: 29.0, accuracy: 5)
        try engine.endSession()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        let events = Self.events(server)
        func named(_ name: String) throws -> [[String: Any]] {
            let found = events.filter { $0["event_type"] as? String == name }
            try #require(!found.isEmpty, "\(name)")
            return found
        }
        let viewed = try named("Viewed")[0]
        #expect(viewed["device_id"] as? String == install)
        #expect(viewed["user_id"] == nil)
        #expect((viewed["event_properties"] as? [String: Any])?["n"] as? Int == 3)
        #expect(viewed["app_version"] as? String == "2.1")
        let session = try #require(viewed["session_id"] as? Int)
        #expect(try named("session_start")[0]["session_id"] as? Int == session)
        #expect(try named("session_end")[0]["session_id"] as? Int == session)
        #expect((try named("[Amplitude] Screen Viewed")[0]["event_properties"] as? [String: Any])?["[Amplitude] Screen Name"] as? String == "Cart")
        let identifies = try named("$identify")
        #expect(identifies.count == 2)
        #expect(identifies.contains { (($0["user_properties"] as? [String: Any])?["$set"] as? [String: Any])?["plan"] as? String == "pro" })
        #expect(identifies.contains { $0["user_id"] as? String == "user-7" })
        let location = try named("location")[0]
        #expect(location["location_lat"] as? Double == 41.0 && location["user_id"] as? String == "user-7")
        #expect(events.allSatisfy { ($0["time"] as? Int ?? 0) > 1_600_000_000_000 })
    }

    // SPEC D13, D5: the mock refuses events whose user_id is shorter than Amplitude's 5 characters, naming them by
    // index: exactly those are dead-lettered, the rest delivered once each; every log in one term of the identity.
    @Test func theEventsAmplitudeNamesAreDeadLetteredAndTheRestDelivered() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, server))
        for i in 0..<10 { try engine.trackEvent("fine", properties: ["i": .int(Int64(i))]) }
        try engine.identify(userId: "abc")
        for i in 0..<5 { try engine.trackEvent("short-user", properties: ["i": .int(Int64(i))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        let letters = try await engine.deadLetters()
        engine.shutdown()
        #expect(status.deadLetters == 6)
        #expect(status.delivered == 10)
        #expect(status.serverRejected == 0)
        #expect(letters.allSatisfy { $0.status == 400 && $0.reason.contains("user_id") })
        #expect(Self.events(server).count == 10)
    }
}

/// SPEC D14: the engine's Mixpanel destination against the real mock's `/import`, strict, de-duplicating by
/// `$insert_id`.
@Suite("Mixpanel destination against the mock (SPEC D14, D5)")
struct MixpanelDestinationTests {
    static func events(_ server: MockServer) -> [[String: Any]] {
        server.vendorEvents().filter { $0.vendor == .mixpanel }.compactMap { jsonLines($0.json).first }
    }

    static func configuration(_ dir: TempDirectory, _ server: MockServer) -> Configuration {
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .mixpanel
        configuration.projectToken = "mp-test-token"
        return configuration
    }

    // SPEC D7, D14: `emit --destination mixpanel` with the token from a file delivers 1 000 events exactly once (by
    // `$insert_id`) through lost answers and a healthy server; a service account from the flags and a file too.
    @Test(arguments: ["lost-ack", "ok"])
    func everyLogArrivesOnceUnderTheScenario(scenario: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario); defer { try? server.stop() }
        let count = 1000
        let secretFile = dir.file("secret")
        try "mp_from_a_file\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        let credentials = scenario == "ok"
            ? ["--service-account-user", "sa.user", "--service-account-secret-file", secretFile, "--project-id", "7"]
            : ["--project-token-file", secretFile]
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "\(count)", "--destination", "mixpanel",
                                    "--endpoint", server.baseURL, "--wait-delivered", "--timeout", "60"]
                                   + credentials + OTLPDestinationTests.fast, in: dir)
        #expect(result.status == 0, "\(scenario): \(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["delivered"] as? Int == count)
        let ids = Self.events(server).compactMap { ($0["properties"] as? [String: Any])?["$insert_id"] as? String }
        #expect(ids.count == count && Set(ids).count == count, "\(scenario): each log once, by its $insert_id")
        #expect(server.stats().vendors["mixpanel"]?.eventsUnique == count)
        #expect(!result.errors.contains("mp_from_a_file"), "the secret is never logged")
    }

    // SPEC D14: a service account needs its project id, and no secret goes in a plain flag.
    @Test func aServiceAccountWithoutItsProjectIDIsRefused() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--destination", "mixpanel",
                                    "--endpoint", "http://127.0.0.1:9", "--service-account-user", "u",
                                    "--service-account-secret-file", "/nonexistent"], in: dir)
        #expect(result.status != 0 && result.errors.contains("--project-id"), "\(result.errors)")
    }

    // SPEC D14, D4: the events as the table in docs/BEHAVIOUR.md maps them.
    @Test func eventsCarryMixpanelsModel() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, server))
        let install = engine.installID.uuidString.lowercased()
        try engine.startSession()
        try engine.trackEvent("Viewed", properties: ["n": .int(3)])
        try engine.trackScreen(title: "Cart", path: "/cart")
        try engine.identify(userId: "user-7", traits: ["email": "a@example.com"])
        try engine.sendLocation(latitude: 41.0, longitude: 29.0, accuracy: 5)
        try engine.endSession()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        let events = Self.events(server)
        func properties(_ name: String) throws -> [String: Any] {
            try #require(events.first { $0["event"] as? String == name }?["properties"] as? [String: Any], "\(name)")
        }
        let viewed = try properties("Viewed")
        #expect(viewed["distinct_id"] as? String == install && viewed["$device_id"] as? String == install)
        #expect(viewed["n"] as? Int == 3 && viewed["mp_lib"] as? String == "outbox")
        #expect((viewed["time"] as? Int ?? 0) > 1_600_000_000_000, "ms")
        let session = try #require(viewed["session_id"] as? String)
        #expect(try properties("session_start")["session_id"] as? String == session)
        #expect(try properties("$screen")["$screen_name"] as? String == "Cart")
        let identify = try properties("$identify")
        #expect(identify["distinct_id"] as? String == "user-7" && identify["$user_id"] as? String == "user-7")
        #expect(identify["$anon_id"] as? String == install)
        #expect(try properties("location")["distinct_id"] as? String == "user-7")
    }

    // SPEC D14, D5: the mock's /import refuses records whose distinct_id is a placeholder (`null`), naming them in
    // failed_records: exactly those are dead-lettered with Mixpanel's field and message, the batch settled, nothing
    // counted as server_rejected.
    @Test func theFailedRecordsAreDeadLetteredAndTheBatchSettled() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, server))
        for i in 0..<10 { try engine.trackEvent("fine", properties: ["i": .int(Int64(i))]) }
        try engine.identify(userId: "null")
        for i in 0..<5 { try engine.trackEvent("placeholder-user", properties: ["i": .int(Int64(i))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        let letters = try await engine.deadLetters()
        engine.shutdown()
        #expect(status.deadLetters == 6)
        #expect(status.delivered == 10)
        #expect(status.serverRejected == 0)
        #expect(letters.allSatisfy { $0.status == 400 && $0.reason.hasPrefix("Mixpanel: properties.distinct_id: ") })
        #expect(Self.events(server).count == 10)
    }
}
