import Foundation
import Testing
@testable import OutboxMock

/// The other vendors' wires over real HTTP to a real server (SPEC V1–V5): every captured request of the
/// official clients is replayed, twice, and the counts, de-duplication and answers checked.
@Suite("Vendor wires over HTTP (SPEC V1–V5)")
struct VendorTests {
    // SPEC V5, V2, V3, V4: each captured request is accepted with the answer its client requires, its
    // events counted once under its vendor; replayed, they are all duplicates (except records without a key).
    @Test(arguments: [Vendor.segment, .posthog, .snowplow, .mixpanel])
    func capturedRequestsReplayWithCountsAndDeduplication(_ vendor: Vendor) throws {
        let fixtures = try VendorFixture.all(vendor).filter { $0.status == 200 }
        #expect(fixtures.count >= 2)
        try withServer { (server: MockServer) throws in
            var expected = MockStats.VendorStats.zero
            for fixture in fixtures {
                for round in 0..<2 {
                    let response = try fixture.send(server.port)
                    #expect(response.status == 200, "\(fixture.name): \(response.text)")
                    try expectSuccessShape(vendor, fixture, response)
                    expected.requests += 1
                    expected.eventsReceived += fixture.events
                    if round == 0 || !fixture.hasKeys {
                        expected.eventsUnique += fixture.events
                    } else {
                        expected.eventsDuplicate += fixture.events
                    }
                }
            }
            let stats = server.stats()
            #expect(stats.vendor(vendor) == expected)
            // SPEC V4: App Center's own counts are untouched, every other vendor is present with zeros.
            #expect(stats.logsReceived == 0 && stats.requests == expected.requests)
            for other in Vendor.allCases where other != vendor {
                #expect(stats.vendors[other.rawValue] == .zero, "\(other)")
            }
            #expect(server.vendorEvents().count == expected.eventsUnique)
            #expect(server.vendorEvents().allSatisfy { $0.vendor == vendor })
        }
    }

    /// The answer each client takes as success, read from its source at the pinned version (SPEC V2).
    private func expectSuccessShape(_ vendor: Vendor, _ fixture: VendorFixture, _ response: TestResponse) throws {
        switch vendor {
        case .segment:
            #expect(response.json["success"] as? Bool == true)
        case .posthog:
            if fixture.uri.hasPrefix(PostHogWire.v1Path) {
                // v1: a 2xx without `results` makes the client drop the batch.
                #expect(response.json["results"] as? [String: Any] != nil)
            } else {
                #expect(response.json["status"] as? Int == 1)
            }
        case .snowplow:
            if fixture.method == "GET" {
                #expect(response.header("Content-Type") == "image/gif")
                #expect(response.body.starts(with: Array("GIF89a".utf8)))
            }
        case .mixpanel:
            // The Python client sends verbose=1 and needs {"status": 1}.
            #expect(response.json["status"] as? Int == 1)
        case .amplitude:
            #expect(response.json["code"] as? Int == 200)
        case .appcenter, .otlp, .sensors, .ga4:
            break
        }
    }

    // SPEC V3, V5: one malformed request per vendor is refused as that vendor refuses it, and counted.
    @Test(arguments: [Vendor.segment, .posthog, .snowplow, .mixpanel])
    func malformedRequestIsRefused(_ vendor: Vendor) throws {
        let fixtures = try VendorFixture.all(vendor).filter { $0.status != 200 }
        #expect(fixtures.count == 1)
        for fixture in fixtures {
            try withServer { (server: MockServer) throws in
                let response = try fixture.send(server.port)
                #expect(response.status == fixture.status, "\(response.text)")
                switch vendor {
                case .segment: #expect(response.json["code"] as? String == "invalid_json")
                case .posthog: #expect((response.json["detail"] as? String ?? "").contains("distinct_id"))
                case .snowplow: #expect(response.text.contains("e: missing"))
                case .mixpanel:
                    #expect(response.json["status"] as? Int == 0)
                    #expect((response.json["error"] as? String ?? "").contains("token"))
                default: break
                }
                let counts = server.stats().vendor(vendor)
                #expect(counts.tuple == [1, 0, 0, 0, fixture.refused])
                #expect(server.vendorEvents().isEmpty)
            }
        }
    }

