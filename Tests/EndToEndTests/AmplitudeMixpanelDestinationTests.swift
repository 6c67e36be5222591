import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D13: the engine's Amplitude destination against the real mock, which validates Amplitude's HTTP V2 API as its
/// documentation states it and de-duplicates by `insert_id`.
@Suite("Amplitude destination against the mock (SPEC D13, D5)")
struct AmplitudeDestinationTests {
    // SPEC D7, D13: `emit --destination amplitude` with the key from a file delivers 1 000 events exactly once (by
    // `insert_id`) through lost answers (absorbed as duplicates); the other named scenarios are
    // NamedScenarioDestinationTests'.
    @Test func everyLogArrivesOnceUnderLostAcks() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let count = 1000
        let keyFile = dir.file("key")
        try "amp_from_a_file\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let run = try await emitToMock(.amplitude, scenario: "lost-ack", count: count, arguments: ["--api-key-file", keyFile], in: dir)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.count("delivered") == count)
        let ids = run.events.compactMap { $0["insert_id"] as? String }
        #expect(ids.count == count && Set(ids).count == count, "each log once, by its insert_id")
        #expect(run.stats?.eventsUnique == count)
        #expect((run.stats?.eventsDuplicate ?? 0) > 0, "lost answers made resends, absorbed by the key")
        #expect(!run.shows("amp_from_a_file"), "the key is never shown")
    }

    // SPEC D13, D4: the events as the table in docs/BEHAVIOUR.md maps them.
    @Test func eventsCarryAmplitudesModel() async throws {
        // Amplitude's user ids have at least 5 characters: `user-7`, not `u-7`.
        let run = try await trackToMock(.amplitude, configure: { $0.appVersion = "2.1" }) { try trackEveryLogType($0, user: "user-7") }
        #expect(run.delivered)
        let events = run.events, install = run.install
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
}

/// SPEC D14: the engine's Mixpanel destination against the real mock's `/import`, strict, de-duplicating by
/// `$insert_id`.
@Suite("Mixpanel destination against the mock (SPEC D14, D5)")
struct MixpanelDestinationTests {
    // SPEC D7, D14: `emit --destination mixpanel` with the token from a file delivers 1 000 events exactly once (by
    // `$insert_id`) through lost answers and a healthy server; a service account from the flags and a file too.
    @Test(arguments: ["lost-ack", "ok"])
    func everyLogArrivesOnceUnderTheScenario(scenario: String) async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let count = 1000
        let secretFile = dir.file("secret")
        try "mp_from_a_file\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        let credentials = scenario == "ok"
            ? ["--service-account-user", "sa.user", "--service-account-secret-file", secretFile, "--project-id", "7"]
            : ["--project-token-file", secretFile]
        let run = try await emitToMock(.mixpanel, scenario: scenario, count: count, arguments: credentials, in: dir)
        #expect(run.status == 0, "\(scenario): \(run.errors)")
        #expect(run.count("delivered") == count)
        let ids = run.events.compactMap { ($0["properties"] as? [String: Any])?["$insert_id"] as? String }
        #expect(ids.count == count && Set(ids).count == count, "\(scenario): each log once, by its $insert_id")
        #expect(run.stats?.eventsUnique == count)
        #expect(!run.shows("mp_from_a_file"), "the secret is never shown")
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
        let run = try await trackToMock(.mixpanel) { try trackEveryLogType($0, user: "user-7") }
        #expect(run.delivered)
        let events = run.events, install = run.install
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
}

/// SPEC D13, D14, D5: the events a server names in its 400 are dead-lettered, the rest delivered once each.
@Suite("Events Amplitude and Mixpanel name in a 400 (SPEC D13, D14, D5)")
struct NamedEventsDestinationTests {
    // Amplitude's mock refuses events whose user_id is shorter than its 5 characters, naming them by index (the
    // others are sent again at once); Mixpanel's /import refuses records whose distinct_id is a placeholder (`null`)
    // in failed_records (the batch settled). Exactly those 6 are dead-lettered with the vendor's field, the 10
    // others delivered, nothing counted as server_rejected: every log in one term of the identity.
    @Test(arguments: [(Vendor.amplitude, "abc", "Amplitude: invalid field user_id"),
                      (.mixpanel, "null", "Mixpanel: properties.distinct_id: ")])
    func theNamedEventsAreDeadLetteredAndTheRestDelivered(wire: Vendor, badUser: String, reason: String) async throws {
        let run = try await trackToMock(wire) { engine in
            for i in 0..<10 { try engine.trackEvent("fine", properties: ["i": .int(Int64(i))]) }
            try engine.identify(userId: badUser)
            for i in 0..<5 { try engine.trackEvent("refused", properties: ["i": .int(Int64(i))]) }
        }
        #expect(run.delivered)
        #expect(run.status.deadLetters == 6)
        #expect(run.status.delivered == 10)
        #expect(run.status.serverRejected == 0)
        #expect(run.letters.allSatisfy { $0.status == 400 && $0.reason.hasPrefix(reason) }, "\(run.letters.map(\.reason))")
        #expect(run.events.count == 10)
    }
}
