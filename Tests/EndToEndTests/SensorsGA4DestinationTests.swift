import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D11, D12: the engine's Sensors Analytics and GA4 destinations against the real mock, which validates each wire
/// as its vendor's documentation states it.
@Suite("Sensors Analytics and GA4 destinations against the mock (SPEC D11, D12)")
struct SensorsGA4DestinationTests {
    /// OTLPDestinationTests' fast settings with batches of 100: GA4's wire must cut them to its 25 events a request.
    static let fastWithLargeBatches = Array(OTLPDestinationTests.fast.dropLast(2)) + ["--batch-size", "100"]

    // SPEC D11, D7: 1 000 events under lost answers arrive exactly once at Sensors (its `_track_id` key absorbs the
    // resends), each with `_flush_time` stamped and the form's `crc` checked by the mock.
    @Test func sensorsDeliversEveryEventOnceUnderLostAcks() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let count = 1000
        let run = try await emitToMock(.sensors, scenario: "lost-ack", count: count, path: "/sa?project=default",
                                       timeout: 90, in: dir)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.count("delivered") == count)
        let ids = run.events.compactMap { $0["_track_id"] as? Int }
        #expect(ids.count == count, "each log once")
        #expect(Set(ids).count == count)
        #expect(run.events.allSatisfy { ($0["_flush_time"] as? Int ?? 0) >= ($0["time"] as? Int ?? .max) })
        let stats = try #require(run.stats)
        #expect(stats.eventsUnique == count)
        #expect(stats.eventsDuplicate > 0, "lost answers made resends, absorbed by the key")
        #expect(stats.eventsRefused == 0)
    }

    // SPEC D11: every log type as Sensors' SDKs record it.
    @Test func sensorsRecordsCarrySensorsModel() async throws {
        let run = try await trackToMock(.sensors, path: "/sa?project=shop", configure: { $0.appVersion = "2.1" }) { engine in
            let timer = try engine.trackTimerStart("Watched")
            try trackEveryLogType(engine)
            try engine.trackTimerEnd(timer)
        }
        #expect(run.delivered)
        let records = run.events, install = run.install
        #expect(records.count == 9)
        func named(_ event: String) throws -> [String: Any] { try #require(records.first { $0["event"] as? String == event }, "\(event)") }
        func properties(_ record: [String: Any]) -> [String: Any] { record["properties"] as? [String: Any] ?? [:] }
        let viewed = try named("Viewed")
        #expect(viewed["type"] as? String == "track")
        #expect(viewed["distinct_id"] as? String == install)
        #expect(viewed["anonymous_id"] as? String == install)
        #expect(properties(viewed)["n"] as? Int == 3)
        #expect(properties(viewed)["$lib"] as? String == "outbox")
        #expect(properties(viewed)["$app_version"] as? String == "2.1")
        #expect(properties(viewed)["$event_session_id"] as? String != nil)
        #expect(properties(try named("Watched"))["event_duration"] as? Double != nil, "a timer's duration, in seconds")
        #expect(properties(try named("$AppViewScreen"))["$screen_name"] as? String == "Cart")
        let profile = try #require(records.first { $0["type"] as? String == "profile_set" })
        #expect(properties(profile)["plan"] as? String == "pro")
        let signup = try named("$SignUp")
        #expect(signup["type"] as? String == "track_signup")
        #expect(signup["distinct_id"] as? String == "u-7")
        #expect(signup["original_id"] as? String == install)
        let paid = try named("Paid")
        #expect(paid["distinct_id"] as? String == "u-7")
        #expect(paid["login_id"] as? String == "u-7")
        #expect(properties(try named("$Location"))["$latitude"] as? Double == 41.0)
        #expect(try named("$AppEnd")["type"] as? String == "track")
    }

    // SPEC D11: an endpoint without its project is refused naming --endpoint; SPEC D12: a measurement id not of
    // GA4's form naming --measurement-id, and GA4 without its secret naming the file flag and the variable.
    @Test func badWireFieldsAreRefusedByFlag() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let sensors = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--destination", "sensors",
                                     "--endpoint", "http://127.0.0.1:9/sa"], in: dir)
        #expect(sensors.status != 0)
        #expect(sensors.errors.contains("--endpoint"), "\(sensors.errors)")
        #expect(sensors.errors.contains("project"))
        let secret = dir.file("secret")
        try "s3cr3t-value\n".write(toFile: secret, atomically: true, encoding: .utf8)
        let ga4 = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--destination", "ga4", "--measurement-id",
                                 "UA-1234", "--api-secret-file", secret, "--endpoint", "http://127.0.0.1:9"], in: dir)
        #expect(ga4.status != 0)
        #expect(ga4.errors.contains("--measurement-id"), "\(ga4.errors)")
        let noSecret = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--destination", "ga4", "--measurement-id",
                                      "G-ABC123", "--endpoint", "http://127.0.0.1:9"], in: dir)
        #expect(noSecret.status != 0)
        #expect(noSecret.errors.contains("--api-secret-file or OUTBOX_API_SECRET"), "\(noSecret.errors)")
        let plain = try runOutbox(["emit", "--store", dir.file(), "--destination", "ga4", "--api-secret", "x"], in: dir)
        #expect(plain.status != 0, "no plain flag for the secret")
    }

    // SPEC D12: 1 000 events under lost answers: GA4 de-duplicates nothing, so the mock counts the resends as
    // duplicates and each event once among the unique ones; every request within GA4's rules (events_invalid 0,
    // at most 25 events a request); the API secret never in a message.
    @Test func ga4DeliversEveryEventUniqueOnceUnderLostAcks() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let count = 1000
        let secret = dir.file("secret")
        try "s3cr3t-value\n".write(toFile: secret, atomically: true, encoding: .utf8)
        let run = try await emitToMock(.ga4, scenario: "lost-ack", count: count,
                                       arguments: ["--measurement-id", "G-TEST123", "--api-secret-file", secret,
                                                   "--log-level", "debug"],
                                       settings: Self.fastWithLargeBatches, timeout: 90, in: dir)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.count("delivered") == count)
        let stats = try #require(run.stats)
        #expect(stats.eventsUnique == count)
        #expect(stats.eventsInvalid == 0)
        #expect(stats.eventsDuplicate == stats.eventsReceived - count)
        #expect(stats.eventsDuplicate > 0, "lost answers made resends GA4 would count twice")
        #expect(stats.requests >= count / 25, "at most 25 events a request")
        #expect(!run.shows("s3cr3t-value"))
        #expect(run.events.allSatisfy { ($0["timestamp_micros"] as? Int ?? 0) > 0 })
    }

    // SPEC D12: the log types as GA4 events, a name GA4 refuses or reserves rewritten with the original kept, the
    // user id and user properties at the request's level; GA4's validation finds nothing (events_invalid 0).
    @Test func ga4EventsKeepWithinGA4sRules() async throws {
        let run = try await trackToMock(.ga4) { engine in
            try engine.startSession()
            try engine.trackEvent("Video>Music>Play", properties: ["title": .string(String(repeating: "x", count: 120))])
            try engine.trackEvent("session_start")
            try engine.trackScreen(title: "Cart", path: "/cart")
            try engine.setUserProperties(["plan": "pro"])
            try engine.identify(userId: "u-7")
            try engine.sendLocation(latitude: 41.0, longitude: 29.0, accuracy: 5)
            try engine.endSession()
        }
        #expect(run.delivered)
        let events = run.events
        let names = events.compactMap { $0["name"] as? String }
        #expect(Set(names) == ["outbox_session_start", "Video_Music_Play", "e_session_start", "screen_view",
                               "set_user_properties", "login", "location", "outbox_session_end"])
        let params = events.first { $0["name"] as? String == "Video_Music_Play" }?["params"] as? [String: Any] ?? [:]
        #expect(params["original_name"] as? String == "Video>Music>Play")
        #expect((params["title"] as? String)?.count == 100, "a value cut to GA4's 100 characters")
        #expect(params["session_id"] as? String != nil)
        let stats = try #require(run.stats)
        #expect(stats.eventsInvalid == 0)
        #expect(stats.eventsUnique == 8)
    }

    // SPEC D12: the api_secret travels in the URL; a stop that names the URL (a wrong endpoint's 404) shows it as ***.
    @Test func ga4SecretIsMaskedInTheStatus() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL + "/wrong")
        configuration.destination = .ga4
        configuration.measurementId = "G-TEST123"
        configuration.apiSecret = "s3cr3t-value"
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        try engine.trackEvent("kept")
        #expect(await dispatchResult(engine) == .error)
        let reason = try #require(try await engine.status().disabledReason)
        #expect(reason.contains("404") && reason.contains("api_secret=***"), "\(reason)")
        #expect(!reason.contains("s3cr3t-value"))
    }

    // SPEC D12: a log older than GA4's 72 hours is dead-lettered with that reason before any request, never sent;
    // its younger neighbour is delivered.
    @Test func ga4DeadLettersALogOlderThan72Hours() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        let hours73: Int64 = 73 * 3_600_000
        let clock = ManualClock(wallMs: wallMs() - hours73)
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.destination = .ga4
        configuration.measurementId = "G-TEST123"
        configuration.apiSecret = "s"
        configuration.clock = clock
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        try engine.trackEvent("old")
        clock.advance(ms: hours73)
        try engine.trackEvent("fresh")
        // The hand-moved clock never makes a batch due: each dispatch sends what is waiting (the bisected halves too).
        for _ in 0..<4 where try await engine.status().store.pendingNormal > 0 { _ = await dispatchResult(engine) }
        #expect(try await engine.status().store.pendingNormal == 0)
        let letters = try await engine.deadLetters()
        #expect(letters.count == 1)
        #expect(letters.first?.reason.contains("older than 72 hours") == true, "\(letters)")
        #expect(letters.first?.log.contains("\"old\"") == true)
        #expect(vendorEvents(server, .ga4).compactMap { $0["name"] as? String } == ["fresh"])
        #expect(server.stats().vendors["ga4"]?.eventsInvalid == 0)
    }

    // SPEC D12: the mock's validation path answers what GA4's would, and records nothing.
    @Test func ga4DebugPathAnswersValidationMessages() throws {
        let server = try startMock(); defer { try? server.stop() }
        let body = #"{"client_id":"c","events":[{"name":"session_start","params":{"ga_x":1}}]}"#
        let request = "POST /debug/mp/collect?measurement_id=G-A1&api_secret=s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        let answer = String(decoding: try #require(LoopbackHTTP.exchange(port: Int(server.port), request: Array(request.utf8))),
                            as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200"))
        let json = try #require(answer.components(separatedBy: "\r\n\r\n").last)
        let messages = try #require(jsonObject(json)["validationMessages"] as? [[String: Any]])
        #expect(messages.count == 2, "the reserved event name and the reserved parameter prefix")
        #expect(vendorEvents(server, .ga4).isEmpty)
    }
}