    // SPEC V4: /_mock/stats has `vendors` with every vendor, zeros without traffic; X1's keys unchanged.
    @Test func statsListEveryVendorWithZeros() throws {
        try withServer { (server: MockServer) throws in
            let json = try statsJSON(server.port)
            let vendors = try #require(json["vendors"] as? [String: [String: Int]])
            #expect(Set(vendors.keys) == Set(Vendor.allCases.map(\.rawValue)))
            for (_, counts) in vendors {
                #expect(counts == ["requests": 0, "events_received": 0, "events_unique": 0, "events_duplicate": 0,
                                   "events_refused": 0])
            }
            #expect(json["logs_received"] as? Int == 0)
        }
    }

    // SPEC V3, X1: /_mock/logs holds one line per unique event of any vendor, with `vendor` and the event.
    @Test func logsListEveryVendorsEventsInArrivalOrder() throws {
        try withServer { (server: MockServer) throws in
            try Wire.post(server.port, Wire.events(1, name: "appcenter-event"))
            let segment = try #require(try VendorFixture.all(.segment).first { $0.name == "batch-gzip" })
            _ = try segment.send(server.port)
            _ = try segment.send(server.port)
            let lines = try HTTP.get(server.port, "/_mock/logs").jsonLines
            #expect(lines.map { $0["vendor"] as? String } == ["appcenter", "segment", "segment", "segment"])
            #expect(lines.dropFirst().allSatisfy { $0["event"] as? String == "Order Completed" && $0["messageId"] != nil })
            #expect(lines.allSatisfy { $0["received_at"] is String })
            #expect(server.uniqueLogs().count == 1)
        }
    }

    // SPEC V1: Segment's write key comes from HTTP Basic or the body; without either the request is refused.
    @Test func segmentWriteKeyFromBasicOrBody() throws {
        try withServer { (server: MockServer) throws in
            let message = #"{"type":"track","userId":"u","event":"E","messageId":"m-1"}"#
            func post(_ body: String, auth: String?) throws -> TestResponse {
                var headers = [("Content-Type", "application/json")]
                if let auth { headers.append(("Authorization", auth)) }
                return try TestConnection(port: server.port).request("POST", "/v1/batch", headers: headers,
                                                                    body: Array(body.utf8))
            }
            #expect(try post(#"{"batch":[\#(message)],"writeKey":"WK"}"#, auth: nil).status == 200)
            #expect(try post(#"{"batch":[\#(message)]}"#, auth: "Basic V0s6").status == 200)
            let none = try post(#"{"batch":[\#(message)]}"#, auth: nil)
            #expect(none.status == 401)
            #expect(none.json["code"] as? String == "unauthorized")
            #expect(server.stats().vendor(.segment).tuple == [3, 2, 1, 1, 0])
        }
    }

    // SPEC V1, V3: Segment's single-call paths take one message, typed by the path; a message the service
    // drops (no userId or anonymousId, a track without event) is answered 200 and counted as refused.
    @Test func segmentSingleCallsAndDroppedMessages() throws {
        try withServer { (server: MockServer) throws in
            func post(_ path: String, _ body: String) throws -> TestResponse {
                try TestConnection(port: server.port).request(
                    "POST", path, headers: [("Content-Type", "application/json"), ("Authorization", "Basic V0s6")],
                    body: Array(body.utf8))
            }
            #expect(try post("/v1/identify", #"{"userId":"u","traits":{"plan":"pro"},"messageId":"id-1"}"#).status == 200)
            #expect(try post("/v1/track", #"{"anonymousId":"a","event":"Played","messageId":"id-2"}"#).status == 200)
            let dropped = try post("/v1/batch", #"{"batch":[{"type":"track","event":"E"},{"type":"track","userId":"u"}]}"#)
            #expect(dropped.status == 200)
            #expect(server.stats().vendor(.segment).tuple == [3, 2, 2, 0, 2])
            let events = server.vendorEvents()
            #expect(events.map(\.name) == ["identify", "Played"])
            #expect(events.first?.json.contains(#""type":"identify""#) == true)
            let big = try post("/v1/track", #"{"userId":"u","event":"E","properties":{"p":""# + String(repeating: "x", count: 33_000) + #""}}"#)
            #expect(big.status == 400)
            #expect(big.json["code"] as? String == "payload_too_large")
        }
    }

    // SPEC V2, V3: PostHog v1 refuses an invalid event alone, as `results[uuid].result = "drop"` in a 200.
    @Test func postHogV1DropsInvalidEventsInsideA200() throws {
        try withServer { (server: MockServer) throws in
            let good = "0b4e1c6a-8f8e-4f57-9b1a-2d7c33c1a001"
            let bad = "0b4e1c6a-8f8e-4f57-9b1a-2d7c33c1a002"
            let body = #"{"created_at":"2026-11-24T05:00:00Z","batch":[{"event":"E","uuid":"\#(good)","distinct_id":"u","#
                + #""timestamp":"2026-11-24T05:00:00.000Z"},{"event":"E","uuid":"\#(bad)"}]}"#
            let response = try TestConnection(port: server.port).request(
                "POST", PostHogWire.v1Path, headers: [("Content-Type", "application/json"),
                                                     ("Authorization", "Bearer phc_key")], body: Array(body.utf8))
            #expect(response.status == 200)
            let results = try #require(response.json["results"] as? [String: [String: Any]])
            #expect(Array(results.keys) == [bad])
            #expect(results[bad]?["result"] as? String == "drop")
            #expect(server.stats().vendor(.posthog).tuple == [1, 1, 1, 0, 1])
            let noAuth = try TestConnection(port: server.port).request(
                "POST", PostHogWire.v1Path, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
            #expect(noAuth.status == 401)
        }
    }

    // SPEC V2: PostHog v0 success is exactly 200 — a scenario's 202 is answered as given, in PostHog's shape.
    @Test func scenarioAnswersInTheVendorsShape() throws {
        let scenario = #"{"rules":[{"match":{"vendor":"mixpanel"},"respond":{"status":503}},"#
            + #"{"match":{"vendor":"posthog"},"respond":{"status":503,"headers":{"Retry-After":"2"}}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let track = try #require(try VendorFixture.all(.mixpanel).first { $0.name == "track" })
            let mixpanel = try track.send(server.port)
            #expect(mixpanel.status == 503)
            #expect(mixpanel.json["status"] as? Int == 0)
            #expect(mixpanel.json["error"] is String)
            let batch = try #require(try VendorFixture.all(.posthog).first { $0.name == "batch-v0" })
            let posthog = try batch.send(server.port)
            #expect(posthog.status == 503)
            #expect(posthog.header("Retry-After") == "2")
            #expect(posthog.json["detail"] is String)
            // SPEC M8 `match.vendor`: Segment matches neither rule.
            let segment = try #require(try VendorFixture.all(.segment).first { $0.name == "batch-gzip" })
            #expect(try segment.send(server.port).status == 200)
            let stats = server.stats()
            // Faulted requests record nothing.
            #expect(stats.vendor(.mixpanel).tuple == [1, 0, 0, 0, 0])
            #expect(stats.vendor(.posthog).tuple == [1, 0, 0, 0, 0])
            #expect(stats.vendor(.segment).eventsUnique == 3)
        }
    }

    // SPEC V3, M3: a lost acknowledgement (`drop_after_body`) records a vendor's events; the client's resend is
    // absorbed as duplicates by the vendor's key.
    @Test func lostAcknowledgementIsDeduplicatedOnResend() throws {
        let scenario = #"{"rules":[{"match":{"requests":"1"},"action":"drop_after_body"}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let batch = try #require(try VendorFixture.all(.posthog).first { $0.name == "batch-v0-gzip" })
            #expect(outcome { try batch.send(server.port) } == "closed")
            #expect(try batch.send(server.port).status == 200)
            #expect(server.stats().vendor(.posthog).tuple == [2, 6, 3, 3, 0])
            // SPEC M4: the live page shows every vendor's counts.
            #expect(LivePage.html.contains("stats.vendors"))
        }
    }

    // SPEC V4a: `requests` numbers the ingestion requests of all vendors together; control calls are not numbered.
    @Test func requestNumbersCountEveryVendor() throws {
        let scenario = #"{"rules":[{"match":{"requests":"3"},"respond":{"status":500}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let segment = try #require(try VendorFixture.all(.segment).first { $0.name == "batch-gzip" })
            let snowplow = try #require(try VendorFixture.all(.snowplow).first { $0.name == "tp2-post" })
            let mixpanel = try #require(try VendorFixture.all(.mixpanel).first { $0.name == "track" })
            #expect(try segment.send(server.port).status == 200)
            _ = try statsJSON(server.port)
            #expect(try snowplow.send(server.port).status == 200)
            let third = try mixpanel.send(server.port)
            #expect(third.status == 500)
            #expect(third.json["status"] as? Int == 0)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            #expect(server.stats().requests == 4)
        }
    }

    // SPEC V4b, X2: `log_name` matches each vendor's event name, so a poison event can be refused.
    @Test func logNameMatchesVendorEventNames() throws {
        let scenario = #"{"rules":[{"match":{"log_name":"order"},"respond":{"status":400}},"#
            + #"{"match":{"log_name":"Song Played"},"respond":{"status":400}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            // Snowplow's structured event is named by its action `se_ac`.
            let get = try #require(try VendorFixture.all(.snowplow).first { $0.name == "i-get" })
            #expect(try get.send(server.port).status == 400)
            let all = try #require(try VendorFixture.all(.segment).first { $0.name == "batch-all-types" })
            #expect(try all.send(server.port).status == 400)
            let gz = try #require(try VendorFixture.all(.segment).first { $0.name == "batch-gzip" })
            #expect(try gz.send(server.port).status == 200)
        }
    }

    // SPEC V1: Mixpanel's data= may be base64 or plain JSON, or the body JSON; verbose picks the answer.
    @Test func mixpanelBodiesAndAnswers() throws {
        try withServer { (server: MockServer) throws in
            let event = #"{"event":"E","properties":{"token":"t","distinct_id":"u","time":1795496457,"$insert_id":"abc-1"}}"#
            let b64 = Data(event.utf8).base64EncodedString()
                .replacingOccurrences(of: "+", with: "%2B").replacingOccurrences(of: "/", with: "%2F")
                .replacingOccurrences(of: "=", with: "%3D")
            func post(_ path: String, _ type: String, _ body: String, auth: Bool = false) throws -> TestResponse {
                var headers = [("Content-Type", type)]
                if auth { headers.append(("Authorization", "Basic c2VjcmV0Og==")) }
                return try TestConnection(port: server.port).request("POST", path, headers: headers, body: Array(body.utf8))
            }
            let plain = try post("/track", "application/x-www-form-urlencoded", "data=\(b64)")
            #expect(plain.status == 200)
            #expect(plain.text == "1")
            let verbose = try post("/track?verbose=1", "application/json", "[\(event)]")
            #expect(verbose.json["status"] as? Int == 1)
            // /import ingests the valid records of a partly refused batch and lists the others.
            let imported = #"[{"event":"I","properties":{"time":1795496457,"distinct_id":"u","$insert_id":"imp-1"}},"#
                + #"{"event":"I","properties":{"distinct_id":"u","$insert_id":"imp-2"}}]"#
            let partial = try post("/import", "application/json", imported, auth: true)
            #expect(partial.status == 400)
            #expect(partial.json["num_records_imported"] as? Int == 1)
            #expect((partial.json["failed_records"] as? [[String: Any]])?.first?["insert_id"] as? String == "imp-2")
            #expect(try post("/import", "application/json", imported).status == 401)
            // The second /track is a duplicate of the first ($insert_id abc-1).
            #expect(server.stats().vendor(.mixpanel).tuple == [4, 3, 2, 1, 1])
        }
    }

    // SPEC V3, X2: a rule that only delays (no status) is a slow healthy server: Mixpanel's partly refused
    // /import still ingests its valid record.
    @Test func delayedNormalAnswerRecordsWhatTheHealthyServerRecords() throws {
        try withServer(scenario: #"{"rules":[{"match":{"vendor":"mixpanel"},"respond":{"delay_ms":10}}]}"#) {
            (server: MockServer) throws in
            let imported = #"[{"event":"I","properties":{"time":1795496457,"distinct_id":"u","$insert_id":"imp-1"}},"#
                + #"{"event":"I","properties":{"distinct_id":"u","$insert_id":"imp-2"}}]"#
            let response = try TestConnection(port: server.port).request(
                "POST", "/import", headers: [("Content-Type", "application/json"), ("Authorization", "Basic c2VjcmV0Og==")],
                body: Array(imported.utf8))
            #expect(response.status == 400)
            #expect(server.stats().vendor(.mixpanel).tuple == [1, 1, 1, 0, 1])
        }
    }

    // SPEC V3: Snowplow's GET /i and tp2 POST share `eid` de-duplication; a bad self-describing payload is refused.
    @Test func snowplowValidation() throws {
        try withServer { (server: MockServer) throws in
            let event = #"{"e":"ue","p":"pc","tv":"py-1.1.0","eid":"5e0d5b2a-3f55-4a7e-9c1b-222222222222","ue_pr":"not json"}"#
            let body = #"{"schema":"iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4","data":[\#(event)]}"#
            let response = try TestConnection(port: server.port).request(
                "POST", SnowplowWire.postPath, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
            #expect(response.status == 400)
            #expect(response.text.contains("ue_pr"))
            let wrongMethod = try TestConnection(port: server.port).request("POST", "/i")
            #expect(wrongMethod.status == 405)
        }
    }

    // SPEC V1: an encoding the mock cannot inflate is refused with 415 in the vendor's shape (PostHog v1's zstd).
    @Test func unsupportedEncodingIsRefused() throws {
        try withServer { (server: MockServer) throws in
            let response = try TestConnection(port: server.port).request(
                "POST", PostHogWire.v1Path, headers: [("Content-Type", "application/json"), ("Content-Encoding", "zstd"),
                                                     ("Authorization", "Bearer k")], body: [0x28, 0xB5, 0x2F, 0xFD])
            #expect(response.status == 415)
            #expect((response.json["detail"] as? String ?? "").contains("zstd"))
        }
    }

    // SPEC V4b: the timestamps the vendors send — RFC 3339 with any fraction and offset, epoch ms strings.
    @Test func vendorTimestampsParse() {
        #expect(VendorTime.iso8601Ms("2026-11-22T07:05:21.303+00:00") == 1_795_331_121_303)
        #expect(VendorTime.iso8601Ms("2026-11-22T07:05:21.303912Z") == 1_795_331_121_303)
        #expect(VendorTime.iso8601Ms("2026-11-22T08:05:21+01:00") == 1_795_331_121_000)
        #expect(VendorTime.iso8601Ms("2026-11-22T07:05:21") == nil)
        #expect(VendorTime.iso8601Ms("2026-02-30T07:05:21Z") == nil)
        #expect(VendorTime.decimalMs("1795496456957") == 1_795_496_456_957)
        #expect(VendorTime.decimalMs("17954.5") == nil)
    }

    // SPEC V1, M7: vendors' events count in the delivery delay; OTLP's paths are routed to it (a body without
    // OTLP's Content-Type is its 415, counted under otlp).
    @Test func delaysIncludeVendorEventsAndOTLPIsRouted() throws {
        try withServer { (server: MockServer) throws in
            let now = Int64(Date().timeIntervalSince1970 * 1000) - 5000
            let body = #"{"batch":[{"type":"track","userId":"u","event":"E","messageId":"d-1","timestamp":"\#(ISOTimestamp.format(epochMs: now))"}],"writeKey":"k"}"#
            #expect(try TestConnection(port: server.port).request(
                "POST", "/v1/batch", headers: [("Content-Type", "application/json")], body: Array(body.utf8)).status == 200)
            let delay = server.stats().delayMs
            #expect(delay.p50 >= 5000 && delay.p50 < 60_000)
            let otlp = try TestConnection(port: server.port).request("POST", "/v1/logs", headers: [], body: [1, 2])
            #expect(otlp.status == 415)
            #expect(server.stats().vendor(.otlp).requests == 1)
        }
    }
}
